"""When a dropped activation is explained by the side that folded it (score._activation_explained,
score._fusion_penalty): a fused activation attribute, or a quantisation whose zero point sits at the
bottom of its integer range (negative values clamp to zero, as a Relu does)
(scripts/mutation.sh pairing: only whole-model tests reached these)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from inspector_cli.compare.pairing.score import _activation_explained, _fusion_penalty
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi

W = np.ones((2, 3, 1, 1), np.float32)


def fused(activation: str) -> SemanticGraph:
    node = helper.make_node("FusedConv", ["x", "w"], ["y"], name="conv", domain="com.microsoft", activation=activation)
    model = make_model([node], [vi("x", [1, 3, 4, 4])], [vi("y", None)], [init("w", W)])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return SemanticGraph.build(ModelGraph.from_proto(model))


def quantised(zero_point: np.ndarray) -> SemanticGraph:
    """Conv -> c -> QuantizeLinear(0.1, zero_point) -> DequantizeLinear -> Softmax (a chain of its own)."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="q"),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["cd"], name="dq"),
             helper.make_node("Softmax", ["cd"], ["y"], name="softmax")]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)],
                       [init("w", W), init("s", np.array(0.1, np.float32)), init("z", zero_point)])
    return SemanticGraph.build(ModelGraph.from_proto(model))


def plain() -> SemanticGraph:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return SemanticGraph.build(ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)],
                                                                [init("w", W)])))


@pytest.mark.parametrize("activation, op, explained", [
    ("Relu", "Relu", True), ("relu", "Relu", True),  # the attribute names the dropped op (any case)
    ("Sigmoid", "Sigmoid", True), ("Relu", "Clip", False), ("Tanh", "Relu", False),
])
def test_a_fused_activation_attribute_explains_the_op_it_names(activation: str, op: str, explained: bool) -> None:
    sem = fused(activation)
    assert _activation_explained(sem, sem.chain_of["y"], op) is explained


@pytest.mark.parametrize("zero_point, op, explained", [
    (np.array(0, np.uint8), "Relu", True),      # uint8 from 0: nothing negative survives
    (np.array(0, np.uint8), "Clip", True),
    (np.array(-128, np.int8), "Relu", True),    # int8 from -128: the same
    (np.array(0, np.int8), "Relu", False),      # int8 around 0: negative values are kept
    (np.array(128, np.uint8), "Relu", False),
    (np.array(0, np.uint8), "Sigmoid", False),  # clamping at zero explains a Relu or a Clip only
])
def test_a_zero_point_at_the_bottom_of_the_range_explains_a_relu(zero_point: np.ndarray, op: str,
                                                                  explained: bool) -> None:
    sem = quantised(zero_point)
    assert _activation_explained(sem, sem.chain_of["c"], op) is explained


def test_without_quantisation_or_attribute_nothing_is_explained() -> None:
    sem = plain()
    assert _activation_explained(sem, sem.chain_of["y"], "Relu") is False


def test_a_relu_dropped_by_a_clamping_quantisation_costs_nothing_else_0_2() -> None:
    a = plain()  # Conv+Relu
    chain_a = a.chain_of["y"]
    clamped = quantised(np.array(0, np.uint8))
    assert _fusion_penalty(a, clamped, chain_a, 1, clamped.chain_of["c"], 0) == (0.0, [])
    signed = quantised(np.array(0, np.int8))
    assert _fusion_penalty(a, signed, chain_a, 1, signed.chain_of["c"], 0) == (0.2, ["Relu missing on one side"])


def test_a_zero_point_that_is_not_stored_explains_nothing() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Add", ["z", "one"], ["zc"], name="computed_zero"),
             helper.make_node("QuantizeLinear", ["c", "s", "zc"], ["cq"], name="q"),
             helper.make_node("DequantizeLinear", ["cq", "s", "zc"], ["cd"], name="dq"),
             helper.make_node("Softmax", ["cd"], ["y"], name="softmax")]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)],
                       [init("w", W), init("s", np.array(0.1, np.float32)), init("z", np.array(0, np.uint8)),
                        init("one", np.array(0, np.uint8))])
    sem = SemanticGraph.build(ModelGraph.from_proto(model))
    assert sem.view("c").quant.zero_point == "zc" and sem.array("zc") is None  # computed: no value to read
    assert _activation_explained(sem, sem.chain_of["c"], "Relu") is False
