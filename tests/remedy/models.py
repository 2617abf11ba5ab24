"""Models for the remedy tests, built in code: a small CNN, its QDQ quantisation with two broken
quantisers, an fp16 model that overflows on some samples, and a model one fusion changes."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# renamed(): one definition, in the benchmark's model script (scripts/ is not a package)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench_models import renamed  # noqa: E402,F401

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
                 nodes_to_exclude: Tuple[str, ...] = (), per_channel: bool = False,
                 extra_options: Optional[Dict[str, object]] = None) -> Path:
    """onnxruntime's quantize_static, QDQ format, int8 weights and uint8 activations (`extra_options`: its own,
    e.g. AddQDQPairToWeight, as NVIDIA ModelOpt passes it)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self):
            return next(self.items, None)

    quantize_static(str(fp32_path), str(out_path), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=per_channel,
                    nodes_to_exclude=list(nodes_to_exclude), extra_options=dict(extra_options or {}))
    return out_path


def break_input_scale(model: onnx.ModelProto, tensor: str = "x", factor: float = 1 / 25) -> onnx.ModelProto:
    """The quantiser of `tensor` with its scale multiplied by `factor` (saturates when < 1)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor)
    init = next(t for t in model.graph.initializer if t.name == q.input[1])
    init.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(init) * factor).astype(np.float32), init.name))
    return model


def overflow_fp32() -> onnx.ModelProto:
    """x[1,16] -> MatMul(w1, gain 3000) -> h -> Max(h, 0) -> Mul(0.001) -> MatMul(w2) -> y[1,4].

    h exceeds the fp16 range (65504) for inputs of large magnitude only; the Mul brings it back in
    range. onnxruntime's CPU provider computes fp16 MatMul and Mul in fp32 (it inserts Casts), but
    has a native fp16 Max: the overflow happens where h is cast to fp16 for the Max.
    """
    rng = np.random.default_rng(3)
    w1 = (rng.normal(0, 1.0 / 4.0, size=(16, 32)) * 3000.0).astype(np.float32)
    w2 = rng.normal(0, 0.3, size=(32, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Max", ["h", "zero"], ["r"], name="clamp"),
             helper.make_node("Mul", ["r", "k"], ["rs"], name="scale"),
             helper.make_node("MatMul", ["rs", "w2"], ["y"], name="mm2")]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(np.array(0.001, np.float32), "k"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    graph = helper.make_graph(nodes, "overflow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def overflow_samples() -> List[Dict[str, np.ndarray]]:
    """Six samples: three small (|h| ~ 3e3) and three large (|h| up to ~3e5, beyond fp16)."""
    rng = np.random.default_rng(4)
    return [{"x": (rng.normal(0, 1, size=(1, 16)) * (1.0 if i % 2 == 0 else 40.0)).astype(np.float32)}
            for i in range(6)]


def dq_float_conv() -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv with a *float* weight (an outlier channel) -> Q -> DQ -> y.

    onnxruntime's WeightBiasQuantization (level 1) quantises such a weight per tensor so that the
    Conv can run as an integer kernel: the one transformer that changes this model's outputs.
    """
    rng = np.random.default_rng(9)
    w = rng.normal(0, 0.2, size=(4, 2, 3, 3)).astype(np.float32)
    w[0] *= 40.0
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dequant"),
             helper.make_node("Conv", ["xd", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "so", "z"], ["cq"], name="quant_out"),
             helper.make_node("DequantizeLinear", ["cq", "so", "z"], ["y"], name="dequant_out")]
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "s"),
             numpy_helper.from_array(np.array(0.5, np.float32), "so"),
             numpy_helper.from_array(np.array(128, np.uint8), "z"), numpy_helper.from_array(w, "w")]
    graph = helper.make_graph(nodes, "dqconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
