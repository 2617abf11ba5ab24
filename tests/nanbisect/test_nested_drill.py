"""Inside If/Loop bodies (`nested.drill`), driven directly with the values the node saw: the branch
taken, the first bad iteration, where the loop stops, and the notes when nothing can be said
(issue 15, mutation testing of nested.py). Values are worked out by hand in the comments."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.nested import drill
from inspector_cli.results.nan_bisect import Hint, NestedOrigin, TensorStats

from ..fixtures import nan_models as nm
from ..fixtures.helpers import init, make_model, vi

B, I64 = TensorProto.BOOL, TensorProto.INT64
E10 = np.float32(1e10)


def run(model: onnx.ModelProto, node: str, known: Dict[str, np.ndarray]) -> Optional[NestedOrigin]:
    return drill(ModelGraph.from_proto(model), node, known.get, RuntimeConfig())


def stats(name: str, value: np.ndarray, **kw) -> TensorStats:
    return TensorStats(name, "float32", list(value.shape), int(value.size), **kw)


def loop_known(trips: int, v: float = 1.0) -> Dict[str, np.ndarray]:
    return {"trips": np.array(trips, np.int64), "v0": np.full((1, 4), v, np.float32), "big": np.array(E10)}


def test_the_first_iteration_whose_product_overflows():
    # v = 1, 1e10, 1e20, 1e30 after iterations 0-2; iteration 3 multiplies 1e30 by 1e10: Inf in fp32
    found = run(nm.loop_model(), "grow_loop", loop_known(10))
    v_in = float(E10 * E10 * E10)
    assert found == NestedOrigin(
        attribute="body", node="mul_body", op_type="Mul", iteration=3,
        hints=[Hint("overflow", "float32 overflow: the result exceeds 3.40282e+38 (inputs reach |x| = 1e+30)")],
        inputs=[stats("v_in", np.ones((1, 4)), min=v_in, max=v_in, source="input"),
                stats("big", np.array(1.0), min=1e10, max=1e10, source="input")])
    # four trips reach iteration 3, three do not
    assert run(nm.loop_model(4), "grow_loop", loop_known(4)).iteration == 3
    assert run(nm.loop_model(3), "grow_loop", loop_known(3)) == NestedOrigin(
        attribute="body", note="no iteration replayed alone produced NaN/Inf")
    # starting at 1e20, the second iteration (index 1) overflows
    assert run(nm.loop_model(), "grow_loop", loop_known(10, 1e20)).iteration == 1


def test_the_loop_carried_values_must_be_known():
    known = loop_known(10)
    del known["v0"]
    assert run(nm.loop_model(), "grow_loop", known) == NestedOrigin(
        attribute="body", note="the loop-carried initial values are not available")


def counted_loop(limit: int) -> onnx.ModelProto:
    """Loop 'count_loop' without a trip count, while cond: the body multiplies v by 1e10 and goes on
    while i < limit (its condition output), so it runs iterations 0..limit."""
    body = helper.make_graph(
        [helper.make_node("Less", ["i", "limit"], ["cond_out"], name="less"),
         helper.make_node("Mul", ["v_in", "big"], ["v_out"], name="mul_body"),
         helper.make_node("Identity", ["v_in"], ["seen"], name="scan_out")],
        "count_body", [vi("i", [], I64), vi("cond_in", [], B), vi("v_in", [1, 4])],
        [vi("cond_out", [], B), vi("v_out", [1, 4]), vi("seen", [1, 4])])
    nodes = [helper.make_node("Abs", ["x"], ["v0"], name="abs"),
             helper.make_node("Loop", ["", "c0", "v0"], ["v_final", "seen_all"], name="count_loop", body=body)]
    return make_model(nodes, [vi("x", [1, 4]), vi("c0", [], B)], [vi("v_final", [1, 4])],
                      [init("big", np.array(E10)), init("limit", np.array(limit, np.int64))])


def test_a_loop_without_trip_count_runs_while_its_condition_holds():
    def known(v: float, c0: bool, limit: int) -> Dict[str, np.ndarray]:
        return {"c0": np.array(c0), "v0": np.full((1, 4), v, np.float32), "big": np.array(E10),
                "limit": np.array(limit, np.int64)}

    # from 1e20: iteration 0 gives 1e30, iteration 1 overflows; with limit 0 the body's condition
    # (0 < 0) is False after iteration 0, so iteration 1 never runs
    assert run(counted_loop(5), "count_loop", known(1e20, True, 5)).iteration == 1
    assert run(counted_loop(0), "count_loop", known(1e20, True, 0)) == NestedOrigin(
        attribute="body", note="no iteration replayed alone produced NaN/Inf")
    assert run(counted_loop(1), "count_loop", known(1e20, True, 1)).iteration == 1
    # a false initial condition runs no iteration at all, even one that would overflow at once
    assert run(counted_loop(5), "count_loop", known(1e30, False, 5)) == NestedOrigin(
        attribute="body", note="no iteration replayed alone produced NaN/Inf")
    assert run(counted_loop(5), "count_loop", known(1e30, True, 5)).iteration == 0


def two_carried() -> onnx.ModelProto:
    """Loop 'pair_loop' carrying (a, b): a_out = a * b, b_out = b + b. From a = 1, b = 1e9:
    a = 1e9, 2e18, 8e27, 6.4e37 after iterations 0-3 (b = 2e9, 4e9, 8e9, 1.6e10); iteration 4
    multiplies 6.4e37 by 1.6e10: Inf."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_id"),
         helper.make_node("Mul", ["a_in", "b_in"], ["a_out"], name="mul_ab"),
         helper.make_node("Add", ["b_in", "b_in"], ["b_out"], name="double_b")],
        "pair_body", [vi("i", [], I64), vi("cond_in", [], B), vi("a_in", [1, 4]), vi("b_in", [1, 4])],
        [vi("cond_out", [], B), vi("a_out", [1, 4]), vi("b_out", [1, 4])])
    nodes = [helper.make_node("Loop", ["trips", "", "a0", "b0"], ["a_final", "b_final"], name="pair_loop", body=body)]
    return make_model(nodes, [vi("a0", [1, 4]), vi("b0", [1, 4])], [vi("a_final", [1, 4])],
                      [init("trips", np.array(10, np.int64))])


