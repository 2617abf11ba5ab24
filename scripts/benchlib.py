"""What the benchmark scripts share: whole-process measurements and a steady-state rate.

A command is timed through a tiny launcher process that starts it and reads its resource usage
with os.wait4: a command forked straight from a big benchmark process could report the parent's
resident memory as its own peak (Linux keeps ru_maxrss across exec).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

ROOT = Path(__file__).resolve().parent.parent

LAUNCHER = """
import json, os, subprocess, sys, time
watch = os.environ.get('MI_BENCH_WATCH')
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
chunks, seen = [], []
os.set_blocking(proc.stdout.fileno(), False)
while True:
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    data = proc.stdout.read()
    if data:
        chunks.append(data)
    if pid:
        break
    time.sleep(0.01)
    if watch:
        try:
            with open(watch, 'rb') as f:
                seen.append((time.perf_counter() - start, f.read().count(b'\\n')))
        except OSError:
            pass
rest = proc.stdout.read()
if rest:
    chunks.append(rest)
print(json.dumps({'wall': time.perf_counter() - start, 'rss_mib': usage.ru_maxrss / 1024,
                  'cpu': usage.ru_utime + usage.ru_stime, 'code': os.waitstatus_to_exitcode(status),
                  'seen': seen, 'output': b''.join(chunks).decode(errors='replace')}))
"""


def measure(cmd: List[str], *, cwd: Path = ROOT, env: Optional[Mapping[str, str]] = None,
            watch: Optional[Path] = None) -> Dict[str, Any]:
    """One whole process: `wall` and `cpu` seconds, peak `rss_mib`, exit `code`, its `output`
    (stdout and stderr), and with `watch` the line count of that file every 10 ms (`seen`)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}  # `env` may set PYTHONPATH too
    if watch is not None:
        full_env["MI_BENCH_WATCH"] = str(watch)
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *map(str, cmd)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def steady_rate(seen: List[List[float]], total: int) -> float:
    """Samples per second between 10% and 90% of the JSONL lines (start-up and tail excluded)."""
    def when(count: float) -> float:
        return next(t for t, n in seen if n >= count)
    try:
        return 0.8 * total / (when(0.9 * total) - when(0.1 * total))
    except (StopIteration, ZeroDivisionError):
        return float("nan")
