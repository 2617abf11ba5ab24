#!/usr/bin/env python3
"""What one value costs probe's statistics: each step of `ProbeTracker.update` on real activations.

    python scripts/bench_probe_kernels.py MODEL.onnx DATA_DIR [--reps 7]

Every node output of MODEL is exposed (onnx + onnxruntime, CPU provider) and run on the first sample
of DATA_DIR; then, over all of its float32 tensors, the CPU time per value (best of --reps, this thread)
of: the compiled scan (probe/kernels.py: extremes, zero/NaN/Inf counts, histogram), numpy's float32 sum
(the mean), the compiled squared deviations, and a tracker's whole update of a sample after the first
(the steady state of a block). Needs numba (the `fast` extra). The tensors of MobileNetV2 (13 M values,
52 MB) do not fit the L3 cache, so every pass reads memory, as in a run.
"""
from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path
from typing import Callable, List

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def activations(model_path: str, data: str) -> List[np.ndarray]:
    model = onnx.load(model_path)
    present = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in present:
                model.graph.output.append(helper.make_empty_tensor_value_info(name))
                present.add(name)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    first = sorted(glob.glob(str(Path(data) / "*.npz")))[0]
    with np.load(first, allow_pickle=False) as sample:
        feeds = {k: sample[k] for k in sample.files}
    return [o for o in session.run(None, feeds) if isinstance(o, np.ndarray) and o.dtype == np.float32]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    from inspector_cli.probe import kernels
    from inspector_cli.probe.tracker import ProbeTracker, Workspace

    tensors = activations(args.model, args.data)
    flats = [np.ascontiguousarray(t).reshape(-1) for t in tensors]
    values = sum(f.size for f in flats)
    kernels.warm()
    counts = np.zeros(1 << 16, dtype=np.int64)
    buffers = kernels.Scan()
    workspace = Workspace()
    workspace.use_kernels(kernels)
    trackers = [ProbeTracker(str(i), workspace=workspace) for i in range(len(tensors))]
    for tracker, tensor in zip(trackers, tensors):
        tracker.update("first", tensor)  # a block's first sample also finds its channels' layout

    def per_value(step: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(args.reps):
            started = time.thread_time()
            step()
            best = min(best, time.thread_time() - started)
        return best * 1e9 / values

    steps = {
        "scan (extremes, counts, histogram)": lambda: [kernels.scan(f, counts, buffers) for f in flats],
        "numpy float32 sum": lambda: [f.sum(dtype=np.float32) for f in flats],
        "squared deviations": lambda: [kernels.squared_deviations(f, np.float32(0.1)) for f in flats],
        "tracker update (steady state)": lambda: [t.update("next", a) for t, a in zip(trackers, tensors)],
    }
    print(f"{len(flats)} float32 tensors, {values / 1e6:.1f} M values; CPU ns per value, best of {args.reps}")
    for name, step in steps.items():
        print(f"  {name:34s} {per_value(step):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