def test_each_carried_value_is_fed_back_to_its_own_input():
    known = {"trips": np.array(10, np.int64), "a0": np.ones((1, 4), np.float32),
             "b0": np.full((1, 4), 1e9, np.float32)}
    found = run(two_carried(), "pair_loop", known)
    assert (found.node, found.op_type, found.iteration) == ("mul_ab", "Mul", 4)
    b = np.float32(1.6e10)
    a = float(np.float32(1e9) * np.float32(2e9) * np.float32(4e9) * np.float32(8e9))
    assert [(s.name, s.min, s.source) for s in found.inputs] == [("a_in", a, "input"), ("b_in", float(b), "input")]


def test_the_if_branch_its_condition_chose():
    x1 = np.array([[1, 2, 3, 4]], np.float32)
    known = {"cond": np.array(True), "x1": x1, "zero": np.zeros((1, 4), np.float32)}
    assert run(nm.if_model(), "branch_if", known) == NestedOrigin(
        attribute="then_branch", node="div_then", op_type="Div",
        hints=[Hint("div-by-zero", "division by zero: divisor 'zero' has 4 zero(s) of 4")],
        inputs=[stats("x1", x1, min=1.0, max=4.0, source="input"),
                stats("zero", x1, zeros=4, min=0.0, max=0.0, source="input")])
    known["cond"] = np.array([False])
    assert run(nm.if_model(), "branch_if", known) == NestedOrigin(
        attribute="else_branch", note="the branch replayed alone produced no NaN/Inf")
    del known["cond"]
    assert run(nm.if_model(), "branch_if", known) == NestedOrigin(
        attribute="then_branch/else_branch", note="the condition's value is not available")


