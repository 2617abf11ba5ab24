#!/usr/bin/env python3
"""Does ModelOpt rebuild the plan of `mi fix` from the `--nodes_to_exclude` patterns mi exports (issue 44)?

    python scripts/bench_fix_modelopt.py OUT --modelopt-python /work/venvs/modelopt/bin/python \
        [--models resnet mobilenetv2] [--val 16] [--calib 16] [--calibration-method entropy] [--zoo /work/zoo]

run by the Python of mi's venv; it calls itself in ModelOpt's venv (nvidia-modelopt[onnx]) for ModelOpt's side:

    MODELOPT_PYTHON scripts/bench_fix_modelopt.py --quantise FOLDER OUT.onnx [--export PLAN.json] [--method M]

Per model, in OUT/MODEL (fp32.onnx, calib/ and val/ samples as scripts/bench_fix.py prepares them):
1. ModelOpt's int8 QDQ model of fp32.onnx: `modelopt.onnx.quantization.quantize(quantize_mode="int8")`,
   calibrated on calib/ with the CPU execution provider, fp32 kept as the high-precision type (no fp16
   conversion, so every cosine here is int8's alone): modelopt_int8.onnx.
2. `mi fix fp32.onnx modelopt_int8.onnx --inputs val/ --target cosine>=T --remedies float --write-model
   plan.onnx --export plan.json`, T halfway between modelopt_int8's output cosine and 1. Where no plan
   reaches it (mi's search reads every candidate in float below T: `float_ceiling`), once more with T
   halfway between the int8 cosine and that ceiling (the first try is kept as `halfway_to_1`).
3. ModelOpt's quantize again, same calibration, with `nodes_to_exclude` = plan.json's modelopt patterns:
   modelopt_rebuilt.onnx.
4. Measured here with plain onnxruntime (CPU): the output cosine against fp32 over val/ of the plan's model
   and of the rebuild, their delta (the issue's bar: |delta| <= 2e-3), the patterns exported, the nodes in
   float in each (nodes whose activation input reads a DequantizeLinear in modelopt_int8 and no longer does:
   a DQ fed by a QuantizeLinear, a weight's DQ does not count), and every node whose Q/DQ placement differs
   between the plan's model and the rebuild (per input: `a` activation DQ, `w` weight DQ, `-` float), with
   the activation scales that differ where the placement agrees.
Prints one JSON line per model, then a Markdown table. One process at a time (mi fix runs its trials in
its own process, `--workers 0`).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
QDQ = ("QuantizeLinear", "DequantizeLinear")
BAR = 2e-3


def quantise(folder: Path, out: Path, export: Optional[Path], method: str) -> None:
    """ModelOpt's side (its venv): fp32.onnx to int8 QDQ, calibrated on calib/*.npz, with the exported
    `nodes_to_exclude` patterns when `export` is given. Prints one JSON line."""
    import modelopt
    import onnx
    from modelopt.onnx.quantization import quantize

    samples = [dict(np.load(p)) for p in sorted((folder / "calib").glob("*.npz"))]
    data = {name: np.concatenate([s[name] for s in samples]) for name in samples[0]}
    patterns: List[str] = []
    if export is not None:
        patterns = list(json.loads(export.read_text())["modelopt"]["nodes_to_exclude"])
    names = [n.name for n in onnx.load(str(folder / "fp32.onnx")).graph.node]
    # ModelOpt matches each pattern against node names with re.match: each should name exactly one node
    matches = {p: [n for n in names if re.match(p, n)] for p in patterns}
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    quantize(str(folder / "fp32.onnx"), quantize_mode="int8", calibration_data=data, calibration_method=method,
             calibration_eps=["cpu"], high_precision_dtype="fp32", nodes_to_exclude=list(patterns) or None,
             output_path=str(out), log_level="WARNING")
    print(json.dumps({"modelopt": modelopt.__version__, "seconds": time.perf_counter() - start,
                      "patterns": len(patterns), "unmatched": [p for p, m in matches.items() if len(m) != 1]}))


def placement(path: Path) -> Dict[str, str]:
    """Per node (not Q/DQ) with a DQ on an input: one letter per input, `a` (a DQ fed by a QuantizeLinear of
    a computed tensor), `w` (a DQ of a constant, or of a QuantizeLinear of one: weight, bias) or `-`; graph
    outputs as `output:NAME`."""
    import onnx

    graph = onnx.load(str(path)).graph
    producer = {o: n for n in graph.node for o in n.output}
    constant = {t.name for t in graph.initializer}
    constant |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    kind: Dict[str, str] = {}
    for node in graph.node:
        if node.op_type == "DequantizeLinear":
            # ModelOpt keeps a weight in float behind a QuantizeLinear -> DequantizeLinear pair
            source = producer.get(node.input[0])
            active = source is not None and source.op_type == "QuantizeLinear" and source.input[0] not in constant
            kind[node.output[0]] = "a" if active else "w"
    out: Dict[str, str] = {}
    for node in graph.node:
        if node.op_type in QDQ:
            continue
        letters = "".join(kind.get(i, "-") for i in node.input)
        if letters.strip("-"):
            out[node.name] = letters
    for value in graph.output:
        if value.name in kind:
            out[f"output:{value.name}"] = kind[value.name]
    return out


def activation_scales(path: Path) -> Dict[Tuple[str, int], float]:
    """(node, input position) -> scale of the activation DQ that input reads (per-tensor)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    producer = {o: n for n in graph.node for o in n.output}
    out: Dict[Tuple[str, int], float] = {}
    for node in graph.node:
        if node.op_type in QDQ:
            continue
        for position, tensor in enumerate(node.input):
            dq = producer.get(tensor)
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            q = producer.get(dq.input[0])
            if q is None or q.op_type != "QuantizeLinear" or q.input[0] in consts or dq.input[1] not in consts:
                continue
            scale = np.asarray(consts[dq.input[1]]).ravel()
            if scale.size == 1:
                out[(node.name, position)] = float(scale[0])
    return out


