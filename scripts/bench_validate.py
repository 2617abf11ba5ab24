#!/usr/bin/env python3
"""Benchmark `mi validate` against its floor: onnx.checker (full) plus one onnxruntime session.

Target: on a 2,000-node transformer, `mi validate` takes at most 2x the time of
`onnx.checker.check_model(path, full_check=True)` plus one `onnxruntime.InferenceSession`.

Two views, side by side in one invocation:
  in-process   both sides warm (modules imported, file in the page cache); median of --repeat runs
  whole-proc   `python -c <baseline>` vs `python -m inspector_cli validate` as fresh processes
               (imports included, as a CI step pays them)

    python scripts/bench_validate.py                 # 60 layers (about 2,000 nodes)
    python scripts/bench_validate.py --layers 8 --repeat 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASELINE_CODE = ("import sys, onnx, onnxruntime as ort; p = sys.argv[1]; "
                 "onnx.checker.check_model(p, full_check=True); "
                 "ort.InferenceSession(p, providers=['CPUExecutionProvider'])")


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def process_time(args: List[str]) -> float:
    return timed(lambda: subprocess.run(args, check=False, capture_output=True, cwd=ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=60, help="encoder layers (about 33 nodes each)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    import onnx
    import onnxruntime as ort

    from inspector_cli.testing.transformer import build_transformer
    from inspector_cli.workflows.validate import validate_model

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "encoder.onnx"
        model = build_transformer(layers=args.layers, hidden=args.hidden, ffn=4 * args.hidden)
        onnx.save(model, str(path))
        nodes, size = len(model.graph.node), path.stat().st_size
        del model

        def checker_full() -> None:
            onnx.checker.check_model(str(path), full_check=True)

        def session() -> None:
            ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

        def loaded_checker() -> None:
            onnx.checker.check_model(onnx.load(str(path)), full_check=True)

        result = validate_model(path)  # warm-up, and a check that the model is clean
        assert not result.failing, result.summary()
        for warm in (checker_full, session, loaded_checker):
            warm()
        # Interleaved (baseline, mi, baseline, mi, ...) so that load from other processes on the
        # machine hits both sides alike; the per-round ratio's median is the headline figure.
        rounds = [(timed(checker_full), timed(session), timed(loaded_checker), timed(lambda: validate_model(path)))
                  for _ in range(args.repeat)]
        t_check, t_session, t_loaded, t_mi = (statistics.median(r[i] for r in rounds) for i in range(4))
        ratio = statistics.median(r[3] / (r[0] + r[1]) for r in rounds)
        timings = validate_model(path).timings
        base_cmd = [sys.executable, "-c", BASELINE_CODE, str(path)]
        mi_cmd = [sys.executable, "-m", "inspector_cli", "-q", "validate", str(path)]
        procs = [(process_time(base_cmd), process_time(mi_cmd)) for _ in range(max(3, args.repeat // 2))]
        p_base, p_mi = (statistics.median(p[i] for p in procs) for i in range(2))
        p_ratio = statistics.median(p[1] / p[0] for p in procs)

    floor = t_check + t_session
    rows = [
        ("onnx.checker.check_model(path, full_check=True)", t_check, ""),
        ("onnxruntime.InferenceSession(path)", t_session, ""),
        ("baseline: checker + session", floor, "1.00x"),
        ("  (variant: onnx.load + check_model(model, full) + session)", t_loaded + t_session,
         f"{(t_loaded + t_session) / floor:.2f}x"),
        ("mi validate (library call, in-process)", t_mi, f"{t_mi / floor:.2f}x"),
        ("  median of the per-round ratios mi / baseline", float("nan"), f"{ratio:.2f}x"),
        ("whole process: python -c baseline", p_base, "1.00x"),
        ("whole process: mi -q validate", p_mi, f"{p_mi / p_base:.2f}x"),
        ("  median of the per-round ratios", float("nan"), f"{p_ratio:.2f}x"),
    ]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"transformer encoder: {args.layers} layers, {nodes} nodes, {size / 1e6:.1f} MB; median of {args.repeat} runs; "
          f"{os.cpu_count()} cores, load average {load}")
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'seconds':>8}  {'ratio':>6}")
    for label, seconds, times in rows:
        shown = "" if seconds != seconds else f"{seconds:8.3f}"  # NaN: a ratio-only row
        print(f"{label:<{width}}  {shown:>8}  {times:>6}")
    print("mi time per family (s): " + ", ".join(f"{k} {v:.3f}" for k, v in timings.items()))
    target = ratio <= 2
    print(f"target (in-process mi <= 2x baseline, median per-round ratio): {'MET' if target else 'MISSED'} "
          f"({ratio:.2f}x)")
    return 0 if target else 1


if __name__ == "__main__":
    sys.exit(main())
