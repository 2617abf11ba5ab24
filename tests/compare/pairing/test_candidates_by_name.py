"""How candidate chains are found and what the chosen pair then says (compare/pairing/match.py
`_Matcher.candidates`, `add_pair`): a name on the chain's end or on an inner step, a node name,
the tie-break score those names give, a candidate that reads other inputs, an input nothing in
the candidate reads, the op strings of inner and fused steps, and a method read from an output
alias of the candidate (scripts/mutation.sh pairing survivors)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx
from onnx import helper

from inspector_cli.compare.pairing.match import TensorPair, match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi

W = np.ones((2, 3, 1, 1), np.float32)


def graph(nodes: List[onnx.NodeProto], inputs: List[str], outputs: List[str],
          inits: Optional[List[onnx.TensorProto]] = None, shape: Tuple[int, ...] = (1, 3, 4, 4)) -> SemanticGraph:
    model = make_model(nodes, [vi(x, list(shape)) for x in inputs], [vi(o, None) for o in outputs], inits or [])
    return SemanticGraph.build(ModelGraph.from_proto(model))


def pairs(a: SemanticGraph, b: SemanticGraph, inputs: List[Tuple[str, str]]) -> Dict[str, TensorPair]:
    return {p.a: p for p in match_tensors(a, b, inputs=inputs).pairs}


def softmax(x: str, out: str, name: Optional[str] = None) -> onnx.NodeProto:
    return helper.make_node("Softmax", [x], [out], name=name or out, axis=-1)


def test_a_name_on_the_end_scores_three_in_the_tie_break() -> None:
    a = graph([softmax("x", "y")], ["x"], ["y"])
    # two identical computations of the paired input; one carries the reference's name
    b = graph([softmax("in", "s2"), softmax("in", "y", "b_y")], ["in"], ["s2", "y"])
    pair = pairs(a, b, [("x", "in")])["y"]
    assert (pair.b, pair.located_by, pair.confidence) == ("y", "name", 1.0)
    # end name 3 + same computation 4 + the same axis 0.5; the other: 4 + 0.5
    assert pair.evidence == ("same computation, name 'y', inputs paired, same size, tie-break 7.50; "
                             "chosen among 2 by names/attributes/constants")


def conv_relu(x: str, conv: str, relu: str, prefix: str) -> List[onnx.NodeProto]:
    return [helper.make_node("Conv", [x, "w"], [conv], name=prefix + "conv"),
            helper.make_node("Relu", [conv], [relu], name=prefix + "relu")]


def test_a_name_on_an_inner_step_scores_two_and_counts_as_a_name() -> None:
    a = graph(conv_relu("x", "c", "r", "a_"), ["x"], ["r"], [init("w", W)])
    # B: the same Conv+Relu twice; the first's Conv output has the reference's inner name 'c'
    b = graph(conv_relu("in", "c", "r1", "b1_") + conv_relu("in", "c2", "r2", "b2_"), ["in"], ["r1", "r2"],
              [init("w", W)])
    got = pairs(a, b, [("x", "in")])
    assert (got["r"].b, got["r"].located_by, got["r"].confidence) == ("r1", "name", 1.0)
    # step name 2 + same computation 4 + equal weights 2; the other: 4 + 2
    assert got["r"].evidence == ("same computation, name 'c', inputs paired, same size, tie-break 8.00; "
                                 "chosen among 2 by names/attributes/constants")
    # the inner step pairs too, named for its own op only
    assert (got["c"].b, got["c"].op_a, got["c"].op_b, got["c"].chain_end) == ("c", "Conv", "Conv", False)


def test_a_node_name_alone_is_shown_and_scores_one() -> None:
    a = graph([softmax("x", "y", "act")], ["x"], ["y"])
    b = graph([softmax("in", "s1"), softmax("in", "s2", "act")], ["in"], ["s1", "s2"])
    pair = pairs(a, b, [("x", "in")])["y"]
    assert (pair.b, pair.located_by) == ("s2", "structure")
    # node name 1 + same computation 4 + axis 0.5; the other: 4.5
    assert pair.evidence == ("same computation, same node name, inputs paired, same size, tie-break 5.50; "
                             "chosen among 2 by names/attributes/constants")


def test_a_same_named_candidate_reading_other_inputs_is_rejected() -> None:
    a = graph([helper.make_node("Relu", ["x1"], ["r"], name="relu")], ["x1", "x2"], ["r"])
    b = graph([helper.make_node("Relu", ["x2"], ["r"], name="relu")], ["x1", "x2"], ["r"])
    m = match_tensors(a, b, inputs=[("x1", "x1"), ("x2", "x2")])
    assert m.pairs == []
    assert [(u.tensor, u.reason) for u in m.unpaired_a] == [
        ("r", "same name, but 'r' in the other model reads different inputs")]


def test_an_input_the_candidate_does_not_read_further_gives_no_candidate() -> None:
    a = graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Exp", ["r"], ["e"], name="exp")], ["x"], ["e"])
    b = graph([helper.make_node("Relu", ["x"], ["r"], name="relu")], ["x"], ["r"])  # nothing reads r
    m = match_tensors(a, b, inputs=[("x", "x")])
    assert [p.a for p in m.pairs] == ["r"]
    assert [(u.tensor, u.reason) for u in m.unpaired_a] == [
        ("e", "no node of the same kind reads the counterparts of its inputs")]


def test_inner_and_fused_steps_name_their_ops() -> None:
    def chain(x: str, p: str, bn: bool) -> List[onnx.NodeProto]:
        nodes = [helper.make_node("Conv", [x, "w"], [p + "c"], name=p + "conv")]
        if bn:
            nodes.append(helper.make_node("BatchNormalization", [p + "c", "sc", "b", "mu", "var"], [p + "bn"],
                                          name=p + "bn"))
        nodes.append(helper.make_node("Relu", [nodes[-1].output[0]], [p + "r"], name=p + "relu"))
        return nodes

    bn = [init(n, np.full(2, v, np.float32)) for n, v in (("sc", 1.0), ("b", 0.0), ("mu", 0.0), ("var", 1.0))]
    full = graph(chain("x", "a_", True), ["x"], ["a_r"], [init("w", W), *bn])
    same = graph(chain("in", "b_", True), ["in"], ["b_r"], [init("w", W), *bn])
    got = pairs(full, same, [("x", "in")])
    assert [(t, got[t].b, got[t].op_a, got[t].op_b) for t in ("a_c", "a_bn", "a_r")] == [
        ("a_c", "b_c", "Conv", "Conv"), ("a_bn", "b_bn", "BatchNormalization", "BatchNormalization"),
        ("a_r", "b_r", "Conv+BatchNormalization+Relu", "Conv+BatchNormalization+Relu")]
    # against a Conv+Relu: A's Conv+BN is fused into B's Conv, named up to that step on each side
    folded = graph(chain("in", "b_", False), ["in"], ["b_r"], [init("w", W)])
    got = pairs(full, folded, [("x", "in")])
    assert (got["a_bn"].b, got["a_bn"].op_a, got["a_bn"].op_b, got["a_bn"].method) == (
        "b_c", "Conv+BatchNormalization", "Conv", "fused")


def test_an_identity_to_the_candidates_output_is_the_method() -> None:
    a = graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], ["x"], ["y"])
    b = graph([helper.make_node("Relu", ["in"], ["r0"], name="relu_b"),
               helper.make_node("Identity", ["r0"], ["out"], name="id")], ["in"], ["out"])
    pair = pairs(a, b, [("x", "in")])["y"]
    assert (pair.b, pair.view_b.expose, pair.method, pair.located_by) == ("r0", "out", "identity", "structure")