def floated(int8: Dict[str, str], model: Dict[str, str]) -> List[str]:
    """Nodes with an activation DQ in int8 and none in `model`."""
    return [n for n, letters in int8.items() if "a" in letters and "a" not in model.get(n, "")]


def _last_line(ran: "subprocess.CompletedProcess[str]") -> str:
    return " ".join((ran.stderr or ran.stdout).strip().splitlines()[-1:])


def modelopt_run(python: str, folder: Path, out: Path, method: str,
                 export: Optional[Path] = None) -> Dict[str, Any]:
    argv = [python, str(Path(__file__).resolve()), "--quantise", str(folder), str(out), "--method", method]
    if export is not None:
        argv += ["--export", str(export)]
    ran = subprocess.run(argv, capture_output=True, text=True)
    if ran.returncode != 0 or not out.exists():
        return {"error": f"ModelOpt failed (exit {ran.returncode}): {_last_line(ran)}"}
    return json.loads(ran.stdout.strip().splitlines()[-1])


def mi_fix(folder: Path, int8: Path, target: float, plan: Path,
           export: Path) -> Tuple["subprocess.CompletedProcess[str]", Optional[float]]:
    """`mi fix --remedies float` towards cosine >= target (mi of this checkout, run by this Python); also the
    cosine its search read with every candidate in float (None when it did not get there)."""
    result = folder / "fix.json"
    for stale in (plan, export, result):
        stale.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "inspector_cli", "fix", folder / "fp32.onnx", int8, "--inputs", folder / "val",
            "--target", f"cosine>={target:.9f}", "--remedies", "float", "--write-model", plan, "--export", export,
            "--json", result, "-q"]
    fixed = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=ROOT)
    ceiling = None
    if result.exists():
        steps = json.loads(result.read_text()).get("results", {}).get("steps", [])
        ceiling = next((next(iter(s["metrics"].values())) for s in steps if s.get("action") == "all candidates"), None)
    return fixed, ceiling


