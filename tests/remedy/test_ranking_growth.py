"""remedy/ranking: the isolated-error order interleaved with the error-growth order (issue 29: the zoo's
int8 GPT-2, whose attention Softmax has a small own error but the largest growth of accumulated error)."""
from __future__ import annotations

from types import SimpleNamespace

from onnx import TensorProto, helper

from inspector_cli.remedy.ranking import candidate_scores, error_growth, interleave, reach


def _chain():
    """x -> mm (MatMul) -> sm (Softmax) -> out (MatMul); QDQ copy: every tensor through Q/DQ."""
    def graph(nodes):
        return helper.make_model(helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
            [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1, 0, 0, 1])]))
    fp32 = graph([helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
                  helper.make_node("Softmax", ["a"], ["b"], name="sm"),
                  helper.make_node("MatMul", ["b", "w"], ["y"], name="out")])
    qdq = graph([helper.make_node("MatMul", ["x", "w"], ["a_pre"], name="mm"),
                 helper.make_node("QuantizeLinear", ["a_pre", "s", "z"], ["a_q"], name="q1"),
                 helper.make_node("DequantizeLinear", ["a_q", "s", "z"], ["a"], name="dq1"),
                 helper.make_node("Softmax", ["a"], ["b_pre"], name="sm"),
                 helper.make_node("QuantizeLinear", ["b_pre", "s", "z"], ["b_q"], name="q2"),
                 helper.make_node("DequantizeLinear", ["b_q", "s", "z"], ["b"], name="dq2"),
                 helper.make_node("MatMul", ["b", "w"], ["y"], name="out")])
    return fp32, qdq


def _row(name, name_b, accumulated_cos, isolated_cos):
    return SimpleNamespace(name=name, name_b=name_b, dataset={"cosine": accumulated_cos},
                           isolated={"cosine": isolated_cos})


def test_growth_is_accumulated_error_over_the_nearest_paired_ancestor():
    fp32, _ = _chain()
    rows = [_row("a", "a", 0.9999, 0.9999), _row("b", "b", 0.96, 0.99996), _row("y", "y", 0.95, 0.9998)]
    growth = error_growth(fp32, rows)
    # a: 1e-4 over the input (no error); b: 0.04 - 1e-4; y: 0.05 - 0.04
    assert abs(growth["a"] - 1e-4) < 1e-12 and abs(growth["b"] - 0.0399) < 1e-12 and abs(growth["y"] - 0.01) < 1e-12


def test_the_amplifying_softmax_is_measured_second_not_last():
    fp32, qdq = _chain()
    rows = [_row("a", "a", 0.9999, 0.9999), _row("b", "b", 0.96, 0.99996), _row("y", "y", 0.95, 0.9998)]
    scores = candidate_scores(fp32, qdq, rows)
    order = sorted(scores, key=lambda n: -scores[n])
    # isolation alone: out (2e-4), mm (1e-4), sm (4e-5) - the Softmax last; growth puts it first
    assert order == ["out", "sm", "mm"]


def test_interleave_keeps_each_node_once():
    assert interleave(["a", "b", "c"], ["c", "a", "d"]) == ["a", "c", "b", "d"]


def test_reach_scales_own_error_by_what_survives_to_the_outputs():
    # a (inside): own 1.5e-4, accumulated 3e-3; y (the output): own 1.1e-4, accumulated 6e-4 = the
    # output error. reach(a) = 1.5e-4 * 6e-4 / 3e-3 = 3e-5; reach(y) = 1.1e-4 * 1 (hand-computed)
    fp32, _ = _chain()
    rows = [_row("a", "a", 1 - 3e-3, 1 - 1.5e-4), _row("y", "y", 1 - 6e-4, 1 - 1.1e-4)]
    scores = reach(fp32, rows)
    assert abs(scores["a"] - 3e-5) < 1e-9 and abs(scores["y"] - 1.1e-4) < 1e-9