def test_a_branch_sees_the_float_attributes_of_its_nodes():
    """epsilon=0 inside the branch (a float attribute) is what explains the NaN: zero variance."""
    then_body = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["t"], name="bn_then", epsilon=0.0)],
        "then_g", [], [vi("t", [1, 2, 1, 1])])
    else_body = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="id_else")], "else_g", [],
                                  [vi("e", [1, 2, 1, 1])])
    model = make_model([helper.make_node("If", ["cond"], ["y"], name="bn_if", then_branch=then_body,
                                         else_branch=else_body)],
                       [vi("x", [1, 2, 1, 1]), vi("cond", [], B)], [vi("y", [1, 2, 1, 1])], opset=17)
    ones, zero_one = np.ones(2, np.float32), np.array([0.0, 1.0], np.float32)
    known = {"cond": np.array(True), "x": np.zeros((1, 2, 1, 1), np.float32), "s": ones, "b": ones,
             "mean": np.zeros(2, np.float32), "var": zero_one}
    found = run(model, "bn_if", known)
    assert (found.attribute, found.node, found.op_type) == ("then_branch", "bn_then", "BatchNormalization")
    assert found.hints == [Hint("zero-variance", "variance 'var' has 1 zero(s) and epsilon is 0: (x - mean) / sqrt(0)")]


def test_other_nodes_and_bodies_that_cannot_run_get_a_note():
    assert run(nm.if_model(), "relu", {}) == NestedOrigin(
        attribute="body", note="Relu bodies are not searched; the node itself is reported")
    # the outer 'zero' the then_branch reads is unknown: the body model lacks an input, onnxruntime refuses it
    found = run(nm.if_model(), "branch_if", {"cond": np.array(True), "x1": np.ones((1, 4), np.float32)})
    assert found.attribute == "body" and found.node is None
    assert found.note.startswith("the body could not be replayed on its own (")


def test_inside_a_branch_of_several_nodes_with_its_own_weight():
    """then_branch: a = |x1| ('abs_then'), d = a / z with z a weight of the branch itself
    ('div_then'), t = Identity(d): the origin is the Div, fed a computed value and the outer x1."""
    then_body = helper.make_graph(
        [helper.make_node("Abs", ["x1"], ["a"], name="abs_then"), helper.make_node("Div", ["a", "z"], ["d"], name="div_then"),
         helper.make_node("Identity", ["d"], ["t_out"], name="id_then")],
        "then_g", [], [vi("t_out", [1, 4])], [init("z", np.array([[0.0, 1.0, 2.0, 4.0]], np.float32))])
    else_body = helper.make_graph([helper.make_node("Identity", ["x1"], ["e_out"], name="id_else")], "else_g", [],
                                  [vi("e_out", [1, 4])])
    model = make_model([helper.make_node("If", ["cond"], ["y"], name="deep_if", then_branch=then_body,
                                         else_branch=else_body)],
                       [vi("x1", [1, 4]), vi("cond", [], B)], [vi("y", [1, 4])], opset=17)
    x1 = np.array([[-2.0, 2.0, -4.0, 8.0]], np.float32)
    found = run(model, "deep_if", {"cond": np.array(True), "x1": x1})
    assert (found.attribute, found.node, found.op_type) == ("then_branch", "div_then", "Div")
    # a = [2, 2, 4, 8] (computed in the branch), z its own weight, one zero: 2 / 0 is Inf
    assert found.inputs == [stats("a", x1, min=2.0, max=8.0), stats("z", x1, zeros=1, min=0.0, max=4.0, source="initializer")]
    assert found.hints == [Hint("div-by-zero", "division by zero: divisor 'z' has 1 zero(s) of 4")]


