#!/usr/bin/env python
"""The bad sample's extra cost in `mi nan-bisect`, in plain inferences, whole processes (issue 16).

Per model: 100 samples with sample 50 bad and the same 100 clean (`bench_speed.py`'s nan-bisect
data, in OUT/speed/), plus the first 10 clean. Each repeat runs, back to back, the floor (plain
onnxruntime over 10 and 100 samples) and mi (this checkout, and `--before DIR`) over clean 10,
clean 100 and bad 100, and takes per repeat:

  extra inferences = (bad100 - clean100) / (floor100 / 100)      (wall and CPU separately)
  clean per sample = (clean100 - clean10) / (floor100 - floor10)

Medians over the repeats are printed (CPU is the robust figure on a loaded machine).

    python scripts/bench_nan_origin.py [--repeat 7] [--models mobilenet_v2,encoder] [--before DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import benchlib  # noqa: E402
from bench_speed import WORK, mi  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--models", default="mobilenet_v2,encoder")
    parser.add_argument("--before", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    args = parser.parse_args()
    roots = {"now": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    for name in args.models.split(","):
        model = args.out / f"{name}_fp32.onnx"
        speed = args.out / "speed"
        data = {"c10": speed / f"{name}_nan10_clean", "c100": speed / f"{name}_nan100_clean",
                "b100": speed / f"{name}_nan100_bad"}
        if not all(p.exists() for p in data.values()):
            print(f"{name}: run bench_speed.py --only nan-bisect first (it writes the data sets)", file=sys.stderr)
            return 2
        got: Dict[str, Dict[str, List[float]]] = {}

        def add(key: str, cmd: List[str]) -> None:
            m = benchlib.measure(cmd)
            if m["code"] not in (0, 1):
                raise SystemExit(f"{key} failed ({m['code']}): {m['output'][-800:]}")
            got.setdefault(key, {"wall": [], "cpu": []})
            got[key]["wall"].append(m["wall"])
            got[key]["cpu"].append(m["cpu"])

        for _ in range(args.repeat):
            add("floor10", [*WORK, "floor", model, data["c10"]])
            add("floor100", [*WORK, "floor", model, data["c100"]])
            for label, root in roots.items():
                for kind, folder in data.items():
                    add(f"{label}/{kind}", mi(root, "-q", "nan-bisect", model, "--inputs", folder,
                                              "--json", speed / "origin.json"))
        for label in roots:
            for clock in ("wall", "cpu"):
                f10, f100 = got["floor10"][clock], got["floor100"][clock]
                c10, c100, b100 = (got[f"{label}/{k}"][clock] for k in ("c10", "c100", "b100"))
                extra = [(b - c) / (f / 100) for b, c, f in zip(b100, c100, f100)]
                per = [(c - d) / (g - h) for c, d, g, h in zip(c100, c10, f100, f10)]
                print(f"{name} {label:6s} {clock:4s}: bad sample's extra {statistics.median(extra):5.1f} inferences "
                      f"(runs {', '.join(f'{x:.1f}' for x in extra)}); clean per sample {statistics.median(per):.2f}x; "
                      f"floor100 {statistics.median(f100):.2f} s, clean100 {statistics.median(c100):.2f} s, "
                      f"bad100 {statistics.median(b100):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
