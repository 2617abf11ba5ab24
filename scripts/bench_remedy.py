"""Benchmark of the fallback plan (issue 18 target): ResNet-50 int8 QDQ, 12 samples.

Measures one `mi compare fp32 int8 --layers --isolate all` (whole process) and one
`plan_fallback` fed with its isolation results: full-model runs (target <= 30) and the time ratio
(target <= 3x). Models are built by scripts/bench_models.py (torchvision, random weights).

    python scripts/bench_remedy.py [--out /tmp/mi-bench] [--target cosine>=0.999]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="/tmp/mi-bench-remedy")
    parser.add_argument("--target", action="append", default=None)
    parser.add_argument("--samples", type=int, default=12)
    args = parser.parse_args()
    out = Path(args.out)
    paths = bench_models.prepare(out, names=("resnet50",), counts=(args.samples,))["resnet50"]
    data = paths[f"data{args.samples}"]
    report = out / "layers.json"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "inspector_cli", "compare", str(paths["fp32"]), str(paths["int8"]),
                           "--inputs", str(data), "--layers", "--isolate", "all", "--json", str(report), "-q"],
                          capture_output=True, text=True)
    isolate_seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"compare failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")

    import numpy as np
    import onnx

    from inspector_cli.remedy.evaluate import parse_target
    from inspector_cli.remedy.fallback import own_errors_from_layers, plan_fallback

    document = json.loads(report.read_text())
    layers = document.get("layers") or document.get("result", {}).get("layers") or {}
    rows = [(row["name_b"], (row.get("isolated") or {}).get("cosine")) for row in layers.get("layers", [])]
    fp32, int8 = onnx.load(str(paths["fp32"])), onnx.load(str(paths["int8"]))
    samples = [dict(np.load(p)) for p in sorted(data.glob("*.npz"))]
    targets = [parse_target(t) for t in (args.target or ["cosine>=0.999"])]
    start = time.perf_counter()
    own = own_errors_from_layers(int8, rows)
    plan = plan_fallback(fp32, int8, samples, targets, own_errors=own, sensitivity_top=12, max_nodes=12)
    plan_seconds = time.perf_counter() - start
    print(json.dumps({
        "isolate_seconds": round(isolate_seconds, 2), "plan_seconds": round(plan_seconds, 2),
        "ratio": round(plan_seconds / isolate_seconds, 2), "runs": plan.runs, "inferences": plan.inferences,
        "own_errors": len(own), "nodes": plan.nodes, "found": plan.found, "baseline": plan.baseline,
        "final": plan.final, "steps": [(s.action, s.node, s.metrics) for s in plan.steps],
        "latency_ms": [round(plan.baseline_latency_ms, 2), round(plan.final_latency_ms, 2)],
    }, indent=1))


if __name__ == "__main__":
    main()
