"""Small model pairs built for the layer-pairing tests: each exercises one pairing method."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .helpers import init, make_model, save, vi

F, H = TensorProto.FLOAT, TensorProto.FLOAT16


def _w(shape, seed: int, dtype=np.float32) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.random.default_rng(seed).normal(0, 0.5, size=shape).astype(dtype)


def conv_relu_conv(fused: bool = False) -> onnx.ModelProto:
    """x -> Conv -> Relu -> Conv -> y; `fused` runs the first Conv+Relu as onnxruntime's FusedConv."""
    w1, w2 = _w((4, 3, 3, 3), 1), _w((2, 4, 1, 1), 2)
    first = (helper.make_node("FusedConv", ["x", "w1"], ["r"], name="conv1", domain="com.microsoft",
                              activation="Relu", pads=[1, 1, 1, 1]) if fused else None)
    nodes = [first] if fused else [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
                                   helper.make_node("Relu", ["c"], ["r"], name="relu1")]
    nodes.append(helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2"))
    model = make_model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 2, 8, 8])], [init("w1", w1), init("w2", w2)])
    if fused:
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def fp16_with_casts() -> Tuple[onnx.ModelProto, onnx.ModelProto]:
    """fp32 x -> Conv -> Relu -> Conv -> y, and its fp16 version with keep_io_types Casts.

    Like onnxconverter_common's output: inner names kept, the last op renamed and a Cast to fp32
    producing the output name; an Identity re-names the Relu output ('r' holds the fp16 Relu).
    """
    w1, w2 = _w((4, 3, 3, 3), 3), _w((2, 4, 1, 1), 4)
    a_nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c"], ["r"], name="relu1"),
               helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2")]
    a = make_model(a_nodes, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 2, 8, 8])], [init("w1", w1), init("w2", w2)])
    b_nodes = [helper.make_node("Cast", ["x"], ["x16"], name="in_cast", to=H),
               helper.make_node("Conv", ["x16", "w1"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c"], ["relu_raw"], name="relu1"),
               helper.make_node("Identity", ["relu_raw"], ["r"], name="ident"),
               helper.make_node("Conv", ["r", "w2"], ["y_fp16"], name="conv2"),
               helper.make_node("Cast", ["y_fp16"], ["y"], name="out_cast", to=F)]
    b = make_model(b_nodes, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 2, 8, 8])],
                   [init("w1", w1.astype(np.float16)), init("w2", w2.astype(np.float16))])
    return a, b


def renamed(model: onnx.ModelProto, prefix: str = "t") -> Tuple[onnx.ModelProto, Dict[str, str]]:
    """A copy with every node and every inner tensor renamed (inputs/outputs keep their names), as a
    re-export or another quantisation tool would name them. Returns the copy and old -> new names."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    keep = {i.name for i in copy.graph.input} | {o.name for o in copy.graph.output}
    names: Dict[str, str] = {}

    def new(name: str) -> str:
        if not name or name in keep:
            return name
        return names.setdefault(name, f"{prefix}{len(names)}")

    for index, node in enumerate(copy.graph.node):
        node.name = f"node_{(index * 7919) % 997}"
        for i, name in enumerate(node.input):
            node.input[i] = new(name)
        for i, name in enumerate(node.output):
            node.output[i] = new(name)
    for tensor in copy.graph.initializer:
        tensor.name = new(tensor.name)
    del copy.graph.value_info[:]
    return copy, names


def twin_branches() -> Tuple[onnx.ModelProto, onnx.ModelProto]:
    """x -> Relu -> a, x -> Relu -> b, Concat: two identical siblings that only names tell apart."""
    nodes = [helper.make_node("Relu", ["x"], ["left"], name="relu_left"),
             helper.make_node("Relu", ["x"], ["right"], name="relu_right"),
             helper.make_node("Concat", ["left", "right"], ["y"], name="cat", axis=1)]
    a = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 8])])
    return a, renamed(a)[0]


def softmax_swapped() -> Tuple[onnx.ModelProto, onnx.ModelProto]:
    """Same Conv+Relu, but the head is Softmax in A and LogSoftmax in B (same output name)."""
    w = _w((4, 3, 1, 1), 5)

    def build(head: str) -> onnx.ModelProto:
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                 helper.make_node("Relu", ["c"], ["r"], name="relu"),
                 helper.make_node("Flatten", ["r"], ["f"], name="flat"),
                 helper.make_node(head, ["f"], ["y"], name="head", axis=1)]
        return make_model(nodes, [vi("x", [1, 3, 2, 2])], [vi("y", [1, 16])], [init("w", w)])

    return build("Softmax"), build("LogSoftmax")


def perturbed(model: onnx.ModelProto, weight: str, scale: float = 0.5, seed: int = 9) -> onnx.ModelProto:
    """A copy whose initializer `weight` got Gaussian noise of `scale` times its standard deviation."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for index, tensor in enumerate(copy.graph.initializer):
        if tensor.name == weight:
            value = numpy_helper.to_array(tensor)
            noise = np.random.default_rng(seed).normal(0, scale * value.std(), size=value.shape)
            copy.graph.initializer[index].CopyFrom(numpy_helper.from_array((value + noise).astype(value.dtype), weight))
            return copy
    raise KeyError(weight)


def save_pair(folder: Path, a: onnx.ModelProto, b: onnx.ModelProto) -> Tuple[Path, Path]:
    return save(a, folder / "a.onnx"), save(b, folder / "b.onnx")
