"""One small model per validate rule, built to trigger it: (builder, config, expected node, message facts).

A builder gets a temporary folder and returns the path of the model to validate. `test_validate_rules`
runs every case and checks that the catalogue and this table name the same rules.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from .helpers import init, make_model, save, vi

F, I8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.INT64


@dataclass
class Case:
    build: Callable[[Path], Path]
    facts: Sequence[str]
    node: Optional[str] = None
    tensor: Optional[str] = None
    config: Dict[str, Any] = field(default_factory=dict)
    patch: Dict[str, Any] = field(default_factory=dict)
    """'module.ATTRIBUTE' -> value, set with monkeypatch for the run (e.g. a smaller 2 GB limit)."""


def node(op: str, inputs: Sequence[str], outputs: Sequence[str], name: str, **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def relu_model(**kwargs: Any) -> onnx.ModelProto:
    return make_model([node("Relu", ["x"], ["y"], "relu")], [vi("x", [1, 4])], [vi("y", [1, 4])], **kwargs)


def saved(model: onnx.ModelProto, name: str = "m.onnx") -> Callable[[Path], Path]:
    return lambda tmp: save(model, tmp / name)


def raw(data: bytes) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        path = tmp / "m.onnx"
        path.write_bytes(data)
        return path
    return build


def truncated(tmp: Path) -> Path:
    path = save(relu_model(initializers=[init("w", np.ones((64, 64), np.float32))]), tmp / "full.onnx")
    data = path.read_bytes()
    out = tmp / "m.onnx"
    out.write_bytes(data[: len(data) * 6 // 10])
    return out


def with_ir(ir: int, opset: int = 17) -> onnx.ModelProto:
    model = relu_model(opset=opset)
    model.ir_version = ir
    return model


def no_opset(tmp: Path) -> Path:
    model = relu_model()
    del model.opset_import[:]
    path = tmp / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def external(location: str, create: bool) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        model = make_model([node("Add", ["x", "w"], ["y"], "add")], [vi("x", [4, 4])], [vi("y", [4, 4])],
                           [init("w", np.ones((4, 4), np.float32))])
        tensor = model.graph.initializer[0]
        tensor.ClearField("raw_data")
        tensor.ClearField("float_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", "64")):
            tensor.external_data.add(key=key, value=value)
        if create:
            (tmp / location).parent.mkdir(parents=True, exist_ok=True)
            (tmp / location).write_bytes(np.ones(16, np.float32).tobytes())
        sub = tmp / "model"
        sub.mkdir(exist_ok=True)
        path = sub / "m.onnx"
        path.write_bytes(model.SerializeToString())
        return path
    return build


def custom_op_model(typed_output: bool = True) -> onnx.ModelProto:
    out = vi("y", [1, 4] if typed_output else [1, None])
    model = make_model([node("Foo", ["x"], ["y"], "foo", domain="com.example")], [vi("x", [1, 4])], [out])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    return model


def qdq_weight(scale: Any, zp: Any = None, axis: Optional[int] = None, w: Any = None,
               zp_type: Any = np.int8) -> onnx.ModelProto:
    """x [2, 4] @ DequantizeLinear(w_q [4, 3]) with the given scale/zero point."""
    w_q = np.asarray(w if w is not None else np.arange(12).reshape(4, 3) - 6, np.int8)
    inputs = ["w_q", "w_scale"] + (["w_zp"] if zp is not None else [])
    inits = [init("w_q", w_q), init("w_scale", np.asarray(scale, np.float32))]
    if zp is not None:
        inits.append(init("w_zp", np.asarray(zp, zp_type)))
    attrs = {"axis": axis} if axis is not None else {}
    nodes = [node("DequantizeLinear", inputs, ["w"], "w_dq", **attrs), node("MatMul", ["x", "w"], ["y"], "mm")]
    return make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 3])], inits, opset=17)


def input_q(scale: float, zp: int, zp_type: Any = np.int8) -> onnx.ModelProto:
    nodes = [node("QuantizeLinear", ["input", "s", "z"], ["q"], "input_q"),
             node("DequantizeLinear", ["q", "s", "z"], ["dq"], "input_dq"),
             node("Relu", ["dq"], ["y"], "relu")]
    return make_model(nodes, [vi("input", [1, 3])], [vi("y", [1, 3])],
                      [init("s", np.array(scale, np.float32)), init("z", np.array(zp, zp_type))])


def qdq_pair(scale_q: float, scale_dq: float) -> onnx.ModelProto:
    nodes = [node("QuantizeLinear", ["x", "s1", "z"], ["q"], "q"), node("DequantizeLinear", ["q", "s2", "z"], ["y"], "dq")]
    return make_model(nodes, [vi("x", [1, 3])], [vi("y", [1, 3])],
                      [init("s1", np.array(scale_q, np.float32)), init("s2", np.array(scale_dq, np.float32)),
                       init("z", np.array(0, np.int8))])


def float_matmul(w: Any = None) -> onnx.ModelProto:
    """The float model `qdq_weight` quantises: x [2, 4] @ w [4, 3], w = (arange(12) - 6) / 2 by default."""
    weights = np.asarray(w if w is not None else (np.arange(12).reshape(4, 3) - 6) * 0.5, np.float32)
    return make_model([node("MatMul", ["x", "w"], ["y"], "mm")], [vi("x", [2, 4])], [vi("y", [2, 3])],
                      [init("w", weights)])


def against(model: onnx.ModelProto, reference: onnx.ModelProto) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        save(reference, tmp / "ref.onnx")
        return save(model, tmp / "m.onnx")
    return build


def chain(ops: List[str], name: str = "g") -> onnx.ModelProto:
    nodes, current = [], "x"
    for i, op in enumerate(ops):
        nodes.append(node(op, [current], [f"t{i}"], f"{op.lower()}_{i}", **({"axis": -1} if op == "Softmax" else {})))
        current = f"t{i}"
    nodes.append(node("Identity", [current], ["y"], "out"))
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], name=name)
