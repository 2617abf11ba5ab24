"""Quantisation ranges: observed values at each quantiser against what its scale and zero point
can represent.

A QuantizeLinear with scale s and zero point z into [qmin, qmax] represents
[s*(qmin - z), s*(qmax - z)]; a value saturates when it rounds outside, i.e. lies below
s*(qmin - z - 0.5) or above s*(qmax - z + 0.5). For QLinear ops (QOperator format) the integer
output is checked: values at qmin or qmax are counted as saturated (clipped, or exactly at the
limit). The share of the integer range used is (q(max) - q(min) + 1) / (qmax - qmin + 1) from the
observed extremes, averaged over channels for per-axis quantisation.

A QuantizeLinear whose range starts exactly at 0 (zero point = qmin) is how quantisers fold a
ReLU into the quantiser: its negative inputs are counted as `clipped_low`, not as saturation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..core.graph import ModelGraph

QRANGES: Dict[int, Tuple[str, int, int]] = {
    2: ("uint8", 0, 255), 3: ("int8", -128, 127), 4: ("uint16", 0, 65535), 5: ("int16", -32768, 32767),
    21: ("uint4", 0, 15), 22: ("int4", -8, 7)}
QLINEAR_OUTPUT_PARAMS: Dict[str, Tuple[int, int]] = {
    "QLinearConv": (6, 7), "QLinearMatMul": (6, 7), "QLinearAdd": (6, 7), "QLinearMul": (6, 7),
    "QGemm": (7, 8), "QLinearSigmoid": (3, 4), "QLinearLeakyRelu": (3, 4), "QLinearSoftmax": (3, 4),
    "QLinearGlobalAveragePool": (3, 4), "QLinearAveragePool": (3, 4), "QLinearConcat": (0, 1),
    "QLinearReduceMean": (3, 4), "QLinearWhere": (6, 7)}


@dataclass(frozen=True)
class Quantizer:
    """One quantiser: which tensor it sees and its parameters."""

    node: str
    op_type: str
    tensor: str
    source: str
    """'activation' (a QuantizeLinear input computed per sample), 'weight' (a constant input) or
    'qlinear-output' (the integer output of a QLinear op)."""
    scale: np.ndarray
    zero_point: np.ndarray
    axis: Optional[int]
    qtype: str
    qmin: int
    qmax: int

    def bounds(self, ndim: int, *, half_step: float) -> Tuple[np.ndarray, np.ndarray]:
        """Lower/upper value limits, shaped to broadcast against a tensor of `ndim` dimensions."""
        lo = self.scale * (self.qmin - self.zero_point - half_step)
        hi = self.scale * (self.qmax - self.zero_point + half_step)
        if self.axis is None or lo.size == 1:
            return lo.reshape(()), hi.reshape(())
        shape = [1] * ndim
        shape[self.axis % ndim] = lo.size
        return lo.reshape(shape), hi.reshape(shape)


def constant_value(graph: ModelGraph, name: str) -> Tuple[Optional[np.ndarray], int]:
    """(value, ONNX element type) of an initializer or Constant output; (None, 0) otherwise."""
    from onnx import numpy_helper

    from ..core.weights import initializer_array

    tensor = graph.initializer(name)
    if tensor is not None:
        return initializer_array(graph, tensor), int(tensor.data_type)
    node = graph.producer.get(name)
    if node is not None and node.op_type == "Constant":
        for attr in graph.node_proto(node.name).attribute:
            if attr.name == "value":
                return numpy_helper.to_array(attr.t), int(attr.t.data_type)
    return None, 0


def find_quantizers(graph: ModelGraph) -> Tuple[List[Quantizer], List[str]]:
    """Every QuantizeLinear and QLinear op with constant parameters; notes for those skipped."""
    specs: List[Quantizer] = []
    notes: List[str] = []
    constants = graph.initializer_names
    for node in graph.nodes:
        if node.op_type == "QuantizeLinear":
            params, tensor = (1, 2), node.inputs[0]
            source = "weight" if tensor in constants or _is_constant(graph, tensor) else "activation"
        elif node.op_type in QLINEAR_OUTPUT_PARAMS:
            params, tensor, source = QLINEAR_OUTPUT_PARAMS[node.op_type], node.outputs[0], "qlinear-output"
        else:
            continue
        spec, problem = _spec(graph, node, tensor, source, params)
        if spec is not None:
            specs.append(spec)
        else:
            notes.append(f"{node.op_type} '{node.name}' not checked: {problem}")
    return specs, notes


def _is_constant(graph: ModelGraph, tensor: str) -> bool:
    node = graph.producer.get(tensor)
    return node is not None and node.op_type == "Constant"


def _spec(graph: ModelGraph, node: Any, tensor: str, source: str,
          params: Tuple[int, int]) -> Tuple[Optional[Quantizer], str]:
    inputs = node.inputs
    scale_name = inputs[params[0]] if len(inputs) > params[0] else ""
    zp_name = inputs[params[1]] if len(inputs) > params[1] else ""
    scale, _ = constant_value(graph, scale_name) if scale_name else (None, 0)
    if scale is None:
        return None, "its scale is not a constant"
    if zp_name:
        zero_point, elem = constant_value(graph, zp_name)
        if zero_point is None:
            return None, "its zero point is not a constant"
    else:
        elem = int(graph.node_attribute(node.name, "output_dtype", 2) or 2)  # no zero point: uint8 (or output_dtype)
        zero_point = np.zeros(1)
    if elem not in QRANGES:
        return None, f"quantised type {elem} (float8 or other) is not supported"
    if graph.node_attribute(node.name, "block_size", 0):
        return None, "blocked quantisation is not supported"
    qtype, qmin, qmax = QRANGES[elem]
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    zero_point = np.asarray(zero_point, dtype=np.float64).reshape(-1)
    axis = None
    if scale.size > 1:
        axis = int(graph.node_attribute(node.name, "axis", 1) or 1) if node.op_type == "QuantizeLinear" else 1
    return Quantizer(node=node.name, op_type=node.op_type, tensor=tensor, source=source, scale=scale,
                     zero_point=zero_point, axis=axis, qtype=qtype, qmin=qmin, qmax=qmax), ""


class QuantTracker:
    """Saturation and range use of one quantiser over the samples."""

    def __init__(self, spec: Quantizer) -> None:
        self.spec = spec
        self.count = 0
        self.saturated = 0
        self.clipped_low = 0
        self.relu_folded = spec.source == "activation" and bool(np.all(spec.zero_point == spec.qmin))
        self.lo: Optional[np.ndarray] = None
        self.hi: Optional[np.ndarray] = None

    def update(self, array: np.ndarray) -> None:
        spec = self.spec
        x = np.asarray(array)
        if spec.source == "qlinear-output":
            self.saturated += int(np.count_nonzero(x == spec.qmin)) + int(np.count_nonzero(x == spec.qmax))
            x = x.astype(np.float64)
            x = spec.scale.reshape(-1)[:1] * (x - spec.zero_point[:1])  # dequantised, for the observed range
        else:
            low, high = spec.bounds(x.ndim, half_step=0.5)
            below = int(np.count_nonzero(x < low))
            if self.relu_folded:
                self.clipped_low += below
                below = 0
            self.saturated += below + int(np.count_nonzero(x > high))
        self.count += int(x.size)
        lo, hi = self._extremes(x)
        self.lo = lo if self.lo is None else np.fmin(self.lo, lo)
        self.hi = hi if self.hi is None else np.fmax(self.hi, hi)

    def merge(self, other: "QuantTracker") -> None:
        """Fold in the values `other` saw (counts add, extremes combine: exact)."""
        self.count += other.count
        self.saturated += other.saturated
        self.clipped_low += other.clipped_low
        if other.lo is not None:
            self.lo = other.lo.copy() if self.lo is None else np.fmin(self.lo, other.lo)
        if other.hi is not None:
            self.hi = other.hi.copy() if self.hi is None else np.fmax(self.hi, other.hi)

    def _extremes(self, x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        axis = self.spec.axis
        if axis is None or x.ndim == 0:
            finite = x[np.isfinite(x)] if not np.isfinite(x).all() else x
            if finite.size == 0:
                return np.array([np.nan]), np.array([np.nan])
            return np.array([finite.min()], dtype=np.float64), np.array([finite.max()], dtype=np.float64)
        others = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
        return (np.nanmin(x, axis=others).astype(np.float64), np.nanmax(x, axis=others).astype(np.float64))

    def finish(self) -> Dict[str, Any]:
        spec = self.spec
        lo = self.lo if self.lo is not None else np.array([np.nan])
        hi = self.hi if self.hi is not None else np.array([np.nan])
        levels = spec.qmax - spec.qmin + 1
        with np.errstate(invalid="ignore"):
            q_lo = np.clip(np.round(lo / spec.scale) + spec.zero_point, spec.qmin, spec.qmax)
            q_hi = np.clip(np.round(hi / spec.scale) + spec.zero_point, spec.qmin, spec.qmax)
            used = (q_hi - q_lo + 1) / levels
        share = self.saturated / self.count if self.count else 0.0
        return {"observed": [float(np.nanmin(lo)), float(np.nanmax(hi))], "count": self.count,
                "saturated": self.saturated, "saturated_share": share, "clipped_low": self.clipped_low,
                "used_share": float(np.nanmean(used)) if np.isfinite(used).any() else 0.0}

    def representable(self) -> List[float]:
        spec = self.spec
        lo = spec.scale * (spec.qmin - spec.zero_point)
        hi = spec.scale * (spec.qmax - spec.zero_point)
        return [float(lo.min()), float(hi.max())]