def check(folder: Path, metric: Dict[str, Any], python: str, method: str) -> Dict[str, Any]:
    """Steps 1-4 of the docstring on one prepared folder."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_fix import output_cosine

    int8, plan, export, rebuilt = (folder / n for n in ("modelopt_int8.onnx", "plan.onnx", "plan.json",
                                                        "modelopt_rebuilt.onnx"))
    for stale in (int8, plan, export, rebuilt):
        stale.unlink(missing_ok=True)
    quantised = modelopt_run(python, folder, int8, method)
    if "error" in quantised:
        return quantised
    base = output_cosine(int8, folder, metric)
    target = (base + 1.0) / 2.0
    start = time.perf_counter()
    fixed, ceiling = mi_fix(folder, int8, target, plan, export)
    halfway_to_1 = {"target": target, "exit": fixed.returncode}
    if fixed.returncode != 0 and ceiling is not None and base < ceiling < target:
        # no plan reaches T (every candidate in float stays below it): halfway to what float can reach instead
        target = (base + ceiling) / 2.0
        fixed, _ = mi_fix(folder, int8, target, plan, export)
    fix_s = time.perf_counter() - start
    if not plan.exists() or not export.exists():
        return {"error": f"no plan written (mi fix exit {fixed.returncode}): {_last_line(fixed)}", "int8": base}
    again = modelopt_run(python, folder, rebuilt, method, export)
    if "error" in again:
        return {**again, "int8": base, "target": target}
    plan_cos, rebuilt_cos = output_cosine(plan, folder, metric), output_cosine(rebuilt, folder, metric)
    p_int8, p_plan, p_rebuilt = placement(int8), placement(plan), placement(rebuilt)
    differ = {n: {"plan": p_plan.get(n, "-"), "rebuilt": p_rebuilt.get(n, "-")}
              for n in sorted(set(p_plan) | set(p_rebuilt)) if p_plan.get(n, "") != p_rebuilt.get(n, "")}
    s_plan, s_rebuilt = activation_scales(plan), activation_scales(rebuilt)
    scales = {f"{n}[{i}]": [s_plan[(n, i)], s_rebuilt[(n, i)]] for (n, i) in sorted(set(s_plan) & set(s_rebuilt))
              if abs(s_plan[(n, i)] - s_rebuilt[(n, i)]) > 1e-6 * abs(s_plan[(n, i)])}
    patterns = json.loads(export.read_text())["modelopt"]
    return {"int8": base, "halfway_to_1": halfway_to_1, "float_ceiling": ceiling, "target": target,
            "fix_exit": fixed.returncode, "fix_s": fix_s, "plan": plan_cos,
            "rebuilt": rebuilt_cos, "delta": rebuilt_cos - plan_cos, "within_bar": abs(rebuilt_cos - plan_cos) <= BAR,
            "excluded": len(patterns["nodes_to_exclude"]), "patterns": patterns["nodes_to_exclude"],
            "not_expressible": patterns.get("not_expressible", {}), "unmatched": again.get("unmatched", []),
            "int8_quantised": sum(1 for v in p_int8.values() if "a" in v),
            "float_plan": floated(p_int8, p_plan), "float_rebuilt": floated(p_int8, p_rebuilt),
            "placement_differs": differ, "scales_differ": scales, "modelopt": quantised.get("modelopt"),
            "quantise_s": quantised.get("seconds")}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--quantise":
        side = argparse.ArgumentParser()
        side.add_argument("--quantise", nargs=2, type=Path, metavar=("FOLDER", "OUT"))
        side.add_argument("--export", type=Path)
        side.add_argument("--method", default="entropy")
        a = side.parse_args()
        quantise(a.quantise[0], a.quantise[1], a.export, a.method)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--modelopt-python", required=True)
    parser.add_argument("--models", nargs="+", default=["resnet", "mobilenetv2"])
    parser.add_argument("--val", type=int, default=16)
    parser.add_argument("--calib", type=int, default=16)
    parser.add_argument("--calibration-method", default="entropy", choices=["entropy", "max"])
    parser.add_argument("--zoo", type=Path, default=Path("/work/zoo"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_fix import prepare

    rows = []
    for model in args.models:
        metric = prepare(model, args.out, args.zoo, args.val, args.calib)
        result = check(args.out / model, metric, args.modelopt_python, args.calibration_method)
        print(json.dumps({"model": model, **result}), flush=True)
        rows.append((model, result))
    print("\n| model | int8 cosine | target | plan cosine | rebuild cosine | delta | excluded | float plan / rebuild "
          "| placement differs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model, r in rows:
        if "error" in r:
            print(f"| {model} | {r.get('int8', '')} | {r.get('target', '')} | {r['error']} | | | | | |")
            continue
        note = "" if r["target"] == r["halfway_to_1"]["target"] else " (1 out of reach)"
        print(f"| {model} | {r['int8']:.6f} | {r['target']:.6f}{note} | {r['plan']:.6f} | {r['rebuilt']:.6f} | "
              f"{r['delta']:+.2e} | {r['excluded']} | {len(r['float_plan'])} / {len(r['float_rebuilt'])} of "
              f"{r['int8_quantised']} | {len(r['placement_differs'])} nodes |")


if __name__ == "__main__":
    main()
