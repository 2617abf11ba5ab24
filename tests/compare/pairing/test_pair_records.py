"""Every field of the pairs and unpaired rows match_tensors gives (compare/pairing/match.py): the row
for a model input the candidate quantises, the method read from what lies between the two tensors
(a Cast, an Identity, a Q->DQ), the name a pair was located by, the order of the pairs and the
default reason of an unpaired tensor (scripts/mutation.sh pairing: the tests checked that pairs
were made, not what they say)."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.match import TensorMatching, TensorPair, match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph, TensorView
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.quantparams import QuantSpec

from ...fixtures.helpers import init, make_model, vi

SCALE = init("sc", np.array(0.05, np.float32))
ZERO = init("zp", np.array(0, np.int8))


def graph(nodes: List[onnx.NodeProto], inputs: List[str], outputs: List[str],
          inits: Optional[List[onnx.TensorProto]] = None) -> SemanticGraph:
    model = make_model(nodes, [vi(x, [1, 4]) for x in inputs], [vi(o, [1, 4]) for o in outputs], inits or [])
    return SemanticGraph.build(ModelGraph.from_proto(model))


def by_a(m: TensorMatching) -> Dict[str, TensorPair]:
    return {p.a: p for p in m.pairs}


def test_inputs_the_candidate_quantises_get_a_row_of_their_own_first() -> None:
    a = graph([helper.make_node("Add", ["x1", "x2"], ["y"], name="add")], ["x1", "x2"], ["y"])
    b = graph([helper.make_node("QuantizeLinear", ["x1", "sc", "zp"], ["q1"], name="q1"),
               helper.make_node("DequantizeLinear", ["q1", "sc", "zp"], ["d1"], name="d1"),
               helper.make_node("QuantizeLinear", ["x2", "sc", "zp"], ["q2"], name="q2"),
               helper.make_node("DequantizeLinear", ["q2", "sc", "zp"], ["d2"], name="d2"),
               helper.make_node("Add", ["d1", "d2"], ["y"], name="add")], ["x1", "x2"], ["y"], [SCALE, ZERO])
    m = match_tensors(a, b, inputs=[("x1", "x1"), ("x2", "x2")])
    spec = QuantSpec("sc", "zp", 1)
    assert m.pairs == [
        TensorPair(a="x1", b="x1", view_a=TensorView("x1", "x1"), view_b=TensorView("d1", "q1", spec), method="qdq",
                   confidence=1.0, located_by="name", evidence="model input, quantised by the candidate",
                   op_a="input", op_b="QuantizeLinear"),
        TensorPair(a="x2", b="x2", view_a=TensorView("x2", "x2"), view_b=TensorView("d2", "q2", spec), method="qdq",
                   confidence=1.0, located_by="name", evidence="model input, quantised by the candidate",
                   op_a="input", op_b="QuantizeLinear"),
        # the Add reads the inputs' partners and has y's name and size: 0.85 + 0.10 + 0.05
        TensorPair(a="y", b="y", view_a=TensorView("y", "y"), view_b=TensorView("y", "y"), method="name",
                   confidence=1.0, located_by="name", evidence="name 'y', inputs paired, same size",
                   op_a="Add", op_b="Add"),
    ]
    assert (m.unpaired_a, m.unpaired_b) == ([], [])
    # asked for one input only: its row alone
    only = match_tensors(a, b, inputs=[("x1", "x1"), ("x2", "x2")], selected={"x2"})
    assert [p.a for p in only.pairs] == ["x2"]


def test_the_method_names_what_lies_between_the_paired_tensors() -> None:
    # A: x -> Relu -> r -> Identity -> out1;  x -> Sigmoid -> s -> Cast(float16) -> out2 (a float cast)
    a = graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Identity", ["r"], ["out1"], name="id"),
               helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
               helper.make_node("Cast", ["s"], ["out2"], name="cast", to=TensorProto.FLOAT16)],
              ["x"], ["out1", "out2"])
    # B computes the same, renamed, without the Identity and the Cast
    b = graph([helper.make_node("Relu", ["in"], ["out1"], name="relu_b"),
               helper.make_node("Sigmoid", ["in"], ["out2"], name="sig_b")], ["in"], ["out1", "out2"])
    pairs = by_a(match_tensors(a, b, inputs=[("x", "in")]))
    # located by the alias 'out1' of r: a name hit, but r is not out1, and an Identity lies between
    assert (pairs["r"].b, pairs["r"].method, pairs["r"].located_by) == ("out1", "identity", "name")
    assert (pairs["r"].view_a, pairs["r"].evidence) == (
        TensorView("out1", "out1"), "same computation, name 'out1', inputs paired, same size")
    assert (pairs["s"].b, pairs["s"].method, pairs["s"].located_by) == ("out2", "cast", "name")
    assert pairs["s"].confidence == 1.0


def test_a_pair_found_by_the_candidate_alias_is_named_for_it() -> None:
    # B reaches its output through an Identity: A's tensor 'r' is one of the names of B's canonical 'r0'
    a = graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Neg", ["r"], ["y"], name="neg")], ["x"], ["y"])
    b = graph([helper.make_node("Relu", ["x"], ["r0"], name="relu0"),
               helper.make_node("Identity", ["r0"], ["r"], name="id"),
               helper.make_node("Neg", ["r"], ["y"], name="neg")], ["x"], ["y"])
    pairs = by_a(match_tensors(a, b, inputs=[("x", "x")]))
    assert (pairs["r"].b, pairs["r"].located_by, pairs["r"].evidence) == (
        "r0", "name", "same computation, name 'r', inputs paired, same size")
    assert pairs["r"].method == "identity"  # the hit name 'r' is B's Identity output
    assert (pairs["y"].b, pairs["y"].method) == ("y", "name")


def test_a_structural_pair_is_not_called_by_name() -> None:
    # another alpha: not the same computation signature, found by structure alone
    a = graph([helper.make_node("LeakyRelu", ["x"], ["r"], name="relu", alpha=0.1)], ["x"], ["r"])
    b = graph([helper.make_node("LeakyRelu", ["in"], ["other"], name="relu_b", alpha=0.2)], ["in"], ["other"])
    pair, = match_tensors(a, b, inputs=[("x", "in")]).pairs
    assert (pair.b, pair.method, pair.located_by, pair.confidence) == ("other", "structural", "structure", 0.95)
    assert pair.evidence == "inputs paired, same size"


def test_pairs_come_in_the_reference_order_whatever_order_they_were_made_in() -> None:
    # the user's map pairs the last tensor first; the report still lists r, n, y
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Neg", ["r"], ["n"], name="neg"),
             helper.make_node("Exp", ["n"], ["y"], name="exp")]
    a = graph(nodes, ["x"], ["y"])
    b = graph(nodes, ["x"], ["y"])
    m = match_tensors(a, b, inputs=[("x", "x")], user_map=[("y", "y")])
    assert [(p.a, p.method) for p in m.pairs] == [("r", "name"), ("n", "name"), ("y", "map")]


def test_an_unpaired_tensor_says_why_or_that_nothing_was_found() -> None:
    # A's Exp has no counterpart in B; the Neg after it (a chain of its own) then has no paired input
    a = graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Exp", ["r"], ["e"], name="exp"),
               helper.make_node("Neg", ["e"], ["y"], name="neg")], ["x"], ["y"])
    b = graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Sin", ["r"], ["y2"], name="sin")], ["x"], ["y2"])
    m = match_tensors(a, b, inputs=[("x", "x")])
    assert [p.a for p in m.pairs] == ["r"]
    assert [(u.tensor, u.op, u.reason) for u in m.unpaired_a] == [
        ("e", "Exp", "no node of the same kind reads the counterparts of its inputs"),
        ("y", "Neg", "its inputs have no counterpart (the graphs differ upstream)"),
    ]
    assert [(u.tensor, u.op, u.reason) for u in m.unpaired_b] == [("y2", "Sin", "no counterpart in the reference")]


def test_a_pair_found_by_an_alias_across_a_reshape_is_a_name_pair() -> None:
    # B flattens r0 into 'r' (same elements, same order: looked through, and not a method of its own)
    a = graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Neg", ["r"], ["y"], name="neg")], ["x"], ["y"])
    b = graph([helper.make_node("Relu", ["x"], ["r0"], name="relu0"),
               helper.make_node("Flatten", ["r0"], ["r"], name="flat", axis=1),
               helper.make_node("Neg", ["r"], ["y"], name="neg")], ["x"], ["y"])
    pairs = by_a(match_tensors(a, b, inputs=[("x", "x")]))
    assert (pairs["r"].b, pairs["r"].method, pairs["r"].located_by) == ("r0", "name", "name")
    # neither is an output nor quantised: each read where it is
    assert (pairs["r"].view_a, pairs["r"].view_b) == (TensorView("r", "r"), TensorView("r0", "r0"))
