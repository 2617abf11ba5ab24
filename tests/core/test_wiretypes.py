"""core/wiretypes.py: value-info types read from a serialised model equal protobuf's reading of it,
and every shape of bytes protobuf would read differently (merged fields) is declined (None)."""
from __future__ import annotations

from typing import Dict

import onnx
from onnx import TensorProto, helper

from inspector_cli.core.protoutil import _read_type, _type_table
from inspector_cli.core.wiretypes import read_value_types
from inspector_cli.testing.transformer import build_transformer


def _by_protobuf(data: bytes) -> Dict[str, tuple]:
    graph = onnx.load_from_string(data).graph
    table: Dict[str, tuple] = {}
    for items in (graph.value_info, graph.input, graph.output):
        _type_table(items, table)
    return table


def _model(value_info: list) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["h"], name="r1"),
                               helper.make_node("Relu", ["h"], ["y"], name="r2")], "g", [x], [y], value_info=value_info)
    return helper.make_model(graph)


def test_an_inferred_encoder_reads_as_protobuf_reads_it() -> None:
    model = build_transformer(layers=2, hidden=16, heads=2, ffn=32, vocab=64)
    data = onnx.shape_inference.infer_shapes(model, data_prop=True).SerializeToString()
    table = read_value_types(data, _read_type)
    assert table is not None and list(table.items()) == list(_by_protobuf(data).items())
    assert table["input_ids"] == (TensorProto.INT64, ("batch", "seq"))
    assert len(table) == len(onnx.load_from_string(data).graph.value_info) + 2


def test_untyped_entries_unknown_dims_and_a_sequence_read_as_protobuf_reads_them() -> None:
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    unknown = helper.make_tensor_value_info("h", TensorProto.FLOAT, None)
    unknown.type.tensor_type.shape.dim.add()  # a dimension with neither value nor name
    model = _model([unknown, seq, helper.make_empty_tensor_value_info("y")])
    model.graph.value_info[0].doc_string = "after the type: skipped"
    data = model.SerializeToString()
    table = read_value_types(data, _read_type)
    assert table == {"h": (TensorProto.FLOAT, (None,)), "s": (0, None), "y": (TensorProto.FLOAT, None),
                     "x": (TensorProto.FLOAT, (1, "n"))}
    assert list(table.items()) == list(_by_protobuf(data).items())  # the untyped 'y' did not replace the typed one


def _field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _model_bytes(value_info: bytes) -> bytes:
    return _field(7, _field(13, value_info))  # ModelProto.graph.value_info


def test_unusual_bytes_read_as_protobuf_reads_them_or_are_declined() -> None:
    typed = helper.make_tensor_type_proto(TensorProto.FLOAT, [1, "n"]).SerializeToString()
    good = _model_bytes(_field(1, b"h") + _field(2, typed))
    assert read_value_types(good, _read_type) == _by_protobuf(good) == {"h": (TensorProto.FLOAT, (1, "n"))}
    as_protobuf = {
        "name twice (the last is kept)": _model_bytes(_field(1, b"h") + _field(1, b"g") + _field(2, typed)),
        "the name after a doc_string": _model_bytes(_field(3, b"doc") + _field(1, b"h") + _field(2, typed)),
        "the graph twice (merged)": good + _model_bytes(_field(1, b"k") + _field(2, typed)),
    }
    for case, data in as_protobuf.items():
        assert read_value_types(data, _read_type) == _by_protobuf(data), case
    assert list(read_value_types(as_protobuf["the graph twice (merged)"], _read_type) or {}) == ["h", "k"]
    declined = {"a name not UTF-8": _model_bytes(_field(1, b"\xff") + _field(2, typed)), "truncated": good[:-1]}
    assert {case: read_value_types(data, _read_type) for case, data in declined.items()} == dict.fromkeys(declined)


def test_the_public_inference_gives_the_same_types(monkeypatch) -> None:
    """Without onnx's private binding (another onnx release), the public call gives the same table."""
    from inspector_cli.core import protoutil
    from inspector_cli.testing.models import build_cnn

    model = build_cnn()
    del model.graph.value_info[:]
    private = protoutil.light_value_types(model)
    monkeypatch.setattr(protoutil, "_infer_shapes_bytes", None)
    public = protoutil.light_value_types(model)
    assert public == private and len(private) > len(model.graph.input) + len(model.graph.output)
