"""What the benchmark scripts share: whole-process measurements and a steady-state rate.

A command is timed through a tiny launcher process that starts it and reads its resource usage
with os.wait4: a command forked straight from a big benchmark process could report the parent's
resident memory as its own peak (Linux keeps ru_maxrss across exec).
"""
from __future__ import annotations

import json
import os
import statistics
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


# ---- import times (issue 34): `python -X importtime`, attributed to the top-level package ----------
def parse_importtime(text: str) -> List[Dict[str, Any]]:
    """The `-X importtime` lines of `text` (other lines ignored): each module's `name`, `self_us`,
    `cumulative_us` and `depth` (0 = imported by the script itself, not by another module)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        head, cumulative, name = line[len("import time:"):].split("|", 2)
        if not head.strip().isdigit():
            continue  # the header line: "import time: self [us] | cumulative | imported package"
        indent = len(name) - len(name.lstrip(" ")) - 1
        rows.append({"name": name.strip(), "self_us": int(head), "cumulative_us": int(cumulative),
                     "depth": indent // 2})
    return rows


def import_seconds_by_package(rows: List[Dict[str, Any]]) -> Dict[str, float]:
    """Seconds spent importing each top-level package (`onnx`, `numpy`, `inspector_cli`, ...): the sum
    of its modules' self times, wherever they were imported from; `total` is every module's."""
    out: Dict[str, float] = {"total": 0.0}
    for row in rows:
        package = row["name"].split(".")[0]
        out[package] = out.get(package, 0.0) + row["self_us"] / 1e6
        out["total"] += row["self_us"] / 1e6
    return out


def import_time(module: str, *, python: str = sys.executable, repeat: int = 5,
                env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """`import module` in `repeat` fresh processes of `python -X importtime`: the median `seconds`
    (its cumulative time), every run's (`runs`), and the median seconds of its slowest submodule
    (`slowest`, by self time in the first run: the one to name when a budget is missed)."""
    runs, slowest_runs, slowest = [], [], ""
    for _ in range(repeat):
        done = subprocess.run([python, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                              text=True, env={**os.environ, **(env or {})}, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"import {module} failed with {python}: {done.stderr.strip()[-400:]}")
        rows = parse_importtime(done.stderr)
        top = [r for r in rows if r["depth"] == 0 and r["name"] == module]
        if not top:
            raise RuntimeError(f"import {module}: no -X importtime line for it (already imported at start-up?)")
        runs.append(top[-1]["cumulative_us"] / 1e6)
        if not slowest:
            slowest = max(rows, key=lambda r: r["self_us"])["name"]
        slowest_runs.append(next((r["self_us"] for r in rows if r["name"] == slowest), 0) / 1e6)
    return {"module": module, "seconds": statistics.median(runs), "runs": runs, "slowest": slowest,
            "slowest_s": statistics.median(slowest_runs)}


# Import budgets (docs/speed.md "Import budgets"): median wall seconds of `import MODULE` alone in a
# fresh process (its own dependencies included), about 2x the figure of a quiet machine, so the next
# release that adds most of a second (ml_dtypes 0.7.0: +0.7 s) is flagged and load noise is not.
IMPORT_BUDGETS: Dict[str, float] = {
    "numpy": 0.20, "ml_dtypes": 0.35, "onnx": 0.55, "onnxruntime": 0.45, "rich.console": 0.20,
    "click": 0.10, "jinja2": 0.15, "yaml": 0.10, "tabulate": 0.10, "PIL.Image": 0.20, "inspector_cli.cli": 0.25,
}


def over_budget(measured: Mapping[str, float], budgets: Mapping[str, float] = IMPORT_BUDGETS) -> List[str]:
    """One line per module whose measured seconds exceed its budget (modules without one are not judged)."""
    return [f"IMPORT OVER BUDGET {name}: {seconds * 1000:.0f} ms > {budgets[name] * 1000:.0f} ms"
            for name, seconds in measured.items() if name in budgets and seconds > budgets[name]]
