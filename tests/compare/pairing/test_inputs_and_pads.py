"""Structural pairing's input comparison (match._Matcher._compare_inputs), the zero-Pad lookthrough
(lookthrough.padded_source) and the --map checks (match.parse_tensor_map), case by case
(scripts/mutation.sh pairing: only whole-graph tests reached them)."""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.lookthrough import padded_source
from inspector_cli.compare.pairing.match import _Matcher, match_tensors, parse_tensor_map
from inspector_cli.compare.pairing.semantic import Chain, SemanticGraph
from inspector_cli.core.graph import ModelGraph
from inspector_cli.errors import UsageError

from ...fixtures.helpers import init, make_model, vi


def sem(model: onnx.ModelProto) -> SemanticGraph:
    return SemanticGraph.build(ModelGraph.from_proto(model))


@pytest.fixture(scope="module")
def matcher() -> _Matcher:
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    graph = sem(make_model([node], [vi("x", [1, 4])], [vi("y", [1, 4])]))
    return _Matcher(graph, graph)


def compare(matcher: _Matcher, family: str, inputs: Sequence[str], other: Sequence[str],
            partners: Sequence[Optional[str]]) -> str:
    chain = Chain(0, [], [], tuple(inputs), kind=family)  # only the family and the inputs are read
    return matcher._compare_inputs(chain, tuple(other), list(partners))


@pytest.mark.parametrize("partners, other, expected", [
    (["p", "q"], ["p", "q"], "match"),
    (["p", "q"], ["q", "p"], "mismatch"),     # Sub(a, b) is not Sub(b, a)
    (["p", None], ["p", "z"], "unknown"),     # the known one agrees: not decided
    ([None, "q"], ["p", "z"], "mismatch"),    # the known one disagrees
    ([None, None], ["p", "q"], "unknown"),
    (["p", "q"], ["p"], "mismatch"),          # another number of inputs
    (["p", None], ["p"], "unknown"),
])
def test_ordered_inputs(matcher: _Matcher, partners: List[Optional[str]], other: List[str], expected: str) -> None:
    assert compare(matcher, "Sub", ["a", "b"], other, partners) == expected


@pytest.mark.parametrize("partners, other, expected", [
    (["p", "q"], ["q", "p"], "match"),        # Add(a, b) is Add(b, a)
    (["p", "q"], ["q", "z"], "mismatch"),
    (["p", None], ["z", "p"], "unknown"),     # the known one is there, in any position
    (["p", None], ["z", "w"], "mismatch"),
    ([None, None], ["z", "w"], "unknown"),
])
def test_commutative_inputs(matcher: _Matcher, partners: List[Optional[str]], other: List[str], expected: str) -> None:
    assert compare(matcher, "Add", ["a", "b"], other, partners) == expected


def padded(mode: Optional[str] = None, value: Optional[float] = None, pads: Sequence[int] = (0, 0, 1, 1, 0, 0, 1, 1),
           reader: str = "Conv", data_pads: bool = False, opset: int = 17) -> SemanticGraph:
    """x -> Pad -> p -> reader(p, w) -> y."""
    inits = [init("w", np.ones((2, 3, 3, 3), np.float32))]
    nodes = []
    attrs = {} if mode is None else {"mode": mode}
    if opset < 11:
        pad = helper.make_node("Pad", ["x"], ["p"], name="pad", pads=list(pads), **attrs)
    else:
        inputs = ["x", "pads"]
        if data_pads:  # pads computed from the data: not a constant padding
            nodes.append(helper.make_node("Cast", ["n"], ["pads"], name="cast", to=TensorProto.INT64))
        else:
            inits.append(init("pads", np.array(pads, np.int64)))
        if value is not None:
            inits.append(init("v", np.array(value, np.float32)))
            inputs.append("v")
        pad = helper.make_node("Pad", inputs, ["p"], name="pad", **attrs)
    nodes.append(pad)
    nodes.append(helper.make_node(reader, ["p", "w"] if reader == "Conv" else ["p"], ["y"], name="reader"))
    inputs = [vi("x", [1, 3, 4, 4])] + ([vi("n", [8])] if data_pads else [])
    return sem(make_model(nodes, inputs, [vi("y", None)], inits, opset=opset))


def test_a_zero_pad_read_only_by_a_conv_is_looked_through() -> None:
    assert padded_source(padded(), "p") == "x"
    assert padded_source(padded(mode="constant", value=0.0), "p") == "x"
    assert padded_source(padded(opset=10), "p") == "x"  # pads as an attribute (opset < 11)


