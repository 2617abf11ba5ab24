"""MI501-MI506, MI511: quantisation parameters of QDQ and QOperator models.

Every (scale, zero point) pair of QuantizeLinear, DequantizeLinear and the QLinear* operators is
read (constants only; dynamic scales are left alone) and checked: scales positive, finite and
normal; zero points inside the quantised type's range; per-channel axes that fit; Q -> DQ pairs
that agree.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx

from .context import Context

# (domain, op) -> groups of (data input index or None for the op's output side, scale index, zero-point index)
_BINARY = [(0, 1, 2), (3, 4, 5), (None, 6, 7)]
_UNARY = [(0, 1, 2), (None, 3, 4)]
QUANT_PARAMS: Dict[Tuple[str, str], List[Tuple[Optional[int], int, int]]] = {
    ("", "QuantizeLinear"): [(None, 1, 2)],
    ("", "DequantizeLinear"): [(0, 1, 2)],
    ("", "QLinearConv"): _BINARY,
    ("", "QLinearMatMul"): _BINARY,
    ("com.microsoft", "QuantizeLinear"): [(None, 1, 2)],
    ("com.microsoft", "DequantizeLinear"): [(0, 1, 2)],
    ("com.microsoft", "QLinearAdd"): _BINARY,
    ("com.microsoft", "QLinearMul"): _BINARY,
    ("com.microsoft", "QGemm"): [(0, 1, 2), (3, 4, 5), (None, 7, 8)],
    **{("com.microsoft", op): _UNARY for op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool",
                                               "QLinearAveragePool", "QLinearSoftmax")},
}
T = onnx.TensorProto
QRANGE: Dict[int, Tuple[int, int]] = {
    T.INT8: (-128, 127), T.UINT8: (0, 255), T.INT16: (-32768, 32767), T.UINT16: (0, 65535),
    T.INT4: (-8, 7), T.UINT4: (0, 15), T.INT32: (-2 ** 31, 2 ** 31 - 1),
}
COMPUTE_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


def type_name(elem_type: int) -> str:
    return onnx.TensorProto.DataType.Name(elem_type).lower() if elem_type else "?"


def summary(value: np.ndarray) -> str:
    """'0.5' for one value, '[0.5, 0.25, ...] (16 values)' for more."""
    flat = np.asarray(value).ravel()
    if flat.size == 1:
        return f"{flat[0]:.6g}"
    return f"[{', '.join(f'{v:.6g}' for v in flat[:3])}{', ...' if flat.size > 3 else ''}] ({flat.size} values)"


def quant_type(ctx: Context, node_name: str, data: Optional[int], zp: str) -> int:
    """The quantised element type of a group: the data input's type, else the zero point's, else output_dtype."""
    node = ctx.graph.node_by_name[node_name]
    if data is not None and data < len(node.inputs) and node.inputs[data]:
        elem = ctx.info(node.inputs[data]).elem_type
        if elem:
            return elem
    proto = ctx.const_proto(zp) if zp else None
    if proto is not None:
        return proto.data_type
    declared = ctx.int_attribute(node_name, "output_dtype", 0)
    if declared:
        return declared
    return T.UINT8 if node.op_type == "QuantizeLinear" else 0


def iter_groups(ctx: Context):
    """(node, data index, scale name, zero-point name) of every quantisation parameter group."""
    for node in ctx.graph.nodes:
        domain = node.domain if node.domain != "ai.onnx" else ""
        for data, s_idx, z_idx in QUANT_PARAMS.get((domain, node.op_type), []):
            scale = node.inputs[s_idx] if s_idx < len(node.inputs) else ""
            zp = node.inputs[z_idx] if z_idx < len(node.inputs) else ""
            if scale:
                yield node, data, scale, zp


def check_parameters(ctx: Context) -> None:
    """MI501-MI505 on every parameter group."""
    for node, data, scale_name, zp_name in iter_groups(ctx):
        label = f"{node.op_type} '{node.name}'"
        scale = ctx.const_value(scale_name)
        if scale is not None and np.issubdtype(scale.dtype, np.floating):
            _check_scale(ctx, label, node.name, scale_name, scale.astype(np.float64), np.finfo(scale.dtype).tiny)
        qtype = quant_type(ctx, node.name, data, zp_name)
        zp = ctx.const_value(zp_name)
        if zp is not None:
            _check_zero_point(ctx, label, node.name, zp_name, zp, qtype)
        if scale is not None and node.op_type in ("QuantizeLinear", "DequantizeLinear", "QLinearConv"):
            _check_axis(ctx, label, node.name, scale_name, scale, zp)


def _check_scale(ctx: Context, label: str, node: str, name: str, scale: np.ndarray, tiny: float) -> None:
    flat = scale.ravel()
    where = lambda mask: (f"{int(mask.sum())} of {flat.size} values, first index {int(np.argmax(mask))} = "  # noqa: E731
                          f"{flat[int(np.argmax(mask))]:.6g}" if flat.size > 1 else f"{flat[0]:.6g}")
    nonfinite = ~np.isfinite(flat)
    if nonfinite.any():
        ctx.report("MI502", f"{label}: scale '{name}' is NaN or Inf ({where(nonfinite)})", node=node, tensor=name)
    finite = np.where(nonfinite, 1.0, flat)
    bad = finite <= 0
    if bad.any():
        ctx.report("MI501", f"{label}: scale '{name}' is <= 0 ({where(bad)})", node=node, tensor=name)
    denormal = (finite > 0) & (finite < tiny)
    if denormal.any():
        ctx.report("MI503", f"{label}: scale '{name}' is denormal, below {tiny:.3g} ({where(denormal)})",
                   node=node, tensor=name)


def _check_zero_point(ctx: Context, label: str, node: str, name: str, zp: np.ndarray, qtype: int) -> None:
    proto = ctx.const_proto(name)
    stored = proto.data_type if proto is not None else 0
    if qtype not in QRANGE:
        return  # float8 and unknown types: zero points are not integers here
    low, high = QRANGE[qtype]
    values = zp.astype(np.int64, copy=False).ravel() if np.issubdtype(zp.dtype, np.integer) else None
    if values is None:
        ctx.report("MI504", f"{label}: zero point '{name}' is {type_name(stored)}, but the quantised data is "
                            f"{type_name(qtype)}", node=node, tensor=name)
        return
    outside = (values < low) | (values > high)
    if outside.any():
        first = int(np.argmax(outside))
        ctx.report("MI504", f"{label}: zero point '{name}' = {values[first]} is outside {type_name(qtype)} "
                            f"[{low}, {high}] ({int(outside.sum())} of {values.size} values)",
                   node=node, tensor=name, value=int(values[first]), low=low, high=high)
    elif stored and stored != qtype:
        ctx.report("MI504", f"{label}: zero point '{name}' is {type_name(stored)}, but the quantised data is "
                            f"{type_name(qtype)}", node=node, tensor=name)


def _check_axis(ctx: Context, label: str, node_name: str, scale_name: str, scale: np.ndarray,
                zp: Optional[np.ndarray]) -> None:
    node = ctx.graph.node_by_name[node_name]
    if zp is not None and zp.shape != scale.shape and zp.size != 1:
        ctx.report("MI505", f"{label}: zero point shape {list(zp.shape)} differs from scale shape {list(scale.shape)}",
                   node=node_name, tensor=scale_name)
        return
    if scale.ndim != 1 or scale.size <= 1 or ctx.int_attribute(node_name, "block_size", 0):
        return
    if node.op_type == "QLinearConv":
        data, axis = node.inputs[3], 0
    else:
        data = node.inputs[0]
        axis = ctx.int_attribute(node_name, "axis", 1)
    shape = ctx.info(data).shape
    if shape is None:
        return
    rank = len(shape)
    if not -rank <= axis < rank:
        ctx.report("MI505", f"{label}: axis {axis} is out of range for '{data}' of rank {rank}",
                   node=node_name, tensor=data, axis=axis, rank=rank)
        return
    dim = shape[axis]
    if isinstance(dim, int) and dim != scale.size:
        ctx.report("MI505", f"{label}: '{data}' has {dim} elements along axis {axis} but scale '{scale_name}' has "
                            f"{scale.size} values", node=node_name, tensor=data, axis=axis, dim=dim,
                   scale_size=int(scale.size))


def check_pairs(ctx: Context) -> None:
    """MI506: QuantizeLinear -> DequantizeLinear pairs must share their parameters."""
    graph = ctx.graph
    for q in graph.nodes:
        if q.op_type != "QuantizeLinear" or not q.outputs:
            continue
        for dq in graph.consumers.get(q.outputs[0], []):
            if dq.op_type != "DequantizeLinear":
                continue
            diffs = _pair_differences(ctx, q, dq)
            if diffs:
                ctx.report("MI506", f"QuantizeLinear '{q.name}' -> DequantizeLinear '{dq.name}': "
                                    f"{'; '.join(diffs)}", node=dq.name, tensor=q.outputs[0])


def _pair_differences(ctx: Context, q, dq) -> List[str]:
    def param(node, index: int) -> str:
        return node.inputs[index] if index < len(node.inputs) else ""

    diffs = []
    s_q, s_dq = param(q, 1), param(dq, 1)
    if s_q != s_dq:
        a, b = ctx.const_value(s_q), ctx.const_value(s_dq)
        if a is not None and b is not None and (a.shape != b.shape or not np.allclose(a, b, rtol=1e-6, atol=0)):
            ratio = ""
            if a.size == 1 and b.size == 1 and float(a.ravel()[0]) != 0:
                ratio = f" (values rescaled by {float(b.ravel()[0]) / float(a.ravel()[0]):.4g})"
            diffs.append(f"scale {summary(a)} vs {summary(b)}{ratio}")
    z_q, z_dq = param(q, 2), param(dq, 2)
    if z_q != z_dq:
        a = ctx.const_value(z_q) if z_q else np.zeros(1, np.int64)
        b = ctx.const_value(z_dq) if z_dq else np.zeros(1, np.int64)
        if a is not None and b is not None and (a.size != b.size or not np.array_equal(a.ravel(), b.ravel())):
            diffs.append(f"zero point {summary(a)} vs {summary(b)}")
    scale = ctx.const_value(s_q)
    if scale is not None and scale.size > 1:
        ax_q = ctx.int_attribute(q.name, "axis", 1)
        ax_dq = ctx.int_attribute(dq.name, "axis", 1)
        if ax_q != ax_dq:
            diffs.append(f"axis {ax_q} vs {ax_dq}")
    return diffs


def check_coverage(ctx: Context) -> None:
    """MI511: in a quantised model, compute ops that no DequantizeLinear feeds run in float."""
    graph = ctx.graph
    quantised = any(n.op_type in ("QuantizeLinear", "DequantizeLinear") or n.op_type.startswith("QLinear")
                    for n in graph.nodes)
    if not quantised:
        return
    for op in COMPUTE_OPS:
        nodes = [n for n in graph.nodes if n.op_type == op]
        floating = [n.name for n in nodes
                    if not any(graph.producer.get(t) is not None and graph.producer[t].op_type == "DequantizeLinear"
                               for t in n.inputs if t)]
        if floating:
            shown = ", ".join(floating[:3]) + (", ..." if len(floating) > 3 else "")
            ctx.report("MI511", f"{len(floating)} of {len(nodes)} {op} node(s) run in float (no DequantizeLinear "
                                f"feeds them): {shown}", node=floating[0], nodes=floating)
