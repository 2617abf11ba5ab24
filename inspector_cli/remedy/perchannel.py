"""Per-channel advice: which per-tensor-quantised weights lose most to their outlier channels, and
whether re-quantising a plan node's weight per channel is enough instead of keeping it in float."""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
import onnx

from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..results.remedy import WeightAdviceRow
from .evaluate import Evaluator, Target
from .exclusion import Quantisers, exclude_qdq
from .qdq_patch import (WEIGHT_AXIS, GraphIndex, axis_shape, dequantize_initializer, fp32_weight, int_attribute,
                        weight_input)
from .requant import per_channel_int8, requantize_per_channel

DEFAULT_MIN_GAIN_DB = 6.0
"""Per-channel is advised when it gains at least this much weight SQNR (6 dB = one bit)."""


def sqnr_db(reference: np.ndarray, approx: np.ndarray) -> float:
    """10 log10(sum ref^2 / sum (approx - ref)^2); inf when exact."""
    ref = reference.astype(np.float64)
    noise = float(((approx.astype(np.float64) - ref) ** 2).sum())
    signal = float((ref ** 2).sum())
    if noise == 0.0:
        return float("inf")
    return 10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")


def weight_advice(qdq: onnx.ModelProto, fp32: Optional[onnx.ModelProto] = None,
                  min_gain_db: float = DEFAULT_MIN_GAIN_DB,
                  fp32_names: Optional[Mapping[str, str]] = None) -> List[WeightAdviceRow]:
    """For every per-tensor-quantised weight: SQNR against the fp32 weight (the dequantised one when
    no fp32 model is given) as deployed, re-quantised per tensor (symmetric int8), and per channel.
    `per_channel_enough` is left None: only a verification run (`per_channel_enough`) answers it."""
    index = GraphIndex(qdq.graph)
    advice: List[WeightAdviceRow] = []
    for node in qdq.graph.node:
        found = weight_input(index, node) if node.op_type in WEIGHT_AXIS else None
        if found is None:
            continue
        position, dq = found
        scale = index.array(dq.input[1])
        if scale is None or scale.size != 1:
            continue  # already per channel
        deployed = dequantize_initializer(index, dq)
        weight = fp32_weight(fp32, (fp32_names or {}).get(node.name, node.name), position, deployed.shape)
        weight = deployed if weight is None else weight
        axis = WEIGHT_AXIS[node.op_type]
        if node.op_type == "Gemm" and int_attribute(node, "transB", 0) == 0:
            axis = 1
        step = max(float(np.abs(weight).max()) / 127.0, 1e-30)
        per_tensor = np.clip(np.round(weight / step), -127, 127) * step
        q, scales = per_channel_int8(weight, axis)
        per_channel = q.astype(np.float64) * scales.astype(np.float64).reshape(axis_shape(weight, scales, axis))
        pt, pc = sqnr_db(weight, per_tensor), sqnr_db(weight, per_channel)
        advice.append(WeightAdviceRow(node.name, dq.input[0], sqnr_db(weight, deployed), pt, pc,
                                      pc - pt >= min_gain_db))
    return advice


def per_channel_enough(fp32: onnx.ModelProto, qdq: onnx.ModelProto, plan: Sequence[str],
                       samples: Sequence[TensorMap], targets: Sequence[Target],
                       runtime: RuntimeConfig = RuntimeConfig()) -> Dict[str, Optional[bool]]:
    """For each plan node with a quantised weight: do the targets hold when, instead of keeping it in
    float, its weight is re-quantised per channel (the other plan nodes excluded, `exclusion.exclude_qdq`)?
    None for nodes without a quantised weight. One run per node, plus the reference."""
    opset = next((o.version for o in qdq.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:  # DequantizeLinear's axis (per-channel) came in opset 13: no such model to try
        return {node: None for node in plan}
    ids = [f"sample{i}" for i in range(len(samples))]
    ev = Evaluator(samples, ids, targets, runtime)
    ev.set_reference(fp32.SerializeToString())
    index = GraphIndex(qdq.graph)
    quantisers = Quantisers(qdq)
    verdict: Dict[str, Optional[bool]] = {}
    for node in plan:
        target = index.by_name.get(node)
        if target is None or weight_input(index, target) is None:
            verdict[node] = None
            continue
        others = quantisers.close([n for n in plan if n != node])  # excluded as quantize_static would
        if node in others:  # the others' exclusion re-calibrates a quantiser the node shares: it goes too
            verdict[node] = None
            continue
        model = requantize_per_channel(exclude_qdq(qdq, others, fp32, quantisers=quantisers), node, fp32)
        verdict[node] = ev.evaluate(model.SerializeToString(), label=f"{node} per channel").meets
    return verdict
