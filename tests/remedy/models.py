"""Models for the remedy tests, built in code: a small CNN, its QDQ quantisation with two broken
quantisers, an fp16 model that overflows on some samples, and a model one fusion changes."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHANNELS = 8
CLASSES = 10
SIDE = 8


def _conv(name: str, x: str, w: np.ndarray, b: np.ndarray, inits: List[onnx.TensorProto]) -> onnx.NodeProto:
    inits += [numpy_helper.from_array(w.astype(np.float32), f"{name}.weight"),
              numpy_helper.from_array(b.astype(np.float32), f"{name}.bias")]
    return helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [f"{name}_out"], name=name,
                            pads=[1, 1, 1, 1], kernel_shape=[3, 3])


def cnn_fp32(outlier_node: str = "conv3") -> onnx.ModelProto:
    """x[1,3,8,8] -> conv1..conv4 (+Relu) -> Flatten -> Gemm -> logits[1,10].

    `outlier_node`'s weight has an outlier output channel 0 (a per-tensor quantiser then rounds the
    other channels to a step or two); it reads an input channel that is always zero, so the float
    function and the activation ranges are those of a normal network.
    """
    rng = np.random.default_rng(7)
    inits: List[onnx.TensorProto] = []
    nodes: List[onnx.NodeProto] = []
    params = []
    for i, cin in enumerate((3, CHANNELS, CHANNELS, CHANNELS), start=1):
        w = rng.normal(0, np.sqrt(2.0 / (cin * 9)), size=(CHANNELS, cin, 3, 3))  # He: activations keep their scale
        params.append([f"conv{i}", w, rng.normal(0, 0.01, size=CHANNELS)])
    for i, (name, w, _) in enumerate(params):
        if name == outlier_node and i > 0:
            # output channel 0 reads only input channel 0 through large weights (the per-tensor scale
            # grows ~100x); the previous layer keeps that input channel at zero (bias -20 before its
            # Relu), so the float function and every activation range stay those of a normal layer
            w[0] = 0.0
            w[0, 0] = 20.0
            params[i - 1][2][0] = -20.0
    x = "x"
    for i, (name, w, b) in enumerate(params, start=1):
        nodes.append(_conv(name, x, w, b, inits))
        nodes.append(helper.make_node("Relu", [f"{name}_out"], [f"relu{i}_out"], name=f"relu{i}"))
        x = f"relu{i}_out"
    # no global pooling: the logits then depend on where features are, so quantisation errors show
    nodes.append(helper.make_node("Flatten", [x], ["flat_out"], name="flatten"))
    features = CHANNELS * SIDE * SIDE
    fc_w = rng.normal(0, 1.0 / np.sqrt(features), size=(CLASSES, features)).astype(np.float32)
    inits += [numpy_helper.from_array(fc_w, "fc.weight"),
              numpy_helper.from_array(rng.normal(0, 0.01, CLASSES).astype(np.float32), "fc.bias")]
    nodes.append(helper.make_node("Gemm", ["flat_out", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, SIDE, SIDE])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def image_samples(count: int, seed: int) -> List[Dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(0, 1, size=(1, 3, SIDE, SIDE)).astype(np.float32)} for _ in range(count)]


def quantize_qdq(fp32_path: Path, out_path: Path, samples: List[Dict[str, np.ndarray]],
                 nodes_to_exclude: Tuple[str, ...] = (), per_channel: bool = False) -> Path:
    """onnxruntime's quantize_static, QDQ format, int8 weights and uint8 activations."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self):  # noqa: ANN201 - onnxruntime's interface
            return next(self.items, None)

    quantize_static(str(fp32_path), str(out_path), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=per_channel,
                    nodes_to_exclude=list(nodes_to_exclude))
    return out_path


def break_input_scale(model: onnx.ModelProto, tensor: str = "x", factor: float = 1 / 25) -> onnx.ModelProto:
    """The quantiser of `tensor` with its scale multiplied by `factor` (saturates when < 1)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor)
    init = next(t for t in model.graph.initializer if t.name == q.input[1])
    init.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(init) * factor).astype(np.float32), init.name))
    return model
