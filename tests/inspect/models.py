"""Small models for the inspect tests, built with onnx.helper (and the package's testing builders)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def rename_like_paddle(model: onnx.ModelProto) -> onnx.ModelProto:
    """Node names without hierarchy, as paddle2onnx writes them: p2o.Conv.0, p2o.Relu.3, ..."""
    counters: dict = {}
    for node in model.graph.node:
        index = counters.get(node.op_type, 0)
        counters[node.op_type] = index + 1
        node.name = f"p2o.{node.op_type}.{index}"
    return model


def to_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every float32 initializer, input and output as float16 (a static copy; it is not run)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for init in out.graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    for vi in list(out.graph.input) + list(out.graph.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    del out.graph.value_info[:]
    return out


def replace_op(model: onnx.ModelProto, node_name: str, op_type: str) -> onnx.ModelProto:
    """A copy with one node's op replaced (attributes dropped), like a re-export that changed one op."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for node in out.graph.node:
        if node.name == node_name:
            node.op_type = op_type
            del node.attribute[:]
    return out


def hostile_model(path: Path) -> Path:
    """Two nodes whose names and scopes hold markup."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Relu", ["x"], ["<img src=x onerror=alert(1)>"],
                              name="/<script>alert(1)</script>/block/Relu"),
             helper.make_node("Sigmoid", ["<img src=x onerror=alert(1)>"], ["y"],
                              name="/b&amp;\"quote'/Sigmoid")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


def function_model(path: Path) -> Path:
    """A graph calling an ONNX local function `local.Block` twice (Mul then Relu inside)."""
    body = [helper.make_node("Mul", ["a", "a"], ["m"]), helper.make_node("Relu", ["m"], ["b"])]
    func = helper.make_function("local", "Block", ["a"], ["b"], body, [helper.make_opsetid("", 17)])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Block", ["x"], ["h"], name="enc/first", domain="local"),
             helper.make_node("Block", ["h"], ["g"], name="enc/second", domain="local"),
             helper.make_node("Neg", ["g"], ["y"], name="head/Neg")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), functions=[func],
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    onnx.save(model, path)
    return path
