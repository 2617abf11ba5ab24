"""Tie-breaks by constant operands between a float graph and its QDQ version: the candidate's
constants are stored as integers behind a DequantizeLinear and must be compared dequantised.
Read raw, the int8 bias [1, 2, 3, 4] (scale 0.5: the values 0.5..2) equalled the float bias
[1, 2, 3, 4] of another branch, and `mi compare` paired two different Adds (found by
scripts/mutation.sh pairing: flipping the dequantisation condition in score._constants survived)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from inspector_cli.compare.pairing.match import match_tensors
from inspector_cli.compare.pairing.score import _constants
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.quantparams import QuantSpec

from ...fixtures.helpers import init, make_model, vi

SCALE = 0.5
BIASES = [np.array([0.5, 1.0, 1.5, 2.0], np.float32) * (i + 1) for i in range(3)]


def float_graph() -> onnx.ModelProto:
    """y_i = x + b_i for three biases: three Adds reading the same input, told apart by b_i only."""
    nodes = [helper.make_node("Add", ["x", f"b{i}"], [f"y{i}"], name=f"add{i}") for i in range(3)]
    return make_model(nodes, [vi("x", [1, 4])], [vi(f"y{i}", [1, 4]) for i in range(3)],
                      [init(f"b{i}", b) for i, b in enumerate(BIASES)])


def qdq_graph() -> onnx.ModelProto:
    """The same, renamed and in another order, each bias int8 behind a DequantizeLinear (scale 0.5)."""
    nodes: list[onnx.NodeProto] = []
    inits = [init("s", np.array(SCALE, np.float32)), init("z", np.array(0, np.int8))]
    for i in (2, 0, 1):
        inits.append(init(f"q{i}", (BIASES[i] / SCALE).astype(np.int8)))
        nodes.append(helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"], name=f"dq{i}"))
        nodes.append(helper.make_node("Add", ["x", f"d{i}"], [f"out{i}"], name=f"plus{i}"))
    return make_model(nodes, [vi("x", [1, 4])], [vi(f"out{i}", [1, 4]) for i in range(3)], inits)


def test_a_dequantised_constant_is_read_as_the_value_it_stands_for() -> None:
    b = SemanticGraph.build(ModelGraph.from_proto(qdq_graph()))
    chain = b.chain_of["out0"]
    [value] = _constants(b, chain)
    assert value.dtype == np.float32 and value.tolist() == [0.5, 1.0, 1.5, 2.0]  # not the integers 1..4


def test_each_add_pairs_with_the_one_holding_its_own_bias() -> None:
    a = SemanticGraph.build(ModelGraph.from_proto(float_graph()))
    b = SemanticGraph.build(ModelGraph.from_proto(qdq_graph()))
    matching = match_tensors(a, b, inputs=[("x", "x")])
    assert {p.a: p.b for p in matching.pairs} == {"y0": "out0", "y1": "out1", "y2": "out2"}
    assert matching.unpaired_a == []
    # the first two are chosen by their constants among the still-open candidates; the last is alone
    evidence = {p.a: p.evidence for p in matching.pairs}
    assert "chosen among 3" in evidence["y0"] and "chosen among 2" in evidence["y1"]
    assert "tie-break" not in evidence["y2"]


def test_a_float_constant_beside_it_is_read_as_stored() -> None:
    a = SemanticGraph.build(ModelGraph.from_proto(float_graph()))
    [value] = _constants(a, a.chain_of["y1"])
    assert value.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_dequantisation_uses_the_zero_point_and_the_axis() -> None:
    b = SemanticGraph.build(ModelGraph.from_proto(qdq_graph()))
    b._initializers.update(s2=init("s2", np.array([0.5, 2.0], np.float32)), z2=init("z2", np.array([128, 130], np.uint8)))
    values = np.array([[130, 129], [132, 134]], np.uint8)
    # per channel along axis 0: row 0 is (q - 128) * 0.5, row 1 (q - 130) * 2
    assert b.dequantize(values, QuantSpec("s2", "z2", 0)).tolist() == [[1.0, 0.5], [4.0, 8.0]]
    # along axis 1 (the default): column 0 is (q - 128) * 0.5, column 1 (q - 130) * 2
    assert b.dequantize(values, QuantSpec("s2", "z2")).tolist() == [[1.0, -2.0], [2.0, 8.0]]
    assert b.dequantize(values, QuantSpec("s2", None, 0)).tolist() == [[65.0, 64.5], [264.0, 268.0]]


def test_a_quantised_constant_that_is_not_stored_is_skipped() -> None:
    # DequantizeLinear(Transpose(int8)): static, but neither the integers nor the value are stored
    nodes = [helper.make_node("Transpose", ["q"], ["qt"], name="t"),
             helper.make_node("DequantizeLinear", ["qt", "s", "z"], ["d"], name="dq"),
             helper.make_node("Add", ["x", "d"], ["y"], name="add")]
    model = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                       [init("q", np.array([[1], [2], [3], [4]], np.int8)), init("s", np.array(0.5, np.float32)),
                        init("z", np.array(0, np.int8))])
    b = SemanticGraph.build(ModelGraph.from_proto(model))
    assert _constants(b, b.chain_of["y"]) == []


def test_a_contrib_dequantize_linear_constant_is_read_dequantised() -> None:
    # com.microsoft's DequantizeLinear is not looked through as an alias, but its value is a constant
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq", domain="com.microsoft"),
             helper.make_node("Add", ["x", "d"], ["y"], name="add")]
    model = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                       [init("q", np.array([1, 2, 3, 4], np.int8)), init("s", np.array(0.5, np.float32)),
                        init("z", np.array(0, np.int8))])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    b = SemanticGraph.build(ModelGraph.from_proto(model))
    [value] = _constants(b, b.chain_of["y"])
    assert value.tolist() == [0.5, 1.0, 1.5, 2.0]
