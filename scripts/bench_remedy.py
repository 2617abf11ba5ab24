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


def break_weights(int8: Path, count: int) -> Path:
    """A copy of the QDQ model with `count` Conv weight scales multiplied by 8 (a wrong scale)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(int8))
    producer = {o: n for n in model.graph.node for o in n.output}
    inits = {t.name: t for t in model.graph.initializer}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    chosen = [convs[(i + 1) * len(convs) // (count + 1)] for i in range(count)]
    for conv in chosen:
        scale = inits[producer[conv.input[1]].input[1]]
        scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * np.float32(8), scale.name))
    print("broken:", [c.name for c in chosen], file=sys.stderr)
    path = int8.with_name(f"{int8.stem}_broken{count}.onnx")
    onnx.save(model, str(path))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="/tmp/mi-bench-remedy")
    parser.add_argument("--target", action="append", default=None)
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--break-weights", type=int, default=0,
                        help="give N Conv weights (spread over the network) a scale 8x too large")
    args = parser.parse_args()
    out = Path(args.out)
    paths = bench_models.prepare(out, names=("resnet50",), counts=(args.samples,))["resnet50"]
    data = paths[f"data{args.samples}"]
    int8_path = paths["int8"] if not args.break_weights else break_weights(paths["int8"], args.break_weights)
    report = out / "layers.json"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "inspector_cli", "-q", "compare", str(paths["fp32"]), str(int8_path),
                           "--inputs", str(data), "--layers", "all", "--isolate", "all", "--json", str(report)],
                          capture_output=True, text=True)
    isolate_seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"compare failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")

    import numpy as np
    import onnx

    from inspector_cli.remedy.evaluate import parse_target
    from inspector_cli.remedy.fallback import own_errors_from_layers, plan_fallback

    document = json.loads(report.read_text())
    layers = document["results"]["layers"]["layers"]
    rows = [(row["name_b"], (row.get("isolated") or {}).get("cosine")) for row in layers]
    fp32, int8 = onnx.load(str(paths["fp32"])), onnx.load(str(int8_path))
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