def test_the_output_layer_is_measured_before_deeper_layers_with_a_larger_own_error():
    # the zoo's int8 MobileNetV2 in small: own error mm 1.5e-4 > sm 1.2e-4 > out 1.1e-4; growth mm 2.9e-3,
    # sm 1e-4, out < 0 (the error shrinks towards the output): both put out last. reach: mm 1.5e-4 *
    # 6e-4 / 2.9e-3 = 3.1e-5, sm 1.2e-4 * 0.2 = 2.4e-5, out 1.1e-4 * 1: out first, so it is measured second
    fp32, qdq = _chain()
    rows = [_row("a", "a", 1 - 2.9e-3, 1 - 1.5e-4), _row("b", "b", 1 - 3e-3, 1 - 1.2e-4),
            _row("y", "y", 1 - 6e-4, 1 - 1.1e-4)]
    scores = candidate_scores(fp32, qdq, rows)
    assert sorted(scores, key=lambda n: -scores[n]) == ["mm", "out", "sm"]


def _layernorm_tail():
    """x -> var (ReduceMean of x*x) -> ve (Add eps) -> sd (Sqrt) -> y = x / sd: a decomposed LayerNorm's
    division. QDQ copy: var, ve and y through Q/DQ (the Sqrt and Div are not quantised)."""
    def graph(nodes, inits):
        return helper.make_model(helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], inits))
    eps = [helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])]
    fp32 = graph([helper.make_node("Mul", ["x", "x"], ["xx"], name="sq"),
                  helper.make_node("ReduceMean", ["xx"], ["var"], name="mean"),
                  helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
                  helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
                  helper.make_node("Div", ["x", "sd"], ["y"], name="div")], eps)
    qdq = graph([helper.make_node("Mul", ["x", "x"], ["xx"], name="sq"),
                 helper.make_node("ReduceMean", ["xx"], ["var_pre"], name="mean"),
                 helper.make_node("QuantizeLinear", ["var_pre", "s", "z"], ["var_q"], name="q1"),
                 helper.make_node("DequantizeLinear", ["var_q", "s", "z"], ["var"], name="dq1"),
                 helper.make_node("Add", ["var", "eps"], ["ve_pre"], name="add_eps"),
                 helper.make_node("QuantizeLinear", ["ve_pre", "s", "z"], ["ve_q"], name="q2"),
                 helper.make_node("DequantizeLinear", ["ve_q", "s", "z"], ["ve"], name="dq2"),
                 helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
                 helper.make_node("Div", ["x", "sd"], ["y_pre"], name="div"),
                 helper.make_node("QuantizeLinear", ["y_pre", "s", "z"], ["y_q"], name="q3"),
                 helper.make_node("DequantizeLinear", ["y_q", "s", "z"], ["y"], name="dq3")], eps)
    return fp32, qdq


def test_the_quantiser_a_division_amplifies_is_measured_right_after_the_division():
    """The zoo's int8 wav2vec2 in small (issue 29): var + eps's quantiser rounds small variances to zero; its
    own error is tiny and its accumulated error lower than the variance's (growth < 0), and the error grows
    at the Div (accumulated 0.998 -> 0.54). By growth alone the Add comes last (div, mean, add_eps); with
    growth sources the Div's nearest paired ancestor ve (x is an input) follows it, so its producer add_eps
    is measured second. Hand-computed growth: var 0.0047, ve 0.00185 - 0.0047 < 0, y 0.46 - 0.00185."""
    from inspector_cli.remedy.ranking import growth_order

    fp32, qdq = _layernorm_tail()
    rows = [_row("var", "var", 0.9953, 0.9999), _row("ve", "ve", 0.99815, 0.999995), _row("y", "y", 0.54, 0.99999)]
    growth = error_growth(fp32, rows)
    assert abs(growth["y"] - (0.46 - 0.00185)) < 1e-9 and growth["ve"] < 0 < growth["var"]
    assert sorted(growth, key=lambda t: -growth[t]) == ["y", "var", "ve"]
    assert growth_order(fp32, qdq, rows) == ["div", "add_eps", "mean"]
