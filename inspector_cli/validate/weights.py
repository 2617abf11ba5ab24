"""MI509/MI510: dequantised weights against the float weights of the `--against` model.

Each DequantizeLinear of a constant is dequantised ((q - zp) * scale along its axis) and paired with
the float tensor the reference feeds into the same slot of the same-named node (quantisers keep
node names), else with the initializer whose name the quantiser derived ('w' -> 'w_quantized').
When the reference still has BatchNormalization after that Conv and the quantised model does not
(quant_pre_process folds it), the BN is folded into the reference first, so a correct folding is
not mistaken for a wrong weight.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

import numpy as np

from ..core.graph import ModelGraph, NodeInfo
from ..core.quantparams import dequantize
from ..core.weights import initializer_array
from ..results.validate import WeightCheck
from .context import Context

MISMATCH_DB = 10.0
_SUFFIXES = ("_quantized", "_quant", "_q")


def sqnr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    noise = float(np.sum((reference.astype(np.float64) - candidate) ** 2))
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


class _Reference:
    """Constant values of the reference model, read one at a time."""

    def __init__(self, graph: ModelGraph) -> None:
        self.graph = graph
        self.protos = {t.name: t for t in graph.model.graph.initializer}
        for node in graph.model.graph.node:
            if node.op_type == "Constant" and node.output:
                for attr in node.attribute:
                    if attr.name == "value":
                        self.protos[node.output[0]] = attr.t

    def value(self, name: str) -> Optional[np.ndarray]:
        proto = self.protos.get(name)
        return initializer_array(self.graph, proto) if proto is not None else None


@dataclass(frozen=True)
class _Quantised:
    """One constant weight of the validated model, dequantised, and where it is used."""

    tensor: str
    value: np.ndarray
    node: NodeInfo
    """The compute node using it (the DequantizeLinear's consumer, or the QOperator node itself)."""
    slot: int
    """Its input slot in the float version of that node (1 weight, 2 bias)."""


# QOperator ops: (float op, weight index, scale index, zero-point index)
_QOPERATOR = {"QLinearConv": ("Conv", 3, 4, 5), "QLinearMatMul": ("MatMul", 3, 4, 5), "QGemm": ("Gemm", 3, 4, 5)}


def compare_weights(ctx: Context, other: ModelGraph) -> List[WeightCheck]:
    """Every dequantised constant weight with a float counterpart; reports MI509/MI510."""
    ref = _Reference(other)
    checks: List[WeightCheck] = []
    for weight in _quantised_weights(ctx):
        candidates = _references(ctx, ref, weight)
        if not candidates:
            continue
        check = _judge(ctx, weight, candidates)
        if check is not None:
            checks.append(check)
    return checks


def _quantised_weights(ctx: Context) -> Iterator[_Quantised]:
    graph = ctx.graph
    for node in graph.nodes:
        if node.op_type == "DequantizeLinear" and len(node.inputs) >= 2 and node.outputs:
            if ctx.int_attribute(node.name, "block_size", 0):
                continue
            axis = ctx.int_attribute(node.name, "axis", 1)
            value = _dequantized(ctx, node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else "",
                                 axis)
            if value is None:
                continue
            for consumer in graph.consumers.get(node.outputs[0], []):
                if node.outputs[0] in consumer.inputs and consumer.op_type not in ("QuantizeLinear", "DequantizeLinear"):
                    yield _Quantised(node.inputs[0], value, consumer, consumer.inputs.index(node.outputs[0]))
                    break
        elif node.op_type in _QOPERATOR and len(node.inputs) > 5:
            _, w, s, z = _QOPERATOR[node.op_type]
            axis = 0 if node.op_type == "QLinearConv" or ctx.int_attribute(node.name, "transB", 0) else -1
            value = _dequantized(ctx, node.inputs[w], node.inputs[s], node.inputs[z], axis)
            if value is not None:
                yield _Quantised(node.inputs[w], value, node, 1)


def _dequantized(ctx: Context, q_name: str, scale_name: str, zp_name: str, axis: int) -> Optional[np.ndarray]:
    q, scale = ctx.const_value(q_name), ctx.const_value(scale_name)
    if q is None or scale is None or not np.issubdtype(q.dtype, np.integer):
        return None
    zp = ctx.const_value(zp_name) if zp_name else None
    return dequantize(q, scale, zp, axis)


def _references(ctx: Context, ref: _Reference, weight: _Quantised) -> List[Tuple[str, np.ndarray, str]]:
    """(reference name, float value, folded BN name) candidates for one quantised weight."""
    twin = _twin(ref.graph, weight)
    name: Optional[str] = None
    if twin is not None and weight.slot < len(twin.inputs) and twin.inputs[weight.slot]:
        name = twin.inputs[weight.slot]
    else:
        for suffix in _SUFFIXES:  # the quantiser derives names: 'w' -> 'w_quantized'
            stem = weight.tensor[: -len(suffix)] if weight.tensor.endswith(suffix) else None
            if stem and stem in ref.protos:
                name = stem
                consumers = ref.graph.consumers.get(stem, [])
                twin = twin or (consumers[0] if consumers else None)
                break
    value = ref.value(name) if name else None
    if value is None and twin is not None and weight.slot == 2:
        name, value = f"{twin.name} (no bias)", np.zeros(weight.value.shape, np.float32)
    if value is None or name is None:
        return []
    candidates = [(name, value.astype(np.float64), "")]
    bn = _following_bn(ref.graph, twin) if twin is not None else None
    if bn is not None:
        folded = _fold(ref, bn, value, weight.slot)
        if folded is not None:
            candidates.append((name, folded, bn.name))
    return candidates


def _twin(graph: ModelGraph, weight: _Quantised) -> Optional[NodeInfo]:
    """The reference node that plays the role of `weight.node` (same name, or QOperator name less '_quant')."""
    float_op = _QOPERATOR.get(weight.node.op_type, (weight.node.op_type,))[0]
    for name in (weight.node.name, weight.node.name[: -len("_quant")] if weight.node.name.endswith("_quant") else ""):
        twin = graph.node_by_name.get(name) if name else None
        if twin is not None and twin.op_type == float_op:
            return twin
    return None


def _following_bn(ref: ModelGraph, twin: NodeInfo) -> Optional[NodeInfo]:
    """The reference's BatchNormalization right after a Conv: a quantiser may have folded it."""
    if twin.op_type != "Conv" or not twin.outputs:
        return None
    after = ref.consumers.get(twin.outputs[0], [])
    return after[0] if len(after) == 1 and after[0].op_type == "BatchNormalization" else None


def _fold(ref: _Reference, bn: NodeInfo, value: np.ndarray, slot: int) -> Optional[np.ndarray]:
    params = [ref.value(t) for t in bn.inputs[1:5]]
    if any(p is None for p in params) or slot not in (1, 2):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
    eps = ref.graph.node_attribute(bn.name, "epsilon", 1e-5)
    eps = float(eps) if isinstance(eps, (int, float)) else 1e-5
    factor = gamma / np.sqrt(var + eps)
    if slot == 1:
        return value.astype(np.float64) * factor.reshape((-1,) + (1,) * (value.ndim - 1))
    return (value.astype(np.float64) - mean) * factor + beta


def _judge(ctx: Context, weight: _Quantised, candidates: List[Tuple[str, np.ndarray, str]]) -> Optional[WeightCheck]:
    """Pick the reference reading that matches best (as is, or with its BatchNormalization folded in)."""
    deq = weight.value
    label = f"weight '{weight.tensor}' of {weight.node.op_type} '{weight.node.name}'"
    fitting = [(sqnr_db(value, deq), name, value, bn) for name, value, bn in candidates if value.shape == deq.shape]
    if not fitting:
        name, value, _ = candidates[0]
        ctx.report("MI509", f"{label}: dequantised shape {list(deq.shape)} differs from the reference's "
                            f"'{name}' {list(value.shape)}", node=weight.node.name, tensor=weight.tensor)
        return None
    db, name, value, bn = max(fitting, key=lambda c: c[0])
    via = f" (BatchNormalization '{bn}' folded into it)" if bn else ""
    max_abs = float(np.max(np.abs(value - deq))) if deq.size else 0.0
    check = WeightCheck(tensor=weight.tensor, reference=name, node=weight.node.name, sqnr_db=db, max_abs=max_abs,
                        elements=int(deq.size), folded=bn)
    if db < MISMATCH_DB:
        ctx.report("MI509", f"{label}: dequantised values differ from the reference's '{name}'{via}: SQNR "
                            f"{db:.2f} dB, max |diff| {max_abs:.4g}", node=weight.node.name, tensor=weight.tensor,
                   sqnr_db=db, max_abs=max_abs)
    elif db < ctx.config.min_weight_sqnr:
        ctx.report("MI510", f"{label}: SQNR {db:.2f} dB against '{name}'{via} is below "
                            f"{ctx.config.min_weight_sqnr:g} dB (max |diff| {max_abs:.4g})",
                   node=weight.node.name, tensor=weight.tensor, sqnr_db=db, max_abs=max_abs)
    return check
