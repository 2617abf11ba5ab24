"""Layer truth: an independent recomputation of the per-layer metrics `mi compare --layers` reports.

Reads mi's JSON (`results.layers.layers[]`: `name`, `name_b`), exposes every paired tensor of both
models as a graph output on a copy, runs both with onnxruntime's optimisations off on the same
samples, and sums dot products and norms over all samples (the data-set cosine mi reports). Uses
only onnx, onnxruntime and numpy; nothing from inspector_cli, so a defect there cannot hide itself.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

# QOperator outputs are quantised: (scale, zero point) input positions per op type
_QOP_OUT = {"QLinearConv": (6, 7), "QLinearMatMul": (6, 7), "QLinearAdd": (6, 7), "QLinearMul": (6, 7),
            "QGemm": (7, 8), "QLinearSigmoid": (3, 4), "QLinearLeakyRelu": (3, 4), "QLinearSoftmax": (3, 4),
            "QLinearGlobalAveragePool": (3, 4), "QLinearAveragePool": (3, 4), "QLinearConcat": (0, 1)}
# ... and their quantised inputs: (input, scale, zero point) positions (QLinearConcat: triples from 2)
_QOP_IN = {"QLinearConv": ((0, 1, 2),), "QLinearMatMul": ((0, 1, 2), (3, 4, 5)), "QLinearAdd": ((0, 1, 2), (3, 4, 5)),
           "QLinearMul": ((0, 1, 2), (3, 4, 5)), "QGemm": ((0, 1, 2), (3, 4, 5)), "QLinearSigmoid": ((0, 1, 2),),
           "QLinearLeakyRelu": ((0, 1, 2),), "QLinearSoftmax": ((0, 1, 2),), "QLinearGlobalAveragePool": ((0, 1, 2),),
           "QLinearAveragePool": ((0, 1, 2),)}
# ops that move integers without changing their quantisation
_PASS = {"Transpose", "Reshape", "Split", "Gather", "Slice", "Squeeze", "Unsqueeze", "Flatten", "MaxPool", "Concat",
         "Identity"}


@dataclass(frozen=True)
class LayerTruth:
    """mi's data-set cosine of one paired layer next to the recomputed one."""

    name: str
    name_b: str
    mi_cosine: Optional[float]
    true_cosine: Optional[float]
    note: str = ""
    mi_negligible: bool = False
    """mi called the layer negligible (max |b - a| <= its --layer-atol): its cosine is noise against noise."""
    true_max_abs: Optional[float] = None
    """max |b - a| over every sample, recomputed."""

    def both_noise(self, atol: float) -> bool:
        """mi and the recomputation agree that the two tensors differ by rounding noise only (max |b - a| <=
        `atol`): then both cosines are noise and are not compared; `atol` allows for other fused arithmetic."""
        return self.mi_negligible and self.true_max_abs is not None and self.true_max_abs <= atol

    @property
    def delta(self) -> Optional[float]:
        """|mi - recomputed|; a NaN cosine (a NaN in one model: never agreement) equals only a NaN."""
        if self.mi_cosine is None or self.true_cosine is None:
            return None
        if np.isnan(self.mi_cosine) or np.isnan(self.true_cosine):
            return 0.0 if np.isnan(self.mi_cosine) and np.isnan(self.true_cosine) else float("inf")
        return abs(self.mi_cosine - self.true_cosine)


def _dequantiser(model, tensor: str, depth: int = 8) -> Optional[Tuple[str, str]]:
    """(scale, zero point) initializer names that turn quantised `tensor` back into real values: a
    DequantizeLinear or QOperator op reading it, the QuantizeLinear or QOperator op writing it, or (through
    Split, Transpose, Gather...) the quantisation of what those ops moved."""
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] == tensor:
            return node.input[1], node.input[2] if len(node.input) > 2 else ""
        triples = [(k, k + 1, k + 2) for k in range(2, len(node.input) - 2, 3)] if node.op_type == "QLinearConcat" \
            else _QOP_IN.get(node.op_type, ())
        for x, s, z in triples:
            if len(node.input) > z and node.input[x] == tensor:
                return node.input[s], node.input[z]
    for node in model.graph.node:
        if tensor not in node.output:
            continue
        if node.op_type in _QOP_OUT:
            s, z = _QOP_OUT[node.op_type]
            return node.input[s], node.input[z]
        if node.op_type == "QuantizeLinear":
            return node.input[1], node.input[2] if len(node.input) > 2 else ""
        if node.op_type in _PASS and depth > 0:
            return _dequantiser(model, node.input[0], depth - 1)
    return None


def _init(model, name: str) -> Optional[np.ndarray]:
    from onnx import numpy_helper
    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for node in model.graph.node:  # Constant nodes hold scales in some exports
        if node.op_type == "Constant" and node.output[0] == name:
            return numpy_helper.to_array(node.attribute[0].t)
    return None


def _expose(path: Path, names: Sequence[str]):
    """A copy of the model with `names` (those produced at the top level) as extra outputs."""
    import onnx
    from onnx import helper
    model = onnx.load(str(path))
    produced = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    present = {o.name for o in model.graph.output}
    found = [n for n in names if n in produced]
    for n in found:
        if n not in present:
            model.graph.output.append(helper.make_empty_tensor_value_info(n))
            present.add(n)
    return model, set(found)