@pytest.mark.parametrize("graph", [
    pytest.param(lambda: padded(mode="reflect"), id="reflect"),
    pytest.param(lambda: padded(value=1.0), id="pads with ones"),
    pytest.param(lambda: padded(pads=(0, 0, 1, -1, 0, 0, 1, 1)), id="negative pads crop"),
    pytest.param(lambda: padded(pads=(0, 0, 1, -1, 0, 0, 1, 1), opset=10), id="negative pad attribute"),
    pytest.param(lambda: padded(data_pads=True), id="pads from the data"),
    pytest.param(lambda: padded(reader="Relu"), id="read by a Relu"),
])
def test_any_other_pad_is_not(graph) -> None:
    assert padded_source(graph(), "p") is None


def test_a_tensor_that_no_pad_made_is_not_padded() -> None:
    graph = padded()
    assert padded_source(graph, "y") is None and padded_source(graph, "x") is None


def test_a_conv_reading_a_pad_pairs_with_a_conv_that_pads_itself() -> None:
    a = padded()
    folded = helper.make_node("Conv", ["in", "w"], ["out"], name="conv", pads=[1, 1, 1, 1])
    b = sem(make_model([folded], [vi("in", [1, 3, 4, 4])], [vi("out", None)],
                       [init("w", np.ones((2, 3, 3, 3), np.float32))]))
    matching = match_tensors(a, b, inputs=[("x", "in")])
    assert [(p.a, p.b) for p in matching.pairs] == [("y", "out")]
    assert [(u.tensor, u.reason) for u in matching.unpaired_a] == [
        ("p", "a Pad the other model folds into its Conv's padding")]
    # the other way round: the candidate's Pad is looked through
    back = match_tensors(b, a, inputs=[("in", "x")])
    assert [(p.a, p.b) for p in back.pairs] == [("out", "y")]


def test_map_entries_must_name_tensors_of_each_model() -> None:
    a = ModelGraph.from_proto(make_model([helper.make_node("Relu", ["x"], ["y"], name="r"),
                                          helper.make_node("Relu", ["y"], ["z"], name="s")],
                                         [vi("x", [1])], [vi("z", [1])]))
    # inputs and outputs are paired elsewhere: skipped; an intermediate tensor is kept
    assert parse_tensor_map([("x", "x"), ("z", "z"), ("y", "z")], a, a) == [("y", "z")]
    with pytest.raises(UsageError) as first:
        parse_tensor_map([("nope", "y")], a, a)
    assert str(first.value) == ("--map nope=y: the first model has no tensor 'nope' "
                                "(name a tensor of MODEL_A ('mi probe MODEL --list' shows them))")
    with pytest.raises(UsageError) as second:
        parse_tensor_map([("y", "nope")], a, a)
    assert str(second.value) == "--map y=nope: the second model has no tensor 'nope' (name a tensor of MODEL_B)"


def graph_of(nodes, outputs, opset: int = 17) -> SemanticGraph:
    inits = [init("w", np.ones((2, 3, 3, 3), np.float32)), init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))]
    return sem(make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi(o, None) for o in outputs], inits, opset=opset))


def test_only_a_pad_read_by_convs_alone_is_looked_through() -> None:
    relu_then_conv = graph_of([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                               helper.make_node("Conv", ["r", "w"], ["y"], name="conv")], ["y"])
    assert padded_source(relu_then_conv, "r") is None  # not a Pad
    pad_relu_conv = graph_of([helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
                              helper.make_node("Relu", ["p"], ["r"], name="relu"),
                              helper.make_node("Conv", ["r", "w"], ["y"], name="conv")], ["y"])
    assert padded_source(pad_relu_conv, "r") is None  # Pad+Relu: the Relu is no padding
    unread = graph_of([helper.make_node("Pad", ["x", "pads"], ["p"], name="pad")], ["p"])
    assert padded_source(unread, "p") is None  # nothing reads it
    shape_first = graph_of([helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
                            helper.make_node("Shape", ["p"], ["s"], name="shape"),
                            helper.make_node("Conv", ["p", "w"], ["y"], name="conv")], ["y", "s"])
    assert padded_source(shape_first, "p") == "x"  # a Shape reads no values
    pooled = graph_of([helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
                       helper.make_node("Conv", ["p", "w"], ["y"], name="conv"),
                       helper.make_node("MaxPool", ["p"], ["z"], name="pool", kernel_shape=[1, 1])], ["y", "z"])
    assert padded_source(pooled, "p") is None  # a MaxPool reads the padded value too
