"""The tie-break among equally confident candidates (compare/pairing/score.py), value by value:
name evidence, op attributes and constant operands, each with its hand-computed weight
(scripts/mutation.sh pairing found these weights untested: any of them could change unnoticed)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import List

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.score import Candidate, _constant_score, _tie_score
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi


def graph(op: str, const: np.ndarray | None = None, **attrs: object) -> SemanticGraph:
    """x -> op -> y, the op reading one constant operand `c` when given."""
    inputs = ["x", "c"] if const is not None else ["x"]
    node = helper.make_node(op, inputs, ["y"], name="n", **attrs)
    inits = [init("c", const)] if const is not None else []
    return SemanticGraph.build(ModelGraph.from_proto(make_model([node], [vi("x", [1, 4])], [vi("y", None)], inits)))


def tie(a: SemanticGraph, b: SemanticGraph, name_hits: Sequence[str] = (), same_sig: bool = False) -> float:
    cand = Candidate(b.chains[0], name_hits=set(name_hits), same_sig=same_sig)
    return _tie_score(a, b, a.chains[0], cand)


@pytest.mark.parametrize("hits, same_sig, expected", [
    ((), False, 0.0),
    (("end",), False, 3.0),
    (("step",), False, 2.0),
    (("node",), False, 1.0),
    (("end", "step", "node"), False, 6.0),
    ((), True, 4.0),
    (("end",), True, 7.0),
])
def test_name_hits_and_equal_signatures_weigh_3_2_1_and_4(hits: set[str], same_sig: bool, expected: float) -> None:
    a, b = graph("Relu"), graph("Relu")  # no attributes, no constants: only the evidence counts
    assert tie(a, b, hits, same_sig) == expected


@pytest.mark.parametrize("axis_a, axis_b, expected", [
    (1, 1, 0.5),        # set on both and equal
    (1, 0, -0.5),       # set on both and different
    (1, None, 0.0),     # set on one side only: no evidence either way
    (None, 1, 0.0),
    (None, None, 0.0),
])
def test_an_attribute_set_on_both_sides_counts_half_a_point(axis_a: int | None, axis_b: int | None,
                                                           expected: float) -> None:
    a = graph("Softmax", **({} if axis_a is None else {"axis": axis_a}))
    b = graph("Softmax", **({} if axis_b is None else {"axis": axis_b}))
    assert tie(a, b) == expected
    assert tie(a, b, ("end",)) == 3.0 + expected  # the attribute adds to the name evidence


def test_constant_operands_add_to_the_name_evidence() -> None:
    a = graph("Add", np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    same = graph("Add", np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    other = graph("Add", np.array([1.0, 2.0, 3.0, 5.0], np.float32))
    assert tie(a, same, ("end",)) == 5.0 and tie(a, other, ("end",)) == 1.0


def constant_score(x: np.ndarray, y: np.ndarray, op: str = "Add") -> float:
    a, b = graph(op, x), graph(op, y)
    return _constant_score(a, b, a.chains[0], b.chains[0])


def test_small_constants_score_plus_or_minus_two() -> None:
    four = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert constant_score(four, four.copy()) == 2.0
    assert constant_score(four, four + np.float32(1e-9)) == 2.0  # allclose, not bit-equal
    assert constant_score(four, np.array([1.0, 2.0, 3.0, 5.0], np.float32)) == -2.0
    assert constant_score(four, four.reshape(1, 4)) == -2.0  # same values, another shape


def test_sixty_four_values_is_still_small_sixty_five_is_compared_by_correlation() -> None:
    # constant values: equal when small (+2), no correlation when large (zero spread: 0)
    assert constant_score(np.ones(64, np.float32), np.ones(64, np.float32)) == 2.0
    assert constant_score(np.ones(65, np.float32), np.ones(65, np.float32)) == 0.0
    # one side small, the other not: different sizes, no evidence
    assert constant_score(np.ones(64, np.float32), np.ones(65, np.float32)) == 0.0
    assert constant_score(np.ones(65, np.float32), np.ones(64, np.float32)) == 0.0


def test_large_constants_score_twice_their_correlation() -> None:
    x = np.arange(80, dtype=np.float32)
    assert constant_score(x, 2 * x + 1) == pytest.approx(2.0)     # correlation 1
    assert constant_score(x, -x) == pytest.approx(-2.0)           # correlation -1
    assert constant_score(x, np.ones(80, np.float32)) == 0.0      # no spread on one side
    assert constant_score(np.ones(80, np.float32), x) == 0.0
    assert constant_score(x, np.arange(81, dtype=np.float32)) == 0.0  # different sizes


def test_a_transposed_weight_is_compared_in_the_references_layout() -> None:
    w = np.arange(80, dtype=np.float32).reshape(4, 20)
    # the candidate stores W^T (a Gemm with transB): read back in A's layout the values correlate exactly
    assert constant_score(w, w.T.copy(), "MatMul") == pytest.approx(2.0)
    # (compared in storage order the same values correlate 0.296: corrcoef(arange(80),
    # arange(80).reshape(4, 20).T.ravel()), a score of 0.59 instead of 2)
    # a 2-D constant of the same shape is never transposed
    assert constant_score(w, w.copy(), "MatMul") == pytest.approx(2.0)
    assert constant_score(w, w[::-1].copy(), "MatMul") < 1.9


def test_the_scores_of_several_constant_operands_add_up() -> None:
    def two(c1: np.ndarray, c2: np.ndarray) -> SemanticGraph:
        node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="n")
        model = make_model([node], [vi("x", [1, 4])], [vi("y", None)], [init("lo", c1), init("hi", c2)])
        return SemanticGraph.build(ModelGraph.from_proto(model))

    a = two(np.array(0.0, np.float32), np.array(6.0, np.float32))
    both = two(np.array(0.0, np.float32), np.array(6.0, np.float32))
    one = two(np.array(0.0, np.float32), np.array(1.0, np.float32))
    none = two(np.array(-1.0, np.float32), np.array(1.0, np.float32))
    assert _constant_score(a, both, a.chains[0], both.chains[0]) == 4.0
    assert _constant_score(a, one, a.chains[0], one.chains[0]) == 0.0
    assert _constant_score(a, none, a.chains[0], none.chains[0]) == -4.0


def test_the_scores_of_two_large_operands_add_up_too() -> None:
    def two(c1: np.ndarray, c2: np.ndarray) -> SemanticGraph:
        node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="n")
        model = make_model([node], [vi("x", [1, 80])], [vi("y", None)], [init("lo", c1), init("hi", c2)])
        return SemanticGraph.build(ModelGraph.from_proto(model))

    x = np.arange(80, dtype=np.float32)
    a, b = two(x, x + 100), two(3 * x, x)  # correlations 1 and 1
    assert _constant_score(a, b, a.chains[0], b.chains[0]) == pytest.approx(4.0)
    c = two(-x, x)  # -1 and 1
    assert _constant_score(a, c, a.chains[0], c.chains[0]) == pytest.approx(0.0)


def test_a_constant_nodes_value_is_a_constant_operand() -> None:
    def with_constant(values: List[float]) -> SemanticGraph:
        nodes = [helper.make_node("Constant", [], ["c"], name="const",
                                  value=helper.make_tensor("v", TensorProto.FLOAT, [len(values)], values)),
                 helper.make_node("Add", ["x", "c"], ["y"], name="n")]
        return SemanticGraph.build(ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 4])], [vi("y", None)])))

    a, same, other = with_constant([1, 2, 3, 4]), with_constant([1, 2, 3, 4]), with_constant([4, 3, 2, 1])
    assert a.array("c").tolist() == [1.0, 2.0, 3.0, 4.0] and a.array("y") is None and a.array("x") is None
    assert _constant_score(a, same, a.chains[0], same.chains[0]) == 2.0
    assert _constant_score(a, other, a.chains[0], other.chains[0]) == -2.0