def test_a_loop_with_a_condition_and_no_carried_value():
    """Loop 'log_loop' (trip count, condition, nothing carried): its body logs the outer x into a
    scan output; a false condition runs no iteration, a true one finds the Log at iteration 0."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_id"),
         helper.make_node("Log", ["x"], ["l"], name="log_body")],
        "log_body_g", [vi("i", [], I64), vi("cond_in", [], B)], [vi("cond_out", [], B), vi("l", [1, 4])])
    model = make_model([helper.make_node("Loop", ["trips", "c0"], ["l_all"], name="log_loop", body=body)],
                       [vi("x", [1, 4]), vi("c0", [], B)], [vi("l_all", None)], [init("trips", np.array(3, np.int64))])
    known = {"trips": np.array(3, np.int64), "x": nm.row(1, -1, 2, 3), "c0": np.array(False)}
    assert run(model, "log_loop", known) == NestedOrigin(attribute="body", note="no iteration replayed alone produced NaN/Inf")
    known["c0"] = np.array(True)
    found = run(model, "log_loop", known)
    assert (found.node, found.iteration, found.hints[0].rule) == ("log_body", 0, "log-nonpositive")


def masked_branches() -> onnx.ModelProto:
    """then_branch: Log(x) ('log_then', NaN for x < 0) masked by Where(IsNaN) before the output,
    then x / zero ('div_then', Inf) which reaches it; else_branch: the masked Log alone."""
    def masked(tag: str) -> list:
        return [helper.make_node("Log", ["x"], [f"l_{tag}"], name=f"log_{tag}"),
                helper.make_node("IsNaN", [f"l_{tag}"], [f"n_{tag}"], name=f"isnan_{tag}"),
                helper.make_node("Where", [f"n_{tag}", "zero", f"l_{tag}"], [f"w_{tag}"], name=f"where_{tag}")]

    then_body = helper.make_graph(
        masked("then") + [helper.make_node("Div", ["x", "zero"], ["d"], name="div_then"),
                          helper.make_node("Add", ["w_then", "d"], ["t_out"], name="add_then")],
        "then_g", [], [vi("t_out", [1, 4])])
    else_body = helper.make_graph(masked("else"), "else_g", [], [vi("w_else", [1, 4])])
    return make_model([helper.make_node("If", ["cond"], ["y"], name="masked_if", then_branch=then_body,
                                        else_branch=else_body)],
                      [vi("x", [1, 4]), vi("cond", [], B)], [vi("y", [1, 4])],
                      [init("zero", np.array(0.0, np.float32))], opset=17)


def test_the_body_origin_that_reaches_the_output_comes_before_a_masked_one():
    known = {"cond": np.array(True), "x": nm.row(-1, 2, 3, 4), "zero": np.array(0.0, np.float32)}
    assert run(masked_branches(), "masked_if", known).node == "div_then"
    # nothing reaches the else_branch's output: the masked Log is still named
    known["cond"] = np.array(False)
    found = run(masked_branches(), "masked_if", known)
    assert (found.attribute, found.node) == ("else_branch", "log_else")


def test_a_body_hint_that_needs_the_values_gets_them():
    """MatMul of [+Inf, -Inf] by ones sums +Inf and -Inf: only the values show both signs."""
    then_body = helper.make_graph([helper.make_node("MatMul", ["p", "q"], ["t_out"], name="matmul_then")],
                                  "then_g", [], [vi("t_out", [1, 1])])
    else_body = helper.make_graph([helper.make_node("Identity", ["q"], ["e_out"], name="id_else")], "else_g", [],
                                  [vi("e_out", [2, 1])])
    model = make_model([helper.make_node("If", ["cond"], ["y"], name="mm_if", then_branch=then_body,
                                         else_branch=else_body)],
                       [vi("p", [1, 2]), vi("q", [2, 1]), vi("cond", [], B)], [vi("y", None)], opset=17)
    found = run(model, "mm_if", {"cond": np.array(True), "p": np.array([[np.inf, -np.inf]], np.float32),
                                 "q": np.ones((2, 1), np.float32)})
    assert [h.rule for h in found.hints] == ["nonfinite-input", "inf-minus-inf"]
