"""The value-level rules of compare/pairing/semantic.py, each on a small graph: which tensors are data,
which are static (a Clip of constants with an omitted input, a random generator), which nodes are
looked through (domains), the kinds an alias collects, the view of a quantised tensor nothing reads,
when a follower joins a chain, and a Mul rescaling a Cast of a graph input (scripts/mutation.sh
pairing survivors)."""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.match import match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph, TensorView
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.quantparams import QuantSpec

from ...fixtures.helpers import init, make_model, vi


def sem(nodes: List[onnx.NodeProto], inputs: List[onnx.ValueInfoProto], outputs: List[str],
        inits: Optional[List[onnx.TensorProto]] = None, domains: tuple = (), types: Optional[dict] = None) -> SemanticGraph:
    """outputs are float unless `types` says otherwise."""
    model = make_model(nodes, inputs, [vi(o, None, (types or {}).get(o, TensorProto.FLOAT)) for o in outputs],
                       inits or [])
    for domain in domains:
        model.opset_import.append(helper.make_opsetid(domain, 1))
    return SemanticGraph.build(ModelGraph.from_proto(model))


def test_which_tensors_are_data() -> None:
    g = sem([helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["i"], name="cast", to=TensorProto.INT64),
             helper.make_node("QuantizeLinear", ["r", "sc", "zp"], ["q"], name="q"),
             helper.make_node("Add", ["c", "c"], ["cc"], name="add")],
            [vi("x", [2]), vi("n", [2], TensorProto.INT64)], ["i", "q", "cc"],
            [init("c", np.ones(2, np.float32)), init("sc", np.array(0.1, np.float32)), init("zp", np.array(0, np.int8))],
            types={"i": TensorProto.INT64, "q": TensorProto.INT8})
    assert g.is_data("x") and g.is_data("n")  # graph inputs, whatever their type
    assert g.is_data("r")  # float
    assert not g.is_data("i")  # an int64 nobody quantised
    assert g.is_data("q")  # int8 of a quantisation
    assert not g.is_data("c") and not g.is_data("cc")  # initializers and what only they compute
    assert g.is_data("unknown")  # no type known: assumed data


def test_a_clip_of_constants_with_an_omitted_min_is_static() -> None:
    g = sem([helper.make_node("Clip", ["c", "", "hi"], ["y"], name="clip")], [vi("x", [2])], ["y"],
            [init("c", np.ones(2, np.float32)), init("hi", np.array(0.5, np.float32))])
    assert "y" in g.static


def test_a_random_generator_is_data_and_other_input_free_nodes_are_static() -> None:
    g = sem([helper.make_node("RandomNormal", [], ["noise"], name="rn", shape=[2]),
             helper.make_node("EyeLike", ["c"], ["eye"], name="eye"),
             helper.make_node("Constant", [], ["k"], name="k", value=helper.make_tensor("v", TensorProto.FLOAT, [2], [1, 2])),
             helper.make_node("Add", ["noise", "x"], ["y"], name="add")],
            [vi("x", [2])], ["y", "eye", "k"], [init("c", np.ones((2, 2), np.float32))])
    assert "noise" not in g.static and g.is_data("noise")
    assert {"eye", "k"} <= g.static


def test_only_standard_domain_identities_are_looked_through() -> None:
    g = sem([helper.make_node("Identity", ["x"], ["a"], name="std", domain="ai.onnx"),
             helper.make_node("Identity", ["a"], ["b"], name="custom", domain="test.custom")],
            [vi("x", [2])], ["b"], domains=("test.custom",))
    assert g.canonical("a") == "x"  # "ai.onnx" is the standard domain spelled out
    assert g.canonical("b") == "b"  # an op of another domain computes something of its own


def test_an_alias_collects_every_kind_on_its_way() -> None:
    g = sem([helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["h"], name="cast", to=TensorProto.FLOAT16),
             helper.make_node("Identity", ["h"], ["out"], name="id")], [vi("x", [2])], ["out"])
    assert g.canonical("out") == "r" and g.kinds["out"] == frozenset({"cast", "identity"})
    # paired with a graph that computes r directly: the Cast on the way decides the method
    b = sem([helper.make_node("Relu", ["x"], ["out"], name="relu")], [vi("x", [2])], ["out"])
    pair, = match_tensors(g, b, inputs=[("x", "x")]).pairs
    assert (pair.a, pair.b, pair.method) == ("r", "out", "cast")


def test_a_quantisation_nothing_reads_is_read_where_it_is() -> None:
    g = sem([helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "sc", "zp"], ["q"], name="q"),  # read by nothing
             helper.make_node("Neg", ["r"], ["y"], name="neg")], [vi("x", [2])], ["y"],
            [init("sc", np.array(0.1, np.float32)), init("zp", np.array(0, np.int8))])
    assert g.view("r") == TensorView("q", "q", QuantSpec("sc", "zp", 1))


def test_a_mul_of_a_cast_graph_input_is_not_an_integer_rescale() -> None:
    # the int -> float Cast computes something (not looked through), read twice: the Mul heads a chain
    g = sem([helper.make_node("Cast", ["n"], ["f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["f", "s"], ["y"], name="mul"),
             helper.make_node("Neg", ["f"], ["z"], name="neg")],
            [vi("n", [2], TensorProto.INT32)], ["y", "z"], [init("s", np.array(2.0, np.float32))])
    chain = g.chain_of["y"]
    assert (chain.ops(), chain.kind, chain.inputs) == ("Mul", None, ("f",))
    assert g.chain_of["f"].ops() == "Cast"  # a Cast that is not looked through is a chain of its own


def test_a_follower_does_not_join_a_split_or_a_graph_output() -> None:
    split = sem([helper.make_node("Split", ["x", "sizes"], ["s0", "s1"], name="split", axis=0),
                 helper.make_node("Relu", ["s0"], ["r"], name="relu")],
                [vi("x", [4])], ["r", "s1"], [init("sizes", np.array([2, 2], np.int64))])
    assert [c.ops() for c in split.chains] == ["Split", "Relu"]
    # the Conv's output is itself a graph output: its value is needed unfused
    conv = sem([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                helper.make_node("Relu", ["c"], ["r"], name="relu")],
               [vi("x", [1, 3, 4, 4])], ["c", "r"], [init("w", np.ones((2, 3, 1, 1), np.float32))])
    assert [c.ops() for c in conv.chains] == ["Conv", "Relu"]