def _session(model):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _feed(session, sample: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    feed = {}
    for i in session.get_inputs():
        x = np.asarray(sample[i.name])
        feed[i.name] = x.astype(np.float16) if i.type == "tensor(float16)" else x
    return feed


def _numbers(value):
    """A tensor as it is; a sequence's tensors one after another; a list of maps (ZipMap) as its [rows, keys]
    matrix in sorted key order; None for strings. Written here again, independently of mi's diff/values.py."""
    if isinstance(value, np.ndarray):
        return value if value.dtype.kind in "biuf" else None
    if isinstance(value, dict):
        return np.array([value[k] for k in sorted(value)], np.float64)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = sorted(value[0])
        return np.array([[row[k] for k in keys] for row in value], np.float64)
    if isinstance(value, list):
        parts = [_numbers(v) for v in value]
        if any(p is None for p in parts):
            return None
        return np.concatenate([p.astype(np.float64).ravel() for p in parts]) if parts else np.zeros(0)
    return None


def _number(value: object) -> Optional[float]:
    """A metric of mi's JSON: a number, or the strings 'nan', 'inf', '-inf' it writes for non-finite values."""
    return None if value is None else float(value)  # type: ignore[arg-type]


def recompute(result_json: Path, model_a: Path, model_b: Path, data: Path) -> List[LayerTruth]:
    """Every layer mi paired, with mi's data-set cosine and the recomputed one (None: not recomputable, see note)."""
    doc = json.loads(Path(result_json).read_text())
    layers = (doc["results"].get("layers") or {}).get("layers") or []
    pairs = [(L["name"], L.get("name_b") or L["name"], _number((L.get("dataset") or {}).get("cosine"))) for L in layers]
    negligible = {(L["name"], L.get("name_b") or L["name"]) for L in layers if L.get("negligible")}
    exp_a, found_a = _expose(model_a, [a for a, _, _ in pairs])
    exp_b, found_b = _expose(model_b, [b for _, b, _ in pairs])
    sa, sb = _session(exp_a), _session(exp_b)
    out_a, out_b = [o.name for o in sa.get_outputs()], [o.name for o in sb.get_outputs()]
    sums: Dict[Tuple[str, str], List[float]] = {(a, b): [0.0, 0.0, 0.0, 0.0, 0] for a, b, _ in pairs}
    bad: Dict[Tuple[str, str], str] = {}
    for f in sorted(Path(data).glob("*.npz")):
        with np.load(f, allow_pickle=False) as z:
            sample = {k: z[k] for k in z.files}
        va = dict(zip(out_a, sa.run(None, _feed(sa, sample))))
        vb = dict(zip(out_b, sb.run(None, _feed(sb, sample))))
        for a, b, _ in pairs:
            if a not in va or b not in vb:
                continue
            x, y = _numbers(va[a]), _numbers(vb[b])
            if x is None or y is None:
                bad[(a, b)] = "strings: compared for equality, no cosine"
                continue
            x = x.astype(np.float64)
            if y.dtype in (np.uint8, np.int8, np.int32) and x.dtype.kind == "f":
                qp = _dequantiser(exp_b, b)
                if qp is None:
                    bad[(a, b)] = f"quantised {y.dtype} tensor without a dequantiser"
                    continue
                scale, zp = _init(exp_b, qp[0]), _init(exp_b, qp[1]) if qp[1] else 0
                # as DequantizeLinear computes it: the integer difference times the float32 scale, rounded to
                # float32 (in float64 a -2,000 mask value read 1.3e-4 off the float32 reference it equals)
                y = ((y.astype(np.int64) - np.asarray(zp, np.int64)).astype(np.float32)
                     * np.asarray(scale, np.float32)).astype(np.float32)
            y = y.astype(np.float64)
            if x.size != y.size:
                bad[(a, b)] = f"sizes differ ({x.shape} vs {y.shape})"
                continue
            s = sums[(a, b)]
            x, y = x.ravel(), y.reshape(-1) if x.shape == y.shape else y.ravel()
            # docs/metrics.md: positions finite in both enter the sums; the same +-Inf in both (a mask) and
            # NaN in both enter none; any other non-finite position (a NaN or Inf against a finite value, NaN
            # against Inf, opposite Infs) makes the layer total disagreement: cosine NaN, max |b - a| inf
            finite = np.isfinite(x) & np.isfinite(y)
            same = (np.isinf(x) & (x == y)) | (np.isnan(x) & np.isnan(y))
            s[4] += int(np.count_nonzero(~finite & ~same))
            x, y = x[finite], y[finite]
            s[0] += float(x @ y); s[1] += float(x @ x); s[2] += float(y @ y)
            s[3] = max(s[3], float(np.abs(y - x).max())) if x.size else s[3]
    truths = []
    for a, b, mi_cos in pairs:
        if a not in found_a or b not in found_b:
            side = "A" if a not in found_a else "B"
            truths.append(LayerTruth(a, b, mi_cos, None, f"not a top-level tensor of model {side}"))
            continue
        if (a, b) in bad:
            truths.append(LayerTruth(a, b, mi_cos, None, bad[(a, b)]))
            continue
        dot, na, nb, max_abs, mismatches = sums[(a, b)]
        cos = 1.0 if na == nb == 0 else (0.0 if na == 0 or nb == 0 else dot / np.sqrt(na * nb))
        if mismatches:
            cos, max_abs = float("nan"), float("inf")
        truths.append(LayerTruth(a, b, mi_cos, float(cos), mi_negligible=(a, b) in negligible, true_max_abs=max_abs))
    return truths


def worst_delta(truths: Sequence[LayerTruth]) -> Optional[LayerTruth]:
    """The recomputed layer whose mi cosine is furthest from the truth (None when none was recomputed)."""
    scored = [t for t in truths if t.delta is not None]
    return max(scored, key=lambda t: t.delta) if scored else None
