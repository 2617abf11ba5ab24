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


def median_time(call: Callable[[], object], repeat: int) -> float:
    times: List[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def process_time(args: List[str], repeat: int) -> float:
    def run() -> None:
        subprocess.run(args, check=False, capture_output=True, cwd=ROOT)
    return median_time(run, repeat)


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
        t_check = median_time(checker_full, args.repeat)
        t_session = median_time(session, args.repeat)
        t_loaded = median_time(loaded_checker, args.repeat)
        t_mi = median_time(lambda: validate_model(path), args.repeat)
        timings = validate_model(path).timings
        p_base = process_time([sys.executable, "-c", BASELINE_CODE, str(path)], max(3, args.repeat // 2))
        p_mi = process_time([sys.executable, "-m", "inspector_cli", "-q", "validate", str(path)],
                            max(3, args.repeat // 2))

    floor = t_check + t_session
    rows = [
        ("onnx.checker.check_model(path, full_check=True)", t_check, ""),
        ("onnxruntime.InferenceSession(path)", t_session, ""),
        ("baseline: checker + session", floor, "1.00x"),
        ("  (variant: onnx.load + check_model(model, full) + session)", t_loaded + t_session,
         f"{(t_loaded + t_session) / floor:.2f}x"),
        ("mi validate (library call, in-process)", t_mi, f"{t_mi / floor:.2f}x"),
        ("whole process: python -c baseline", p_base, "1.00x"),
        ("whole process: mi -q validate", p_mi, f"{p_mi / p_base:.2f}x"),
    ]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"transformer encoder: {args.layers} layers, {nodes} nodes, {size / 1e6:.1f} MB; median of {args.repeat} runs; "
          f"{os.cpu_count()} cores, load average {load}")
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'seconds':>8}  {'ratio':>6}")
    for label, seconds, ratio in rows:
        print(f"{label:<{width}}  {seconds:8.3f}  {ratio:>6}")
    print("mi time per family (s): " + ", ".join(f"{k} {v:.3f}" for k, v in timings.items()))
    target = t_mi <= 2 * floor
    print(f"target (in-process mi <= 2x baseline): {'MET' if target else 'MISSED'} ({t_mi / floor:.2f}x)")
    return 0 if target else 1


if __name__ == "__main__":
    sys.exit(main())
