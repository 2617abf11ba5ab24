"""Which ops surely pass a NaN/Inf on (`regions.preserves`), op by op and input by input, and the
walk that uses it (`Topology.surely_reaches`) up to a last position (issue 15, mutation testing of
regions.py)."""
from __future__ import annotations

from typing import Optional, Tuple

import pytest
from onnx import TensorProto, helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.nanbisect.regions import PRESERVING, Topology, make_region, preserves

from ..fixtures.helpers import make_model, vi

# every op and the inputs through which a bad value always leaves a bad output (None: all of them)
EXPECTED = {
    "Identity": None, "Reshape": (0,), "Flatten": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Transpose": (0,),
    "Concat": None, "Neg": (0,), "Abs": (0,), "Add": None, "Sub": None, "Mul": None, "Div": (0,), "Sum": None,
    "Mean": None, "MatMul": None, "Gemm": None, "Expand": (0,), "Tile": (0,), "Pad": (0,), "Sqrt": (0,),
    "Log": (0,), "BatchNormalization": (0,), "InstanceNormalization": (0,), "LayerNormalization": (0,),
    "GlobalAveragePool": (0,), "ReduceSum": (0,), "ReduceMean": (0,), "Conv": None,
}


def one_node(op: str, *, domain: str = "", inputs: Tuple[str, ...] = ("a", "b", "c"), **attrs) -> ModelGraph:
    node = helper.make_node(op, list(inputs), ["y"], name="n", domain=domain, **attrs)
    return ModelGraph.from_proto(make_model([node], [vi(t, [1, 4]) for t in inputs if t], [vi("y", [1, 4])]))


def test_the_table_is_the_documented_one():
    assert PRESERVING == EXPECTED


@pytest.mark.parametrize("op,indices", sorted(EXPECTED.items()))
def test_each_op_passes_a_bad_value_on_through_its_inputs(op: str, indices: Optional[Tuple[int, ...]]):
    attrs = {"kernel_shape": [1, 1]} if op == "Conv" else {}
    graph = one_node(op, **attrs)
    node = graph.nodes[0]
    through = [preserves(graph, node, t) for t in ("a", "b", "c")]
    assert through == ([True, True, True] if indices is None else [True, False, False])


@pytest.mark.parametrize("op", ["Relu", "MaxPool", "Softmax", "Where", "Slice", "Gather", "Clip"])
def test_ops_that_may_drop_a_value_are_not_trusted(op):
    graph = one_node(op)
    assert [preserves(graph, graph.nodes[0], t) for t in ("a", "b", "c")] == [False, False, False]


def test_only_the_standard_domain_is_trusted():
    for domain, expected in (("", True), ("ai.onnx", True), ("com.microsoft", False), ("ai.onnx.ml", False)):
        graph = one_node("Add", domain=domain)
        assert preserves(graph, graph.nodes[0], "a") is expected, domain


@pytest.mark.parametrize("to,expected", [(TensorProto.FLOAT, True), (TensorProto.FLOAT16, True),
                                         (TensorProto.DOUBLE, True), (TensorProto.BFLOAT16, True),
                                         (TensorProto.INT32, False), (TensorProto.INT64, False),
                                         (TensorProto.BOOL, False)])
def test_a_cast_keeps_a_nan_only_into_a_float_type(to, expected):
    graph = one_node("Cast", inputs=("a",), to=to)
    assert preserves(graph, graph.nodes[0], "a") is expected
    assert preserves(graph, graph.nodes[0], "b") is False  # not its input


@pytest.mark.parametrize("attrs,expected", [
    ({"kernel_shape": [3, 3]}, True),
    ({"kernel_shape": [3, 3], "strides": [3, 3]}, True),         # windows touch: every element read
    ({"kernel_shape": [3, 3], "strides": [1, 4]}, False),        # a stride wider than the kernel skips some
    ({"kernel_shape": [3, 3], "dilations": [1, 2]}, False),
    ({"kernel_shape": [3, 3], "dilations": [1, 1], "strides": [2, 2]}, True),
    ({}, False),                                                 # kernel unknown: cannot tell
])
def test_a_conv_reads_every_input_element_unless_strided_past_or_dilated(attrs, expected):
    graph = one_node("Conv", **attrs)
    assert preserves(graph, graph.nodes[0], "a") is expected
    assert preserves(graph, graph.nodes[0], "b") is expected  # the weight too


def chain() -> ModelGraph:
    """x -> neg (a) -> relu (r) -> abs (y1); a -> abs2 (b) -> add(b, x) (y2)."""
    nodes = [helper.make_node("Neg", ["x"], ["a"], name="neg"), helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Abs", ["r"], ["y1"], name="abs"), helper.make_node("Abs", ["a"], ["b"], name="abs2"),
             helper.make_node("Add", ["b", "x"], ["y2"], name="add")]
    return ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 4])], [vi("y1", [1, 4]), vi("y2", [1, 4])]))


def test_surely_reaches_follows_preserving_nodes_up_to_a_position():
    topo = Topology(chain())
    last = len(topo.nodes) - 1
    assert topo.surely_reaches("a", {"y2"}, last)          # abs2, add
    assert not topo.surely_reaches("a", {"y1"}, last)      # through a Relu: a replay must tell
    assert topo.surely_reaches("r", {"y1"}, last)
    assert topo.surely_reaches("y1", {"y1"}, 0)            # a target reaches itself
    add = topo.position["y2"]
    assert not topo.surely_reaches("a", {"y2"}, add - 1)   # 'add' is past the last position
    assert topo.surely_reaches("b", {"y2"}, add)
    assert topo.computed_inputs(add) == ["b"]              # x is a graph input
    assert topo.is_computed("b") and not topo.is_computed("x")


def test_a_region_reads_only_the_feeds_it_needs():
    topo = Topology(chain())
    region = make_region(topo, ["a", "r"], ["y2"])
    assert [topo.nodes[p].name for p in region.positions] == ["abs2", "add"]
    assert region.feeds == ("a",) and region.targets == ("y2",) and not region.is_root
    assert region.key == (("a",), ("y2",))
