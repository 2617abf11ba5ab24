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
from typing import List, Optional, Tuple

import numpy as np

from ..core.graph import ModelGraph, NodeInfo
from ..core.weights import initializer_array
from ..results.validate import WeightCheck
from .context import Context

MISMATCH_DB = 10.0
_SUFFIXES = ("_quantized", "_quant", "_q")


def dequantize(q: np.ndarray, scale: np.ndarray, zp: Optional[np.ndarray], axis: int) -> np.ndarray:
    """(q - zp) * scale in float64, per-tensor or along `axis` (1-D scale)."""
    values = q.astype(np.float64)
    s = scale.astype(np.float64)
    z = zp.astype(np.float64) if zp is not None else np.zeros_like(s)
    if s.ndim == 1 and s.size > 1:
        shape = [1] * values.ndim
        shape[axis % values.ndim] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    return (values - z) * s


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


def compare_weights(ctx: Context, other: ModelGraph) -> List[WeightCheck]:
    """Every dequantised constant weight with a float counterpart; reports MI509/MI510."""
    ref = _Reference(other)
    checks: List[WeightCheck] = []
    for dq in ctx.graph.nodes:
        if dq.op_type != "DequantizeLinear" or len(dq.inputs) < 2 or not dq.outputs:
            continue
        q = ctx.const_value(dq.inputs[0])
        scale = ctx.const_value(dq.inputs[1])
        if q is None or scale is None or ctx.graph.node_attribute(dq.name, "block_size", 0):
            continue
        zp = ctx.const_value(dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] else None
        axis = int(ctx.graph.node_attribute(dq.name, "axis", 1))  # type: ignore[call-overload]
        found = _counterpart(ctx, ref, dq)
        if found is None:
            continue
        consumer, ref_name, ref_value, folded = found
        deq = dequantize(q, scale, zp, axis)
        check = _judge(ctx, dq, consumer, ref_name, ref_value, deq, folded)
        if check is not None:
            checks.append(check)
    return checks


def _counterpart(ctx: Context, ref: _Reference, dq: NodeInfo) -> Optional[Tuple[NodeInfo, str, np.ndarray, str]]:
    for consumer in ctx.graph.consumers.get(dq.outputs[0], []):
        slot = consumer.inputs.index(dq.outputs[0]) if dq.outputs[0] in consumer.inputs else -1
        twin = ref.graph.node_by_name.get(consumer.name)
        if twin is None or twin.op_type != consumer.op_type or slot < 0:
            continue
        bn = _unfolded_bn(ctx, ref.graph, consumer, twin)
        if slot < len(twin.inputs) and twin.inputs[slot]:
            value = ref.value(twin.inputs[slot])
            name = twin.inputs[slot]
        elif bn is not None and slot == 2:
            value, name = np.zeros(1, np.float32), f"{twin.name} (no bias)"
        else:
            continue
        if value is None:
            continue
        if bn is not None:
            value = _fold(ref, bn, value, slot)
            if value is None:
                continue
        return consumer, name, value, bn.name if bn is not None else ""
    stem = dq.inputs[0]
    for suffix in _SUFFIXES:
        if stem.endswith(suffix) and stem[: -len(suffix)] in ref.protos:
            value = ref.value(stem[: -len(suffix)])
            if value is not None:
                consumers = ctx.graph.consumers.get(dq.outputs[0], [])
                return (consumers[0] if consumers else dq), stem[: -len(suffix)], value, ""
    return None


def _unfolded_bn(ctx: Context, ref: ModelGraph, consumer: NodeInfo, twin: NodeInfo) -> Optional[NodeInfo]:
    """The reference's BatchNormalization right after `twin` (a Conv) when the quantised model folded it."""
    if twin.op_type != "Conv" or not twin.outputs:
        return None
    after = ref.consumers.get(twin.outputs[0], [])
    if len(after) != 1 or after[0].op_type != "BatchNormalization":
        return None
    mine = ctx.graph.consumers.get(consumer.outputs[0], []) if consumer.outputs else []
    if any(c.op_type == "BatchNormalization" for c in mine):
        return None
    return after[0]


def _fold(ref: _Reference, bn: NodeInfo, value: np.ndarray, slot: int) -> Optional[np.ndarray]:
    params = [ref.value(t) for t in bn.inputs[1:5]]
    if any(p is None for p in params) or slot not in (1, 2):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
    eps = float(ref.graph.node_attribute(bn.name, "epsilon", 1e-5))  # type: ignore[arg-type]
    factor = gamma / np.sqrt(var + eps)
    if slot == 1:
        return value.astype(np.float64) * factor.reshape((-1,) + (1,) * (value.ndim - 1))
    return (value.astype(np.float64) - mean) * factor + beta


def _judge(ctx: Context, dq: NodeInfo, consumer: NodeInfo, ref_name: str, ref_value: np.ndarray,
           deq: np.ndarray, folded: str) -> Optional[WeightCheck]:
    tensor = dq.inputs[0]
    label = f"weight '{tensor}' of {consumer.op_type} '{consumer.name}'"
    via = f" (BatchNormalization '{folded}' folded into it)" if folded else ""
    if ref_value.shape != deq.shape:
        ctx.report("MI509", f"{label}: dequantised shape {list(deq.shape)} differs from the reference's "
                            f"'{ref_name}' {list(ref_value.shape)}", node=consumer.name, tensor=tensor)
        return None
    db = sqnr_db(ref_value, deq)
    max_abs = float(np.max(np.abs(ref_value.astype(np.float64) - deq))) if deq.size else 0.0
    check = WeightCheck(tensor=tensor, reference=ref_name, node=consumer.name, sqnr_db=db, max_abs=max_abs,
                        elements=int(deq.size), folded=folded)
    if db < MISMATCH_DB:
        ctx.report("MI509", f"{label}: dequantised values differ from the reference's '{ref_name}'{via}: SQNR "
                            f"{db:.2f} dB, max |diff| {max_abs:.4g}", node=consumer.name, tensor=tensor,
                   sqnr_db=db, max_abs=max_abs)
    elif db < ctx.config.min_weight_sqnr:
        ctx.report("MI510", f"{label}: SQNR {db:.2f} dB against '{ref_name}'{via} is below "
                            f"{ctx.config.min_weight_sqnr:g} dB (max |diff| {max_abs:.4g})",
                   node=consumer.name, tensor=tensor, sqnr_db=db, max_abs=max_abs)
    return check
