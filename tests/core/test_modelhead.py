"""core/modelhead: the header and graph inputs/outputs read from the wire equal what `load_model`
gives, including the cases onnxruntime's own view gets wrong (a shapeless input is not a scalar,
an undeclared output type stays undeclared); anything it cannot read exactly gives None."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.modelhead import read_model_head
from inspector_cli.core.types import TensorInfo

from ..fixtures.helpers import affine_model, init, make_model, save, vi


def _facts(path: Path) -> tuple:
    graph = load_model(path)
    m = graph.model
    return (m.ir_version, m.producer_name, m.producer_version, graph.opset, m.graph.name,
            tuple(graph.inputs), tuple(graph.outputs))


def _head(path: Path) -> tuple:
    h = read_model_head(path)
    assert h is not None
    return (h.ir_version, h.producer_name, h.producer_version, h.opset, h.graph_name, h.inputs, h.outputs)


def _odd_io_model() -> onnx.ModelProto:
    shapeless = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    scalar = helper.make_tensor_value_info("s", TensorProto.FLOAT, [])
    odd = onnx.ValueInfoProto(name="z")
    odd.type.tensor_type.elem_type = TensorProto.FLOAT16
    odd.type.tensor_type.shape.dim.add()  # neither value nor name
    odd.type.tensor_type.shape.dim.add().dim_param = "N"
    odd.type.tensor_type.shape.dim.add().dim_value = 0
    odd.type.tensor_type.shape.dim.add().dim_param = ""
    odd.type.tensor_type.shape.dim.add().dim_value = -3
    untyped = onnx.ValueInfoProto(name="u")
    seq = onnx.ValueInfoProto(name="q")
    seq.type.sequence_type.elem_type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = [helper.make_node("Identity", ["x"], ["u"], name="a"), helper.make_node("Identity", ["z"], ["zo"], name="b"),
             helper.make_node("SequenceConstruct", ["x"], ["q"], name="c"),
             helper.make_node("Identity", ["w"], ["wo"], name="d")]
    model = make_model(nodes, [shapeless, scalar, odd, vi("w", [2])],
                       [untyped, helper.make_tensor_value_info("zo", TensorProto.INT8, [1, "B"]), seq,
                        helper.make_tensor_value_info("wo", TensorProto.FLOAT, [2])],
                       [init("w", np.ones(2, np.float32))], name="odd graph")
    model.producer_name, model.producer_version = "tester", "1.2"
    model.opset_import.insert(0, helper.make_opsetid("com.microsoft", 1))  # not the default domain
    return model


def test_odd_inputs_and_outputs_read_as_load_model_reads_them(tmp_path: Path) -> None:
    path = save(_odd_io_model(), tmp_path / "odd.onnx")
    assert _head(path) == _facts(path)
    head = read_model_head(path)
    assert head is not None
    # hand-checked values: the initializer 'w' listed as an input is not an input
    assert [t.name for t in head.inputs] == ["x", "s", "z"]
    assert head.inputs[0] == TensorInfo("x", TensorProto.FLOAT, None)
    assert head.inputs[1] == TensorInfo("s", TensorProto.FLOAT, ())
    assert head.inputs[2] == TensorInfo("z", TensorProto.FLOAT16, (None, "N", 0, None, -3))
    assert head.outputs[0] == TensorInfo("u") and head.outputs[2] == TensorInfo("q", kind="sequence")
    assert (head.opset, head.graph_name, head.producer_name, head.ir_version) == (17, "odd graph", "tester", 8)


def test_ai_onnx_domain_and_plain_model(tmp_path: Path) -> None:
    model = affine_model(2.0, 1.0)
    model.opset_import[0].domain = "ai.onnx"
    path = save(model, tmp_path / "a.onnx")
    assert _head(path) == _facts(path)
    assert _head(path)[3] == 17


def _field(number: int, payload: bytes) -> bytes:
    from inspector_cli.core.lazyload import _encode_varint

    return _encode_varint((number << 3) | 2) + _encode_varint(len(payload)) + payload


@pytest.mark.parametrize("case", ["empty", "garbage", "no-opset", "graph-twice", "group", "non-utf8-input",
                                  "truncated"])
def test_what_it_cannot_read_exactly_gives_none(tmp_path: Path, case: str) -> None:
    good = affine_model(2.0, 1.0).SerializeToString()
    data = {
        "empty": b"",
        "garbage": b"\xff\xff\xff\xff",
        "no-opset": _strip_opsets(good),
        "graph-twice": good + _field(7, affine_model().graph.SerializeToString()),
        "group": good + b"\x5b\x5c",  # field 11 as a start-group / end-group pair
        "non-utf8-input": good.replace(b"\x0a\x01x", b"\x0a\x01\x80"),
        "truncated": good[:-3],
    }[case]
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    assert read_model_head(path) is None


def _strip_opsets(data: bytes) -> bytes:
    model = onnx.ModelProto.FromString(data)
    del model.opset_import[:]
    return model.SerializeToString()


def test_a_missing_file_gives_none(tmp_path: Path) -> None:
    assert read_model_head(tmp_path / "nope.onnx") is None



def _unpacked_tensor(names: "list[str]", values: int) -> bytes:
    """A TensorProto written by hand with `values` floats unpacked (one field each, as some writers
    do; onnx packs them) and its name field(s) after the data."""
    import struct

    from inspector_cli.core.lazyload import _encode_varint

    data = _encode_varint(1 << 3) + _encode_varint(values)  # dims: [values]
    data += _encode_varint(2 << 3) + _encode_varint(TensorProto.FLOAT)
    data += b"".join(_encode_varint((4 << 3) | 5) + struct.pack("<f", float(i)) for i in range(values))
    return data + b"".join(_field(8, name.encode()) for name in names)


def test_initializers_with_unpacked_weights_are_read_by_name(tmp_path: Path) -> None:
    """An initializer of more fields than the walk's limit is searched first, then read exactly: an
    input named like it is not an input, whatever the order or repetition of its name fields."""
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add"), helper.make_node("Add", ["y", "v"], ["z"], name="b")]
    model = make_model(nodes, [vi("x", [100]), vi("w", [100]), vi("v", [100])], [vi("z", [100])], [])
    graph = model.graph.SerializeToString()
    graph += _field(5, _unpacked_tensor(["w"], 100))  # name after 100 data fields
    graph += _field(5, _unpacked_tensor(["zz", "v"], 100))  # named twice: the last name wins
    graph += _field(5, _unpacked_tensor(["big"], 200))  # not an input
    model.ClearField("graph")
    path = tmp_path / "unpacked.onnx"
    path.write_bytes(model.SerializeToString() + _field(7, graph))
    head = read_model_head(path)
    assert head is not None
    assert [t.name for t in head.inputs] == ["x"]
    assert _head(path) == _facts(path)
