"""What plugin-provider discovery costs: mi with plugin packages installed against mi without them.

Runs, alternating, the same commands under two Pythons (default: .venv-ep, where onnxruntime-ep-openvino
and onnxruntime-qnn sit beside the stock onnxruntime, and .venv, the same onnxruntime alone) and prints
the median wall time of each and their ratio:
  - `mi --help` and `mi compare --help` (discovery must not run at all: no onnxruntime import);
  - a CPU `mi compare` of a zoo model writing JSON (the fingerprint lists the installed plugins);
then, in the plugin venv, the discovery a plugin provider needs (packages found on disk, the one asked
for imported for its library path and names) timed in-process, cold, apart from onnxruntime loading
the provider's library (the provider's own cost, which plain onnxruntime pays the same).

    python scripts/bench_plugin_discovery.py --repeats 15 --model /work/zoo/resnet
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

DISCOVERY = """
import time, sys
import onnxruntime  # loaded before any session is built; what follows is discovery's own cost
from inspector_cli.core import plugin_eps
t0 = time.perf_counter()
found = plugin_eps.installed_plugins()
t1 = time.perf_counter()
wanted = [p for p in found if sys.argv[1] in p.module]
libraries = [plugin_eps.load_package(p) for p in wanted]
t2 = time.perf_counter()
print(f"{(t1 - t0) * 1e3:.2f} {(t2 - t1) * 1e3:.2f} {len(found)} {','.join(n for l in libraries for n in l.ep_names)}")
"""


def timed(python: str, args: List[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-m", "inspector_cli", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-plugins", default=".venv-ep/bin/python")
    parser.add_argument("--without", default=".venv/bin/python")
    parser.add_argument("--model", default="/work/zoo/resnet", help="a zoo model folder (fp32.onnx, data/)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--provider", default="qnn", help="the plugin whose discovery is timed in-process")
    args = parser.parse_args()
    args.with_plugins, args.without = os.path.abspath(args.with_plugins), os.path.abspath(args.without)
    model, data = os.path.join(args.model, "fp32.onnx"), os.path.join(args.model, "data")
    with tempfile.TemporaryDirectory() as work:
        commands: Dict[str, List[str]] = {
            "mi --help": ["--help"],
            "mi compare --help": ["compare", "--help"],
            "mi compare (CPU, --json)": ["compare", model, model, "--inputs", data, "--json", os.path.join(work, "r.json")],
        }
        times: Dict[str, Dict[str, List[float]]] = {name: {"with": [], "without": []} for name in commands}
        for name, command in commands.items():
            for python in (args.with_plugins, args.without):  # warm the disk cache once each
                timed(python, command, work)
            for _ in range(args.repeats):
                times[name]["with"].append(timed(args.with_plugins, command, work))
                times[name]["without"].append(timed(args.without, command, work))
        print(f"{'command':28s} {'with plugins':>14s} {'without':>10s} {'ratio':>7s}   ({args.repeats} runs each, "
              "alternating, medians)")
        for name, pair in times.items():
            with_, without = statistics.median(pair["with"]), statistics.median(pair["without"])
            print(f"{name:28s} {with_ * 1e3:11.1f} ms {without * 1e3:7.1f} ms {with_ / without:7.3f}")
        cold = [subprocess.run([args.with_plugins, "-c", DISCOVERY, args.provider], capture_output=True, text=True,
                               check=True).stdout.split() for _ in range(args.repeats)]
        scan = statistics.median(float(c[0]) for c in cold)
        load = statistics.median(float(c[1]) for c in cold)
        print(f"discovery in a fresh process: scan of sys.path {scan:.2f} ms ({cold[0][2]} plugin packages), "
              f"import of the one asked for ({cold[0][3]}) {load:.2f} ms; medians of {args.repeats}")


if __name__ == "__main__":
    sys.exit(main())
