"""Layer error in quantisation steps (with `--layers` on a quantised MODEL_B), and the simulated vs
deployed comparison of `--simulated` with its likely cause."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import onnx
from onnx import numpy_helper

from ..core.fingerprint import u8s8_saturates
from ..results.base import Finding, Severity
from ..results.layers import LayerSection
from ..results.remedy import QuantStepRow, SimulatedRow

FLAG_STEPS = 4.0
"""'A few steps': beyond it, with a large own error, the quantiser itself is suspect."""
FLAG_OWN_COSINE = 0.99


def _scalar(model: onnx.ModelProto, name: str) -> Optional[float]:
    for init in model.graph.initializer:
        if init.name == name:
            # a per-channel scale is not read at all: the lazily loaded proto refers to its bytes in the
            # model file by a relative location, which to_array cannot resolve (it crashed the run)
            if math.prod(init.dims) != 1:
                return None
            value = numpy_helper.to_array(init)
            return float(value.reshape(-1)[0]) if value.size == 1 else None
    for node in model.graph.node:  # scales given by Constant nodes
        if node.op_type == "Constant" and node.output and node.output[0] == name:
            for attr in node.attribute:
                if attr.name == "value":
                    value = numpy_helper.to_array(attr.t)
                    return float(value.reshape(-1)[0]) if value.size == 1 else None
    return None


def tensor_scales(model: onnx.ModelProto) -> Dict[str, float]:
    """tensor -> per-tensor quantisation scale, for tensors produced by DequantizeLinear / a QLinear
    op (its output scale) or read by a QuantizeLinear. Per-channel scales are left out."""
    scales: Dict[str, float] = {}
    for node in model.graph.node:
        scale: Optional[float] = None
        if node.op_type == "DequantizeLinear" and len(node.input) > 1:
            scale = _scalar(model, node.input[1])
            targets = list(node.output[:1])
        elif node.op_type.startswith("QLinear") and len(node.input) > 6:
            scale = _scalar(model, node.input[6])  # y_scale of QLinearConv/MatMul/Add/Mul
            targets = list(node.output[:1])
        elif node.op_type == "QuantizeLinear" and len(node.input) > 1:
            scale = _scalar(model, node.input[1])
            targets = [node.input[0]]
        else:
            continue
        if scale is not None and scale > 0:
            for name in targets:
                scales.setdefault(name, scale)
    return scales


def quant_step_rows(model_b: onnx.ModelProto, section: LayerSection) -> List[QuantStepRow]:
    """Max and mean |b - a| / scale of every layer whose B tensor has a per-tensor scale. With one
    scale per tensor these are the data-set max_abs and mean_abs divided by it (what
    `qsteps.quant_step_error` computes element-wise)."""
    scales = tensor_scales(model_b)
    rows: List[QuantStepRow] = []
    for layer in section.layers:
        scale = scales.get(layer.name_b)
        # integer tensors compared as raw codes have no meaningful step error; dequantised ones do
        if scale is None or not ("float" in layer.dtype_b or "dequantised" in layer.dtype_b):
            continue
        max_abs, mean_abs = layer.dataset.get("max_abs"), layer.dataset.get("mean_abs")
        own = (layer.isolated or {}).get("cosine")
        max_steps = None if max_abs is None else float(max_abs) / scale
        mean_steps = None if mean_abs is None else float(mean_abs) / scale
        flagged = bool(max_steps is not None and max_steps > FLAG_STEPS and own is not None and own < FLAG_OWN_COSINE)
        rows.append(QuantStepRow(layer.name, layer.name_b, scale, max_steps, mean_steps, own, flagged))
    return rows


def quant_step_findings(rows: Sequence[QuantStepRow]) -> List[Finding]:
    return [Finding("MI865", Severity.WARNING,
                    f"layer '{r.layer}': error up to {r.max_steps:.1f} quantisation steps (scale {r.scale:.3g}) and "
                    f"its own error is large (isolated cosine {r.isolated_cosine:.4f}): a saturating or wrong scale",
                    tensor=r.layer, hint="its cheapest remedy: mi fix")
            for r in rows if r.flagged and r.max_steps is not None and r.isolated_cosine is not None]


def u8s8(model: onnx.ModelProto) -> bool:
    """Weights quantised to int8 and activations to 8 bits: onnxruntime's x86 kernels multiply them as
    uint8 x int8, the mix that AVX2 without VNNI saturates (core/fingerprint.u8s8_saturates). int8
    activations count too: on x86 onnxruntime shifts them to uint8 before fusing (QDQ int8 is kept as
    int8 on ARM only). A QuantizeLinear of an initializer quantises a weight, not an activation."""
    dtypes = {}
    for init in model.graph.initializer:
        dtypes[init.name] = init.data_type
    activation_8bit = any(n.op_type == "QuantizeLinear" and len(n.input) > 2 and n.input[0] not in dtypes
                          and dtypes.get(n.input[2]) in (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)
                          for n in model.graph.node)
    weight_s8 = any(t.data_type == onnx.TensorProto.INT8 and len(t.dims) >= 2 for t in model.graph.initializer)
    return activation_8bit and weight_s8


def simulated_finding(rows: Sequence[SimulatedRow], model_b: onnx.ModelProto, cpu_flags: Sequence[str]
                      ) -> Optional[Finding]:
    """When the deployed error is much larger than the QDQ arithmetic's, say so with the likely cause."""
    gaps = [(r, 1.0 - r.cosine_deployed, 1.0 - r.cosine_simulated) for r in rows
            if r.cosine_deployed is not None and r.cosine_simulated is not None]
    worse = [(r, d, s) for r, d, s in gaps if d > 2.0 * s + 1e-3]
    if not worse:
        return None
    row, deployed, simulated = max(worse, key=lambda x: x[1] - x[2])
    if u8s8(model_b) and u8s8_saturates(cpu_flags):
        cause = ("u8s8 products saturate in int16 on CPUs without VNNI (AVX2): quantise with reduce_range=True "
                 "or as U8U8 (activation and weight uint8)")
    else:
        cause = "a graph rewrite or fused kernel: run --bisect-optimizers with --a-opt-level disable --b-opt-level all"
    return Finding("MI866", Severity.WARNING,
                   f"'{row.layer}': cosine {1 - simulated:.4f} in QDQ arithmetic but {1 - deployed:.4f} as deployed; "
                   f"likely cause: {cause}", tensor=row.layer)


def simulated_rows(deployed: Dict[str, Dict[str, Optional[float]]],
                   simulated: Dict[str, Dict[str, Optional[float]]]) -> List[SimulatedRow]:
    """Rows for the tensors measured both ways (outputs first, as given)."""
    return [SimulatedRow(name, simulated[name].get("cosine"), metrics.get("cosine"),
                         simulated[name].get("max_abs"), metrics.get("max_abs"))
            for name, metrics in deployed.items() if name in simulated]


__all__ = ["tensor_scales", "quant_step_rows", "quant_step_findings", "simulated_rows", "simulated_finding", "u8s8"]
