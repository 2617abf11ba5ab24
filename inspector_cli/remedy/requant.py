"""Re-quantising one activation quantiser (a Q -> DQ pair) of a QDQ model: at 16 bits, or on another range.

onnxruntime's quantiser writes a tensor at 16 bits when `extra_options={"TensorQuantOverrides": {tensor:
[{"quant_type": QuantType.QUInt16}]}}` asks for it: the same calibrated range, 65535 steps instead of 255, in
a standard QuantizeLinear/DequantizeLinear from opset 21 (the quantiser converts an older model to opset 21) or
in the com.microsoft ones (`UseQDQContribOps`). A pair is patched here the same way without the
calibration data: the range is the one the 8-bit parameters hold ((qmin - zero point) x scale to (qmax -
zero point) x scale: the calibrated range within half a step, since the quantiser rounds only the zero point),
and the model keeps its opset (older ones get the com.microsoft ops, which onnxruntime runs the same).
A range override (`{"rmin": ..., "rmax": ...}`, another calibration of the tensor) keeps the pair's type.

Parameters follow onnxruntime's `compute_scale_zp`: the range widened to include 0, symmetric pairs
(signed with zero point 0) over [-max|r|, max|r|] in [-(2^(b-1) - 1), 2^(b-1) - 1].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .qdq_patch import (WEIGHT_AXIS, GraphIndex, _copy, _prune_and_sort, axis_shape, dequantize_initializer,
                        fp32_weight, int_attribute, weight_input)

SIXTEEN_BIT = {np.dtype(np.uint8): np.dtype(np.uint16), np.dtype(np.int8): np.dtype(np.int16)}
"""The 16-bit type an 8-bit pair becomes (unsigned stays unsigned: the quantiser's QUInt16 / QInt16)."""
QUANT_TYPE_NAMES = {np.dtype(np.uint8): "QUInt8", np.dtype(np.int8): "QInt8", np.dtype(np.uint16): "QUInt16",
                    np.dtype(np.int16): "QInt16"}
"""numpy dtype -> onnxruntime.quantization.QuantType member name (what a TensorQuantOverrides entry holds)."""
MS_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class PairParams:
    """One quantiser's parameters: scale, zero point, integer type, symmetric or not."""

    scale: float
    zero_point: int
    dtype: np.dtype
    symmetric: bool

    def bounds(self) -> Tuple[int, int]:
        return quant_bounds(self.dtype, self.symmetric)

    def range(self) -> Tuple[float, float]:
        """The real range the parameters represent."""
        low, high = self.bounds()
        return (low - self.zero_point) * self.scale, (high - self.zero_point) * self.scale


def quant_bounds(dtype: np.dtype, symmetric: bool) -> Tuple[int, int]:
    """onnxruntime's (qmin, qmax) for a type: a symmetric signed type drops its lowest value."""
    info = np.iinfo(dtype)
    if symmetric and info.min < 0:
        return int(info.min) + 1, int(info.max)
    return int(info.min), int(info.max)


def params_for_range(rmin: float, rmax: float, dtype: np.dtype, symmetric: bool) -> PairParams:
    """onnxruntime's compute_scale_zp for a range (0 always representable)."""
    rmin, rmax = min(float(rmin), 0.0), max(float(rmax), 0.0)
    qmin, qmax = quant_bounds(dtype, symmetric)
    if symmetric:
        absmax = max(abs(rmin), abs(rmax))
        rmin, rmax = -absmax, absmax
    scale = (rmax - rmin) / float(qmax - qmin)
    if scale <= 0.0 or not np.isfinite(scale):
        return PairParams(1.0, 0, dtype, symmetric)
    zero = 0 if symmetric else int(np.clip(round(qmin - rmin / scale), qmin, qmax))
    if symmetric and np.iinfo(dtype).min == 0:  # symmetric unsigned: the middle of the range
        zero = (qmin + qmax + 1) // 2
    return PairParams(float(np.float32(scale)), zero, dtype, symmetric)


class PairEditor:
    """Re-quantises pairs of one model in place (the caller owns the copy and its `GraphIndex`)."""

    def __init__(self, model: onnx.ModelProto, index: GraphIndex) -> None:
        self.model, self.index = model, index
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        self.params: Dict[str, PairParams] = {}
        """pair -> the parameters written for it."""
        self._declared: Optional[Dict[str, List[onnx.ValueInfoProto]]] = None

    def current(self, pair: str) -> Optional[PairParams]:
        """The parameters of the pair whose QuantizeLinear writes `pair` (None: not an activation pair)."""
        q = self.index.producer.get(pair)
        if q is None or q.op_type != "QuantizeLinear" or len(q.input) < 2:
            return None
        scale = self.index.array(q.input[1])
        zero = self.index.array(q.input[2]) if len(q.input) > 2 and q.input[2] else None
        if scale is None or scale.size != 1:
            return None
        dtype = np.dtype(np.uint8) if zero is None else zero.dtype
        if dtype not in QUANT_TYPE_NAMES:
            return None
        zp = 0 if zero is None else int(zero.reshape(()))
        symmetric = np.iinfo(dtype).min < 0 and zp == 0
        return PairParams(float(scale.reshape(())), zp, dtype, symmetric)

    def to_16bit(self, pair: str, span: Optional[Tuple[float, float]] = None) -> Optional[PairParams]:
        """The pair at 16 bits over `span` (its tensor's calibrated range) or else the range its 8-bit parameters
        hold; None when it is not an 8-bit pair."""
        now = self.current(pair)
        if now is None or now.dtype not in SIXTEEN_BIT:
            return None
        rmin, rmax = span if span is not None else now.range()
        wide = params_for_range(rmin, rmax, SIXTEEN_BIT[now.dtype], now.symmetric)
        self._write(pair, wide)
        return wide

    def to_range(self, pair: str, rmin: float, rmax: float) -> Optional[PairParams]:
        """The pair, same type, over [rmin, rmax] (another calibration of its tensor)."""
        now = self.current(pair)
        if now is None:
            return None
        params = params_for_range(rmin, rmax, now.dtype, now.symmetric)
        self._write(pair, params)
        return params

    def _write(self, pair: str, params: PairParams) -> None:
        """New scale and zero-point initializers for the pair's QuantizeLinear and every DequantizeLinear
        after it (parameters may be shared by name with other pairs: never edited in place)."""
        q = self.index.producer[pair]
        scale_name, zero_name = f"{pair}__scale", f"{pair}__zero_point"
        scale = numpy_helper.from_array(np.array(params.scale, np.float32), scale_name)
        zero = numpy_helper.from_array(np.array(params.zero_point, params.dtype), zero_name)
        for tensor in (scale, zero):
            if tensor.name in self.index.inits:
                self.index.inits[tensor.name].CopyFrom(tensor)
            else:
                self.model.graph.initializer.append(tensor)
                self.index.inits[tensor.name] = self.model.graph.initializer[-1]
        self._retype(pair, params.dtype)
        wide = params.dtype.itemsize > 1
        for node in [q] + [d for d in self.index.consumers.get(pair, []) if d.op_type == "DequantizeLinear"]:
            del node.input[1:]
            node.input.extend([scale_name, zero_name])
            if wide and self.opset < 21:  # standard Q/DQ take 16-bit types from opset 21
                node.domain = MS_DOMAIN
        if wide and self.opset < 21 and not any(o.domain == MS_DOMAIN for o in self.model.opset_import):
            self.model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
        self.params[pair] = params

    def _retype(self, tensor: str, dtype: np.dtype) -> None:
        """The declared element type of the pair's integer tensor follows its new zero point: producers such as
        NNCF write value_info for every Q output, and onnxruntime refuses a uint16 QuantizeLinear output
        still declared int8 (every a16 variant of NNCF's MobileNetV2 failed to load)."""
        if self._declared is None:
            self._declared = {}
            for info in [*self.model.graph.value_info, *self.model.graph.output]:
                self._declared.setdefault(info.name, []).append(info)
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        for info in self._declared.get(tensor, []):
            if info.type.HasField("tensor_type"):
                info.type.tensor_type.elem_type = elem


# Per-channel weights (the `per-channel` remedy and compare's per-channel advice)

def per_channel_int8(weight: np.ndarray, axis: int) -> Tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per-channel quantisation (range [-127, 127], zero point 0): (integers, scales)."""
    moved = np.moveaxis(weight.astype(np.float64), axis, 0).reshape(weight.shape[axis], -1)
    scales = np.abs(moved).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    shape = axis_shape(weight, scales, axis)
    q = np.clip(np.round(weight / scales.reshape(shape)), -127, 127).astype(np.int8)
    return q, scales.astype(np.float32)


def requantize_per_channel(qdq: onnx.ModelProto, node_name: str, fp32: Optional[onnx.ModelProto] = None
                           ) -> onnx.ModelProto:
    """A copy of `qdq` with `node_name`'s weight re-quantised per output channel (symmetric int8) from
    the fp32 weight (or the dequantised one); its int32 bias is re-quantised to match."""
    model = _copy(qdq)
    index = GraphIndex(model.graph)
    requantize_weight_inplace(model, index, node_name, fp32)
    _prune_and_sort(model.graph)
    return model


def requantize_weight_inplace(model: onnx.ModelProto, index: GraphIndex, node_name: str,
                              fp32: Optional[onnx.ModelProto] = None, fp32_name: Optional[str] = None) -> int:
    """`requantize_per_channel` on `model` itself (its `index` kept for further patches; the caller prunes
    and sorts): the node reads a new per-channel DequantizeLinear. Returns the number of channels."""
    node = index.by_name.get(node_name)
    if node is None:
        raise KeyError(f"node '{node_name}' is not in the QDQ model")
    found = weight_input(index, node)
    if found is None:
        raise ValueError(f"node '{node_name}' has no quantised weight")
    position, dq = found
    current = dequantize_initializer(index, dq)
    weight = fp32_weight(fp32, fp32_name or node_name, position, current.shape)
    weight = current if weight is None else weight
    axis = weight_axis(node)
    q, scales = per_channel_int8(weight, axis)
    base = f"{node_name}__pc"
    model.graph.initializer.extend([numpy_helper.from_array(q, f"{base}_w"),
                                    numpy_helper.from_array(scales, f"{base}_w_scale"),
                                    numpy_helper.from_array(np.zeros(scales.size, np.int8), f"{base}_w_zero")])
    for name in (f"{base}_w", f"{base}_w_scale", f"{base}_w_zero"):
        index.inits[name] = next(t for t in reversed(model.graph.initializer) if t.name == name)
    dq_node = helper.make_node("DequantizeLinear", [f"{base}_w", f"{base}_w_scale", f"{base}_w_zero"],
                               [f"{base}_w_float"], name=f"{base}_w_DequantizeLinear", axis=axis)
    model.graph.node.append(dq_node)
    index.producer[f"{base}_w_float"] = dq_node
    node.input[position] = f"{base}_w_float"
    _requantize_bias(model, index, node, scales, base, fp32, fp32_name)
    return int(scales.size)


def requantize_bias_inplace(model: onnx.ModelProto, index: GraphIndex, node_name: str,
                            fp32: Optional[onnx.ModelProto] = None, fp32_name: Optional[str] = None) -> bool:
    """`node_name`'s int32 bias re-quantised with the scales its input and weight have now, as quantize_static
    quantises a bias from the scales it chose: after the input pair went to 16 bits or another range, the old
    bias steps (8-bit input scale x weight scale) are what the integer kernel would add (the zoo's MobileNetV2:
    biases 1.7e-4 off, the plan's cosine 1.6e-3 above quantize_static's rebuild). False when it has none."""
    node = index.by_name.get(node_name)
    found = weight_input(index, node) if node is not None else None
    w_scales = index.array(found[1].input[1]) if found is not None else None
    if node is None or w_scales is None:
        return False
    return _requantize_bias(model, index, node, w_scales.reshape(-1), f"{node_name}__rb", fp32, fp32_name)


def weight_axis(node: onnx.NodeProto) -> int:
    """The output-channel axis of `node`'s weight (Gemm with transB=0 reads it along axis 1)."""
    axis = WEIGHT_AXIS.get(node.op_type, 0)
    if node.op_type == "Gemm" and int_attribute(node, "transB", 0) == 0:
        axis = 1
    return axis


def _requantize_bias(model: onnx.ModelProto, index: GraphIndex, node: onnx.NodeProto, w_scales: np.ndarray,
                     base: str, fp32: Optional[onnx.ModelProto], fp32_name: Optional[str] = None) -> bool:
    """Bias of Conv/Gemm as int32 with scale input_scale * weight_scale[c], as integer kernels expect."""
    if len(node.input) < 3 or not node.input[2]:
        return False
    bias_dq = index.producer.get(node.input[2])
    act_dq = index.producer.get(node.input[0])
    if bias_dq is None or bias_dq.op_type != "DequantizeLinear" or act_dq is None \
            or act_dq.op_type != "DequantizeLinear":
        return False
    act_scale = index.array(act_dq.input[1])
    if act_scale is None or act_scale.size != 1:
        return False
    current = dequantize_initializer(index, bias_dq)
    bias = fp32_weight(fp32, fp32_name or node.name, 2, current.shape)
    bias = current if bias is None else bias
    per_tensor = w_scales.size == 1  # one scale, no axis: DequantizeLinear takes `axis` from opset 13 only
    scales = (float(act_scale.reshape(())) * w_scales.astype(np.float64)).astype(np.float32)
    scales = scales.reshape(()) if per_tensor else scales
    q = np.round(bias / scales).astype(np.int32)
    model.graph.initializer.extend([numpy_helper.from_array(q, f"{base}_b"),
                                    numpy_helper.from_array(scales, f"{base}_b_scale"),
                                    numpy_helper.from_array(np.zeros(scales.shape, np.int32), f"{base}_b_zero")])
    for name in (f"{base}_b", f"{base}_b_scale", f"{base}_b_zero"):
        index.inits[name] = next(t for t in reversed(model.graph.initializer) if t.name == name)
    axis = {} if per_tensor else {"axis": 0}
    dq_node = helper.make_node("DequantizeLinear", [f"{base}_b", f"{base}_b_scale", f"{base}_b_zero"],
                               [f"{base}_b_float"], name=f"{base}_b_DequantizeLinear", **axis)
    model.graph.node.append(dq_node)
    index.producer[f"{base}_b_float"] = dq_node
    node.input[2] = f"{base}_b_float"
    return True
