"""A node with an omitted (empty) first output (compare/pairing/semantic.py `_canonicalise`): its
later outputs are values of their own. A Dropout whose output is omitted and whose mask is kept made
the boolean mask an alias of the Dropout's input, so the input's value was read from the mask when
the mask was a graph output (found from scripts/mutation.sh pairing survivors)."""
from __future__ import annotations

from onnx import TensorProto, helper

from inspector_cli.compare.pairing.semantic import SemanticGraph, TensorView
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import make_model, vi


def test_a_dropout_mask_is_not_an_alias_of_its_input() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Dropout", ["r"], ["", "mask"], name="drop"),
             helper.make_node("Neg", ["r"], ["y"], name="neg")]
    model = make_model(nodes, [vi("x", [2])], [vi("y", [2]), vi("mask", [2], TensorProto.BOOL)])
    sem = SemanticGraph.build(ModelGraph.from_proto(model))
    assert sem.canonical("mask") == "mask" and sem.kinds["mask"] == frozenset()
    assert sem.names_of("r") == ["r"]
    assert sem.view("r") == TensorView("r", "r")  # not the mask


def test_the_outputs_after_an_omitted_one_are_canonical() -> None:
    nodes = [helper.make_node("TopK", ["x", "k"], ["", "idx"], name="topk", axis=0)]
    model = make_model(nodes, [vi("x", [4]), vi("k", [1], TensorProto.INT64)], [vi("idx", [2], TensorProto.INT64)])
    sem = SemanticGraph.build(ModelGraph.from_proto(model))
    assert sem.canon["idx"] == "idx" and sem.kinds["idx"] == frozenset()
