"""find_origins / first_nan_birth on a small hand-made graph: every origin, which reach the
targets, the incoming bad tensors that matter, and the fallbacks (scripts/mutation.sh nanbisect)."""
from __future__ import annotations

import numpy as np
from onnx import helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.nanbisect.analyse import find_origins, first_nan_birth
from inspector_cli.nanbisect.regions import Topology

from ..fixtures.helpers import init, make_model, vi


def _topology() -> Topology:
    """
    pos 0  log:  a = Log(x)
    pos 1  sqrt: b = Sqrt(x)
    pos 2  addw: c = Add(a, w)        (w a weight)
    pos 3  mul:  y = Mul(c, b)        (output y)
    pos 4  relu: z = Relu(b)          (output z)
    pos 5  weighted: u = Mul(x, v)    (v a weight; output u)
    """
    nodes = [helper.make_node("Log", ["x"], ["a"], name="log"),
             helper.make_node("Sqrt", ["x"], ["b"], name="sqrt"),
             helper.make_node("Add", ["a", "w"], ["c"], name="addw"),
             helper.make_node("Mul", ["c", "b"], ["y"], name="mul"),
             helper.make_node("Relu", ["b"], ["z"], name="relu"),
             helper.make_node("Mul", ["x", "v"], ["u"], name="weighted")]
    ones = np.ones((1, 4), np.float32)
    model = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4]), vi("z", [1, 4]), vi("u", [1, 4])],
                       [init("w", ones), init("v", ones)])
    return Topology(ModelGraph.from_proto(model))


def names(topo: Topology, positions) -> list:
    return [topo.nodes[p].name for p in positions]


def test_two_origins_both_reach_a_target_through_one_node() -> None:
    topo = _topology()
    scan = find_origins(topo, range(6), {"a", "b", "c", "y", "z"}, ["y"])
    assert names(topo, scan.origins) == ["log", "sqrt"]
    assert names(topo, scan.reaching) == ["log", "sqrt"] and scan.masked == []
    assert scan.first_bad == 0 and scan.incoming == set()


def test_an_origin_masked_on_the_way_is_not_reaching() -> None:
    topo = _topology()
    # log's value dies at addw (c clean); sqrt's reaches z only
    scan = find_origins(topo, range(6), {"a", "b", "z"}, ["z"])
    assert names(topo, scan.reaching) == ["sqrt"] and names(topo, scan.masked) == ["log"]
    assert find_origins(topo, range(6), {"a", "b", "z"}, ["y"]).reaching == []


def test_a_node_fed_a_bad_weight_or_graph_input_is_the_origin() -> None:
    topo = _topology()
    # x and v are given, not computed: 'weighted' has no bad computed input, so it is the origin
    scan = find_origins(topo, range(6), {"x", "v", "u"}, ["u"])
    assert names(topo, scan.origins) == ["weighted"] and scan.first_bad == 5
    assert first_nan_birth(topo, range(6), {"x", "v", "u"}, ["u"]) == 5


def test_first_bad_is_the_first_bad_node_even_when_it_is_not_an_origin_of_the_targets() -> None:
    topo = _topology()
    scan = find_origins(topo, [2, 3, 4], {"a", "c", "y"}, ["y"])  # a is computed outside the span
    # addw reads the computed bad 'a' but 'a' has no cause in this span: it propagates, no origin
    assert scan.origins == [] and scan.first_bad == 2 and scan.reaching == []
    assert find_origins(topo, range(6), set(), ["y"]).first_bad == -1


def test_incoming_bad_tensors_that_reach_the_targets() -> None:
    topo = _topology()
    span = [2, 3, 4]
    scan = find_origins(topo, span, {"a", "b", "c", "y", "z"}, ["y"], incoming=["a", "b"])
    assert scan.origins == [] and scan.incoming == {"a", "b"}
    only_z = find_origins(topo, span, {"a", "b", "c", "y", "z"}, ["z"], incoming=["a", "b"])
    assert only_z.incoming == {"b"}
    # an incoming tensor whose value is masked inside the span does not reach
    masked = find_origins(topo, span, {"a", "b", "y", "z"}, ["y"], incoming=["a", "b"])
    assert masked.incoming == {"b"}
    # and an origin inside the span next to an incoming one: both reach y
    mixed = find_origins(topo, [0, 2, 3], {"a", "b", "c", "y"}, ["y"], incoming=["b"])
    assert names(topo, mixed.reaching) == ["log"] and mixed.incoming == {"b"}


def test_several_targets_union_their_origins_in_topological_order() -> None:
    topo = _topology()
    bad = {"a", "c", "y", "x", "v", "u"}
    scan = find_origins(topo, range(6), bad, ["u", "y"])
    assert names(topo, scan.reaching) == ["log", "weighted"] and scan.masked == []
    only_y = find_origins(topo, range(6), bad, ["y"])
    assert names(topo, only_y.reaching) == ["log"] and names(topo, only_y.masked) == ["weighted"]


def test_first_nan_birth_prefers_a_reaching_origin_then_any_then_none() -> None:
    topo = _topology()
    # log and sqrt both origins; only sqrt's value reaches z
    assert first_nan_birth(topo, range(6), {"a", "b", "z"}, ["z"]) == 1
    # no origin reaches 'y': the first origin is the fallback
    assert first_nan_birth(topo, range(6), {"a", "b", "z"}, ["y"]) == 0
    assert first_nan_birth(topo, range(6), set(), ["y"]) == -1
