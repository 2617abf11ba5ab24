"""How soon `mi compare` ends after Ctrl-C/SIGTERM lands while onnxruntime builds its sessions, on a
machine made busy on purpose, next to how long plain onnxruntime takes to build the same two
sessions side by side on the same machine (the wait an exit path that waited for the builds would
add). Prints the exit statuses (any other than 130/143 is a failure), the latencies and the ratio.

    python scripts/exit_latency.py --runs 16 --busy-per-core 4 --slow 0

The signal is sent once the process has mi's handlers in place and threads besides its main one
(the builds are under way), after a random 0-0.5 s; `--slow S` keeps the first build at work inside
onnxruntime for S seconds first (`MI_FAILPOINT=session:SLOW=S`), as a busy machine or a larger
model would (0: the builds alone).
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.fixtures.load import busy_processes, cores, mi_building_sessions  # noqa: E402 (the signal tests' own)
BUILD = """
import sys, threading, time
import onnxruntime as ort
paths = sys.argv[1:3]
def build(path):
    ort.InferenceSession(path, providers=["CPUExecutionProvider"])
start = time.perf_counter()
threads = [threading.Thread(target=build, args=(p,)) for p in paths]
[t.start() for t in threads]
[t.join() for t in threads]
print(time.perf_counter() - start)
"""


def write_models(folder: Path) -> Tuple[Path, Path, Path]:
    """Two 16 MB MatMul chains (sessions that take a while to build) and 6 samples."""
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((2048, 2048)).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"t{i - 1}", "W"], [f"t{i}"], name=f"mm{i}")
             for i in range(8)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2048])],
                              [helper.make_tensor_value_info("t7", TensorProto.FLOAT, ["N", 2048])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    paths = [folder / "a.onnx", folder / "b.onnx"]
    for path in paths:
        onnx.save(model, str(path))
    data = folder / "data"
    data.mkdir()
    for i in range(6):
        np.savez(data / f"s{i}.npz", x=np.full((1, 2048), 0.01 * (i + 1), np.float32))
    return paths[0], paths[1], data


def interrupted_run(a: Path, b: Path, data: Path, slow: float, signum: int, cwd: Path) -> Tuple[int, float, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), MI_FAILPOINT=f"session:SLOW={slow}" if slow else "")
    proc = subprocess.Popen([sys.executable, "-m", "inspector_cli", "compare", str(a), str(b), "-i", str(data)],
                            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and not mi_building_sessions(proc.pid):
        time.sleep(0.002)
    time.sleep(random.uniform(0.0, 0.5))
    sent = time.monotonic()
    if proc.poll() is None:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=900)
    return proc.returncode, time.monotonic() - sent, err


def plain_builds(a: Path, b: Path) -> float:
    done = subprocess.run([sys.executable, "-c", BUILD, str(a), str(b)], capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def describe(values: List[float]) -> str:
    ordered = sorted(values)
    return (f"median {statistics.median(ordered):.2f} s, 90th percentile {ordered[int(0.9 * (len(ordered) - 1))]:.2f} s, "
            f"slowest {ordered[-1]:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--busy-per-core", type=int, default=4)
    parser.add_argument("--slow", type=float, default=0.0,
                        help="seconds the first build stays at work first (MI_FAILPOINT=session:SLOW=S)")
    args = parser.parse_args()
    cpus = cores()
    with tempfile.TemporaryDirectory(prefix="mi-exit-latency-") as tmp, \
            busy_processes(args.busy_per_core * cpus, 3600.0) as busy:
        folder = Path(tmp)
        a, b, data = write_models(folder)
        latencies, builds, statuses, failures = [], [], {}, []
        for run in range(args.runs):
            signum = (signal.SIGINT, signal.SIGTERM)[run % 2]
            code, seconds, err = interrupted_run(a, b, data, args.slow, signum, folder)
            statuses[code] = statuses.get(code, 0) + 1
            if code != {signal.SIGINT: 130, signal.SIGTERM: 143}[signum]:
                failures.append(f"run {run} ({signum.name}): status {code}: {err.strip()[-300:]}")
            latencies.append(seconds)
            builds.append(plain_builds(a, b))
    print(f"{args.runs} runs, {len(busy)} busy processes on {cpus} cores, first build slowed by {args.slow} s")
    print(f"statuses: {dict(sorted(statuses.items()))}; failures: {len(failures)}")
    for failure in failures:
        print("  " + failure)
    print(f"mi's exit after the signal: {describe(latencies)}")
    print(f"plain onnxruntime building both sessions (the least waiting would add): {describe(builds)}")
    print(f"ratio of medians (exit / builds): {statistics.median(latencies) / statistics.median(builds):.3f}")


if __name__ == "__main__":
    main()
