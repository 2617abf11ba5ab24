"""Scoring and choosing candidate chains (compare/pairing/score.py): the steps two chains align on,
the fusion penalty and its notes, the element-count verdict, why a named candidate is rejected, and
how equally likely candidates are told apart or reported ambiguous (scripts/mutation.sh pairing
survivors: these values were reached by the tests but never read)."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np
import pytest
from onnx import helper

from inspector_cli.compare.pairing.score import Candidate, aligned_prefix, best_candidates, chain_signature_score
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi
from .chains import W, append_step


def chain_graph(ops: Sequence[str], x: str = "x", prefix: str = "t", shape: Optional[List[int]] = None,
                x_shape: Optional[List[int]] = (1, 3, 4, 4)) -> SemanticGraph:
    """x -> ops[0] -> ops[1] -> ...: one chain when the ops after the head are followers. A Conv head
    reads W, an Add adds 1, the other ops take x alone; the last tensor is the output (shape unset
    unless given: onnx infers it from x's, unknown when x's is)."""
    nodes, inits, t = [], [init("w", W), init("c", np.array(1.0, np.float32))], x
    for k, op in enumerate(ops):
        out = f"{prefix}{k}"
        append_step(op, t, out, nodes, inits)
        t = out
    model = make_model(nodes, [vi(x, None if x_shape is None else list(x_shape))], [vi(t, shape)], inits)
    return SemanticGraph.build(ModelGraph.from_proto(model))


def scored(ops_a: Sequence[str], ops_b: Sequence[str]) -> Candidate:
    a, b = chain_graph(ops_a), chain_graph(ops_b, "in", "u")
    assert len(a.chains) == len(b.chains) == 1
    cand = Candidate(b.chains[0])
    chain_signature_score(a, b, a.chains[0], cand)
    return cand


@pytest.mark.parametrize("ops_a, ops_b, expected", [
    (["Conv", "BatchNormalization", "Relu"], ["Conv", "Relu"], (1, 0)),
    (["Conv", "Relu"], ["Conv", "BatchNormalization", "Relu"], (0, 1)),
    (["Conv", "BatchNormalization", "Relu"], ["Conv", "BatchNormalization", "Relu"], (0, 0)),
    (["Conv", "BatchNormalization"], ["Conv", "Relu"], (1, 1)),  # the ends differ: nothing aligns
    (["Conv"], ["Conv", "Relu"], (0, 1)),
    # a head of the follower's own kind (Add after Add) is never aligned past
    (["Add"], ["Add", "Add"], (0, 1)),
    (["Add", "Add"], ["Add"], (1, 0)),
])
def test_chains_align_from_their_ends_down_to_a_head(ops_a: List[str], ops_b: List[str],
                                                     expected: Tuple[int, int]) -> None:
    a, b = chain_graph(ops_a), chain_graph(ops_b, "in", "u")
    assert aligned_prefix(a.chains[0], b.chains[0]) == expected


@pytest.mark.parametrize("ops_a, ops_b, penalty, notes", [
    # a BatchNormalization folded into a Conv: nothing to explain
    (["Conv", "BatchNormalization", "Relu"], ["Conv", "Relu"], 0.0, []),
    # an Add a non-absorbing head cannot have folded
    (["Add", "Add", "Add"], ["Add", "Add"], 0.2, ["Add dropped by a Add"]),
    (["Add", "Add", "Add"], ["Add"], 0.4, ["Add dropped by a Add", "Add dropped by a Add"]),
    # an activation missing on either side, nothing to explain it
    (["Conv", "Relu"], ["Conv"], 0.2, ["Relu missing on one side"]),
    (["Conv"], ["Conv", "Relu"], 0.2, ["Relu missing on one side"]),
    # two missing, the Relu the other side runs too is not counted
    (["Conv", "Relu", "Sigmoid"], ["Conv", "Relu"], 0.2, ["Sigmoid missing on one side"]),
    (["Conv", "Relu", "Sigmoid"], ["Conv"], 0.4, ["Relu missing on one side", "Sigmoid missing on one side"]),
    # three missing: at most 0.4
    (["Conv", "Relu", "Sigmoid", "Tanh"], ["Conv"], 0.4,
     ["Relu missing on one side", "Sigmoid missing on one side", "Tanh missing on one side"]),
])
def test_the_fusion_penalty_counts_what_one_side_cannot_have_folded(ops_a: List[str], ops_b: List[str],
                                                                    penalty: float, notes: List[str]) -> None:
    cand = scored(ops_a, ops_b)
    assert cand.penalty == pytest.approx(penalty)
    assert cand.notes == notes


def test_the_element_counts_are_equal_different_or_unknown() -> None:
    a = chain_graph(["Relu"], shape=[1, 3, 4, 4])
    for shape, x_shape, verdict in (([1, 3, 4, 4], None, "equal"), ([1, 3, 4, 5], None, "differ"),
                                    (None, None, "unknown")):
        b = chain_graph(["Relu"], "in", "u", shape, x_shape)
        cand = Candidate(b.chains[0])
        chain_signature_score(a, b, a.chains[0], cand)
        assert cand.shape == verdict


def softmaxes(specs: Sequence[Tuple[str, Optional[int]]], x: str = "x") -> SemanticGraph:
    """One Softmax per (output, axis) reading x (axis None: not set)."""
    nodes = [helper.make_node("Softmax", [x], [out], name=out, **({} if axis is None else {"axis": axis}))
             for out, axis in specs]
    model = make_model(nodes, [vi(x, [1, 4])], [vi(out, [1, 4]) for out, _ in specs])
    return SemanticGraph.build(ModelGraph.from_proto(model))


def candidates(b: SemanticGraph, inputs: str = "match", hits: Sequence[str] = ()) -> List[Candidate]:
    return [Candidate(c, inputs=inputs, shape="equal", name_hits=set(hits)) for c in b.chains]


def test_half_a_point_of_attribute_evidence_settles_a_tie() -> None:
    a, b = softmaxes([("y", -1)]), softmaxes([("s1", -1), ("s2", None)], "in")
    best, reason = best_candidates(a, b, a.chains[0], candidates(b))
    assert (best.chain.end, reason) == ("s1", "")
    assert best.tie == 0.5  # the same axis; s2 has none to compare (0)
    assert best.evidence == "inputs paired, same size, tie-break 0.50; chosen among 2 by names/attributes/constants"
    assert best.confidence == pytest.approx(0.95)


def test_a_whole_point_settles_it_too() -> None:
    a, b = softmaxes([("y", -1)]), softmaxes([("s1", -1), ("s2", 0)], "in")
    best, _ = best_candidates(a, b, a.chains[0], candidates(b))
    assert (best.chain.end, best.tie) == ("s1", 0.5)  # s2: -0.5


def test_equal_candidates_are_ambiguous_and_four_of_them_named() -> None:
    a = softmaxes([("y", -1)])
    b = softmaxes([(f"s{k}", -1) for k in range(5)], "in")
    best, reason = best_candidates(a, b, a.chains[0], candidates(b))
    assert best is None
    assert reason == "ambiguous: 5 equally likely counterparts ('s0', 's1', 's2', 's3'); pair it with --map"


def test_the_most_confident_candidate_wins_without_a_tie_break() -> None:
    a, b = softmaxes([("y", -1)]), softmaxes([("s1", -1), ("s2", -1)], "in")
    weak, strong = candidates(b)
    weak.shape = "unknown"  # 0.85 against 0.95: more than the 0.05 tie margin
    best, _ = best_candidates(a, b, a.chains[0], [weak, strong])
    assert best is strong and best.evidence == "inputs paired, same size"


@pytest.mark.parametrize("change, reason", [
    ({"inputs": "mismatch"}, "same name, but 's1' in the other model reads different inputs"),
    ({"shape": "differ"}, "same name, but 's1' in the other model has a different number of elements"),
    ({"family_ok": False}, "same name, but 's1' in the other model is computed by Softmax, not Softmax"),
    ({"claimed_by": "z"}, "same name, but 's1' in the other model is named like the reference's 'z'"),
])
def test_a_named_candidate_rejected_says_why(change: dict, reason: str) -> None:
    a, b = softmaxes([("y", -1)]), softmaxes([("s1", -1)], "in")
    cand, = candidates(b, hits=["end"])
    for key, value in change.items():
        setattr(cand, key, value)
    assert best_candidates(a, b, a.chains[0], [cand]) == (None, reason)


def test_without_a_viable_candidate_the_reason_depends_on_the_inputs() -> None:
    a, b = softmaxes([("y", -1)]), softmaxes([("s1", -1)], "in")
    # inputs not paired and no name: not a candidate at all
    assert best_candidates(a, b, a.chains[0], candidates(b, "unknown")) == (
        None, "no node of the same kind reads the counterparts of its inputs")  # inputs paired by default
    assert best_candidates(a, b, a.chains[0], candidates(b, "unknown"), inputs_paired=False) == (
        None, "its inputs have no counterpart (the graphs differ upstream)")
