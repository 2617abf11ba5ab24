#!/usr/bin/env python3
"""`mi fix` against NNCF's quantize_with_accuracy_control and onnxruntime's qdq_loss_debug + exclusion
(issue 44): the same fp32 model, calibration and validation samples, metric and target for each.

    python scripts/bench_fix.py OUT --models digits mobilenetv2 resnet --nncf-python /work/venvs/nncf/bin/python \
        [--max-drop 0.01] [--val 200] [--calib 64] [--zoo /work/zoo] [--polish 40] [--max-runs 50] [--reuse]

Per model: the metric is top-1 accuracy against labels where there are labels (digits: the demo's trained
CNN, scripts/demo_digits.py; sklearn: the zoo's digits MLP), else top-1 agreement with fp32; the target is a
drop of at most --max-drop from fp32's metric (NNCF's `max_drop`, absolute; mi's `acc1_drop<=X` or
`top1>=1-X`; onnxruntime: the worst layers by qdq_loss_debug's SQNR excluded, 1, 2, 4, ... until it holds).
mi fixes NNCF's own int8 (nncf.quantize, the model NNCF's accuracy control starts from) and onnxruntime's
quantize_static int8. Every final model is measured again here with plain onnxruntime: metric, nodes in
float (nodes reading a DequantizeLinear in the plain int8 and no longer in the final model), 16-bit Q/DQ
pairs, wall time. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _save(folder: Path, samples: List[Dict[str, np.ndarray]], prefix: str = "s") -> List[str]:
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i, feeds in enumerate(samples):
        name = f"{prefix}{i:04d}.npz"
        np.savez(folder / name, **feeds)
        names.append(name)
    return names


def prepare(model: str, out: Path, zoo: Path, n_val: int, n_calib: int) -> Dict[str, Any]:
    """fp32.onnx, calib/, val/ and metric.json in OUT/MODEL."""
    import onnx
    import onnxruntime as ort

    folder = out / model
    import shutil

    shutil.rmtree(folder, ignore_errors=True)  # samples of an earlier run with other counts
    folder.mkdir(parents=True, exist_ok=True)
    labels = None
    if model == "digits":
        sys.path.insert(0, str(ROOT / "scripts"))
        from demo_digits import SHIPPED, load_split

        train_x, _train_y, held_x, held_y = load_split()
        onnx.save(onnx.load(str(SHIPPED)), str(folder / "fp32.onnx"))
        name = onnx.load(str(SHIPPED)).graph.input[0].name
        calib = [{name: x[None]} for x in train_x[:n_calib]]
        val = [{name: x[None]} for x in held_x[:n_val]]
        labels = [int(y) for y in held_y[:n_val]]
    elif model == "sklearn":
        from sklearn.datasets import load_digits

        digits = load_digits()
        x, y = digits.data.astype(np.float32), digits.target
        onnx.save(onnx.load(str(zoo / model / "fp32.onnx")), str(folder / "fp32.onnx"))
        calib = [{"X": x[i:i + 1]} for i in range(n_calib)]
        val = [{"X": x[-n_val + i:-n_val + i + 1] if -n_val + i + 1 else x[-1:]} for i in range(n_val)]
        labels = [int(v) for v in y[-n_val:]]
    else:
        sys.path.insert(0, str(ROOT / "scripts"))
        from zoolib import samples as zs

        onnx.save(onnx.load(str(zoo / model / "fp32.onnx")), str(folder / "fp32.onnx"))
        size = int(onnx.load(str(zoo / model / "fp32.onnx")).graph.input[0].type.tensor_type.shape.dim[2].dim_value)
        calib = [{"pixel_values": x} for x in zs.images(n_calib, size, 1000)]
        val = [{"pixel_values": x} for x in zs.images(n_val, size, 0)]
    _save(folder / "calib", calib, "c")
    names = _save(folder / "val", val, "v")
    session = ort.InferenceSession(str(folder / "fp32.onnx"), providers=["CPUExecutionProvider"])
    output = _score_output(session)
    metric: Dict[str, Any] = {"output": output}
    if labels is not None:
        metric.update(kind="labels", labels=dict(zip(names, labels)))
        (folder / "labels.csv").write_text("sample,label\n" + "".join(f"{n},{v}\n" for n, v in zip(names, labels)))
    else:
        reference = [int(np.argmax(session.run([output], s)[0].reshape(-1))) for s in val]
        metric.update(kind="agreement", reference=dict(zip(names, reference)))
    (folder / "metric.json").write_text(json.dumps(metric))
    return metric


def _score_output(session: Any) -> str:
    """The float output with more than one value (a classifier's probabilities beside its label)."""
    for out in session.get_outputs():
        if out.type == "tensor(float)":
            return out.name
    return session.get_outputs()[0].name


def metric_of(path: Path, folder: Path, metric: Dict[str, Any]) -> float:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    table = metric["labels" if metric["kind"] == "labels" else "reference"]
    right = [int(np.argmax(session.run([metric["output"]], dict(np.load(p)))[0].reshape(-1))) == table[p.name]
             for p in sorted((folder / "val").glob("*.npz"))]
    return float(np.mean(right))


def counts(final: Path, plain: Path) -> Dict[str, int]:
    """Nodes reading a DequantizeLinear in `plain` that no longer do in `final`; 16-bit Q/DQ pairs in `final`."""
    import onnx

    def quantised(model: Any) -> set:
        dq = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
        return {n.name for n in model.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")
                and any(i in dq for i in n.input)}

    a, b = onnx.load(str(plain)), onnx.load(str(final))
    inits = {t.name: t.data_type for t in b.graph.initializer}
    wide = sum(1 for n in b.graph.node if n.op_type == "QuantizeLinear" and len(n.input) > 2
               and inits.get(n.input[2]) in (onnx.TensorProto.UINT16, onnx.TensorProto.INT16))
    return {"float_nodes": len(quantised(a) - quantised(b)), "tensors_16bit": wide, "quantised": len(quantised(a))}


def run_mi_fix(folder: Path, int8: Path, metric: Dict[str, Any], max_drop: float, tag: str,
               extra: Sequence[str] = ()) -> Dict[str, Any]:
    """mi fix at the same target (`extra`: flags such as --polish RUNS, --max-runs N)."""
    target = f"acc1_drop<={max_drop}" if metric["kind"] == "labels" else f"top1>={1 - max_drop:.6g}"
    argv = [sys.executable, "-m", "inspector_cli", "fix", folder / "fp32.onnx", int8, "--inputs", folder / "val",
            "--calibration", folder / "calib", "--target", target, "--write-model", folder / f"mi_{tag}.onnx",
            "--json", folder / f"mi_{tag}.json", "-q", *extra]
    if metric["kind"] == "labels":
        argv[argv.index("--target"):argv.index("--target")] = ["--labels", folder / "labels.csv"]
    start = time.perf_counter()
    ran = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if not (folder / f"mi_{tag}.onnx").exists():
        return {"error": (ran.stderr or ran.stdout).strip().splitlines()[-1:], "seconds": seconds}
    return {"seconds": seconds, "exit": ran.returncode, "metric": metric_of(folder / f"mi_{tag}.onnx", folder, metric),
            **counts(folder / f"mi_{tag}.onnx", int8)}


def output_cosine(path: Path, folder: Path, metric: Dict[str, Any]) -> float:
    """Data-set cosine of the scored output against fp32's (plain onnxruntime)."""
    import onnxruntime as ort

    def run(model: Path) -> np.ndarray:
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        return np.concatenate([session.run([metric["output"]], dict(np.load(p)))[0].ravel()
                               for p in sorted((folder / "val").glob("*.npz"))]).astype(np.float64)

    a, b = run(folder / "fp32.onnx"), run(path)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def nncf_rebuild_check(folder: Path, metric: Dict[str, Any], max_drop: float, nncf_python: str) -> Dict[str, Any]:
    """mi fix --remedies float on NNCF's int8 (what an IgnoredScope can say), its export rebuilt by NNCF: the
    output cosine of the rebuilt model against the plan's, and the task's metric of both (the cosine of an
    all-zero output, as EfficientNet's NNCF int8 gives, is undefined: NaN). Files of an earlier run are
    removed first, and a failed fix or rebuild is reported as such, never read from a stale file."""
    written, export, rebuilt = folder / "mi_float.onnx", folder / "mi_float_export.json", folder / "nncf_rebuilt.onnx"
    for stale in (written, export, rebuilt):
        stale.unlink(missing_ok=True)
    int8 = folder / "nncf_int8.onnx"
    base = output_cosine(int8, folder, metric)
    # halfway to 1; an int8 whose scored output is all zeros (EfficientNet's AveragePool) has no cosine
    target = (base + 1.0) / 2.0 if np.isfinite(base) else 0.99
    argv = [sys.executable, "-m", "inspector_cli", "fix", folder / "fp32.onnx", int8, "--inputs", folder / "val",
            "--target", f"cosine>={target:.9f}", "--remedies", "float", "--write-model", written,
            "--export", export, "-q"]
    fixed = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
    if not written.exists() or not export.exists():
        return {"error": f"no plan written (mi fix exit {fixed.returncode})"}
    built = subprocess.run([nncf_python, str(ROOT / "scripts" / "bench_fix_nncf.py"), str(folder), "--rebuild",
                            str(export), str(rebuilt)], capture_output=True, text=True)
    if built.returncode != 0 or not rebuilt.exists():
        return {"error": f"NNCF's rebuild failed (exit {built.returncode}): "
                         + " ".join((built.stderr or built.stdout).strip().splitlines()[-1:])}
    plan, again = output_cosine(written, folder, metric), output_cosine(rebuilt, folder, metric)
    scope = json.loads(export.read_text())["nncf"]
    return {"target": target, "plan": plan, "rebuilt": again, "delta": again - plan, "ignored": len(scope["names"]),
            "readers": len(scope.get("readers", [])), "plan_metric": metric_of(written, folder, metric),
            "rebuilt_metric": metric_of(rebuilt, folder, metric)}


def ort_int8(folder: Path) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    items = [dict(np.load(p)) for p in sorted((folder / "calib").glob("*.npz"))]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(items)

        def get_next(self):  # type: ignore[no-untyped-def]
            return next(self.it, None)

    out = folder / "ort_int8.onnx"
    quantize_static(str(folder / "fp32.onnx"), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return out


def ort_debug_exclusion(folder: Path, metric: Dict[str, Any], goal: float) -> Dict[str, Any]:
    """onnxruntime's qdq_loss_debug: activations of the int8 model vs fp32 on the validation samples, layers
    by SQNR (worst first); exclude the worst 1, 2, 4, ... nodes and re-quantise until the metric holds."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.qdq_loss_debug import (collect_activations, compute_activation_error,
                                                          create_activation_matching, modify_model_output_intermediate_tensors)

    start = time.perf_counter()
    int8 = ort_int8(folder)
    val = [dict(np.load(p)) for p in sorted((folder / "val").glob("*.npz"))[:16]]

    class Reader(CalibrationDataReader):
        def __init__(self, items: List[Dict[str, np.ndarray]]) -> None:
            self.it = iter(items)

        def get_next(self):  # type: ignore[no-untyped-def]
            return next(self.it, None)

    modify_model_output_intermediate_tensors(str(folder / "fp32.onnx"), str(folder / "fp32_aug.onnx"))
    modify_model_output_intermediate_tensors(str(int8), str(folder / "int8_aug.onnx"))
    float_acts = collect_activations(str(folder / "fp32_aug.onnx"), Reader(val))
    qdq_acts = collect_activations(str(folder / "int8_aug.onnx"), Reader(val))
    errors = compute_activation_error(create_activation_matching(qdq_acts, float_acts))
    producer = {o: n.name for n in onnx.load(str(folder / "fp32.onnx")).graph.node for o in n.output}
    ranked = sorted((v.get("xmodel_err", np.inf), producer[t]) for t, v in errors.items() if t in producer)
    order = list(dict.fromkeys(name for _err, name in ranked))
    calib = [dict(np.load(p)) for p in sorted((folder / "calib").glob("*.npz"))]
    k, result = 1, {}
    while k <= len(order):
        out = folder / "ort_excl.onnx"
        quantize_static(str(folder / "fp32.onnx"), str(out), Reader(calib), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, nodes_to_exclude=order[:k])
        value = metric_of(out, folder, metric)
        result = {"metric": value, **counts(out, int8), "excluded": k}
        if value >= goal:
            break
        k = k * 2 if k * 2 <= len(order) else (len(order) if k < len(order) else k + 1)
    result["seconds"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", nargs="+", default=["digits", "mobilenetv2", "resnet"])
    parser.add_argument("--nncf-python", required=True)
    parser.add_argument("--max-drop", type=float, default=0.01)
    parser.add_argument("--val", type=int, default=200)
    parser.add_argument("--calib", type=int, default=64)
    parser.add_argument("--zoo", type=Path, default=Path("/work/zoo"))
    parser.add_argument("--polish", type=int, default=0,
                        help="mi fix --polish RUNS: runs past the target toward fp32's metric (NNCF's accuracy "
                             "control, reverting whole groups, ends near float)")
    parser.add_argument("--max-runs", type=int, default=50, help="mi fix --max-runs")
    parser.add_argument("--reuse", action="store_true",
                        help="keep OUT/MODEL's fp32.onnx, samples and metric.json from an earlier run (the same "
                             "inputs for a before/after comparison) instead of preparing them again")
    args = parser.parse_args()
    extra = ["--max-runs", str(args.max_runs)] + (["--polish", str(args.polish)] if args.polish else [])
    rows = []
    for model in args.models:
        folder = args.out / model
        reused = args.reuse and (folder / "metric.json").exists()
        metric = json.loads((folder / "metric.json").read_text()) if reused else prepare(
            model, args.out, args.zoo, args.val, args.calib)
        fp32_metric = metric_of(folder / "fp32.onnx", folder, metric)
        goal = fp32_metric - args.max_drop
        ran = subprocess.run([args.nncf_python, str(ROOT / "scripts" / "bench_fix_nncf.py"), str(folder),
                              str(args.max_drop)], capture_output=True, text=True)
        if ran.returncode != 0:
            rows.append((model, "nncf failed", ran.stderr.strip().splitlines()[-1:]))
            continue
        nncf = json.loads(ran.stdout.strip().splitlines()[-1])
        nncf_int8 = folder / "nncf_int8.onnx"
        ac = {"metric": metric_of(folder / "nncf_ac.onnx", folder, metric), **counts(folder / "nncf_ac.onnx", nncf_int8),
              "seconds": nncf["accuracy_control_s"]}
        mi_nncf = run_mi_fix(folder, nncf_int8, metric, args.max_drop, "nncf", extra)
        ort_debug = ort_debug_exclusion(folder, metric, goal)
        mi_ort = run_mi_fix(folder, folder / "ort_int8.onnx", metric, args.max_drop, "ort", extra)
        scope = nncf_rebuild_check(folder, metric, args.max_drop, args.nncf_python)
        rows.append((model, metric["kind"], fp32_metric, metric_of(nncf_int8, folder, metric),
                     metric_of(folder / "ort_int8.onnx", folder, metric), ac, mi_nncf, ort_debug, mi_ort, nncf))
        print(json.dumps({"model": model, "fp32": fp32_metric, "nncf_ac": ac, "mi_on_nncf": mi_nncf,
                          "ort_debug": ort_debug, "mi_on_ort": mi_ort, "nncf_times": nncf,
                          "nncf_ignored_scope_rebuild": scope}), flush=True)
    print("\n| model | metric | fp32 | int8 NNCF / ORT | tool | final metric | float nodes | 16-bit tensors | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if len(row) == 3:
            print(f"| {row[0]} | {row[1]} | {row[2]} | | | | | | |")
            continue
        model, kind, fp32_metric, nncf_m, ort_m, ac, mi_nncf, ort_debug, mi_ort, _ = row
        for tool, r in (("NNCF accuracy control", ac), ("mi fix on NNCF int8", mi_nncf),
                        ("ORT qdq_loss_debug + exclusion", ort_debug), ("mi fix on ORT int8", mi_ort)):
            if "metric" not in r:
                print(f"| {model} | {kind} | {fp32_metric:.4f} | {nncf_m:.4f} / {ort_m:.4f} | {tool} | {r.get('error')} | | | |")
                continue
            print(f"| {model} | {kind} | {fp32_metric:.4f} | {nncf_m:.4f} / {ort_m:.4f} | {tool} | {r['metric']:.4f} | "
                  f"{r['float_nodes']} of {r['quantised']} | {r['tensors_16bit']} | {r['seconds']:.1f} |")


if __name__ == "__main__":
    main()
