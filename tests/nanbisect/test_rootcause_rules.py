"""Each root-cause rule on hand-made statistics: the exact hints, their order, and the boundaries
where a rule stops applying (issue 15, mutation testing of rootcause.py)."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.nanbisect.rootcause import EXP_LIMIT, RANGE, hints_for
from inspector_cli.results.nan_bisect import Hint, TensorStats

NAN_OUT = [TensorStats("y", "float32", [4], 4, nan=1)]
UNEXPLAINED = "produced NaN/Inf from finite inputs; no rule matched (see the input statistics, or replay it with --repro)"


def stats(name: str, dtype: str = "float32", **kw) -> TensorStats:
    return TensorStats(name, dtype, [4], 4, **kw)


def rules(op, ins, outs=NAN_OUT, attributes=None, values=None):
    return [(h.rule, h.message) for h in hints_for(op, ins, outs, attributes or {}, values)]


def test_the_limits_are_the_logs_of_each_float_range():
    assert round(EXP_LIMIT["float16"], 4) == 11.0899  # log(65504) = 11.08987
    assert round(EXP_LIMIT["float32"], 4) == 88.7228
    assert round(EXP_LIMIT["float64"], 2) == 709.78
    assert RANGE == {"float16": 65504.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def test_a_constant_node_and_corrupted_or_nonfinite_sources():
    assert rules("Constant", []) == [("corrupted-weight", "the Constant node's value itself holds NaN/Inf")]
    assert rules("Add", [stats("x"), stats("w", nan=1, source="initializer")]) == [(
        "corrupted-weight", "weight 'w' holds 1 NaN and 0 Inf values (of 4): "
                            "the model file is corrupted or was exported from a diverged checkpoint")]
    assert rules("Where", [stats("w", inf=2, source="initializer")]) == [(
        "corrupted-weight", "weight 'w' holds 0 NaN and 2 Inf values (of 4): "
                            "an intended -Inf mask, or a weight corrupted or overflowed on export")]
    assert rules("Relu", [stats("x", nan=3, inf=1, source="input")]) == [
        ("nonfinite-input", "input 'x' of the sample already holds 3 NaN and 1 Inf values")]
    # a computed input holding NaN is no source; the second corrupted weight adds no second hint
    assert rules("Relu", [stats("t", nan=1)]) == [("unexplained", "Relu " + UNEXPLAINED)]
    assert rules("Concat", [stats("a", nan=1, source="initializer"), stats("b", nan=2, source="initializer")]) == [
        ("corrupted-weight", "weight 'a' holds 1 NaN and 0 Inf values (of 4): "
                             "the model file is corrupted or was exported from a diverged checkpoint")]


def test_division():
    a, b = stats("a", min=1.0, max=2.0), stats("b", zeros=1, min=0.0, max=2.0)
    assert rules("Div", [a, b]) == [("div-by-zero", "division by zero: divisor 'b' has 1 zero(s) of 4")]
    assert rules("Div", [stats("a", zeros=2), b]) == [
        ("div-by-zero", "division by zero: divisor 'b' has 1 zero(s) of 4 (0/0 gives NaN)")]
    assert rules("Div", [stats("a", inf=1), stats("b", inf=1)]) == [
        ("inf-div-inf", "Inf / Inf: both 'a' and 'b' hold Inf")]
    # Inf over a zero is a division by zero, not Inf / Inf
    assert rules("Div", [stats("a", inf=1), b])[0][0] == "div-by-zero"
    assert rules("Div", [a, stats("b", inf=1, zeros=2)]) == [
        ("div-by-zero", "division by zero: divisor 'b' has 2 zero(s) of 4")]
    assert rules("Div", [b]) == [("unexplained", "Div " + UNEXPLAINED)]  # one input: nothing to divide by
    assert rules("Reciprocal", [stats("x", zeros=2)]) == [("div-by-zero", "reciprocal of zero: 'x' has 2 zero(s) of 4")]
    assert rules("Reciprocal", [stats("x", min=1.0, max=1.0)]) == [("unexplained", "Reciprocal " + UNEXPLAINED)]
    assert rules("Mul", [stats("a"), b]) == [("unexplained", "Mul " + UNEXPLAINED)]


def test_domains_of_log_sqrt_and_pow():
    assert rules("Log", [stats("x", zeros=1, negatives=2, min=-3.0)]) == [
        ("log-nonpositive", "Log of values <= 0: 'x' has 2 negative value(s) (NaN) and 1 zero(s) (-Inf); min -3")]
    assert rules("Log", [stats("x", zeros=1, min=0.0)]) == [
        ("log-nonpositive", "Log of values <= 0: 'x' has 1 zero(s) (-Inf); min 0")]
    assert rules("Log", [stats("x", negatives=1, min=-0.25)]) == [
        ("log-nonpositive", "Log of values <= 0: 'x' has 1 negative value(s) (NaN); min -0.25")]
    assert rules("Log", [stats("x", min=0.5)])[0][0] == "unexplained"
    assert rules("Sqrt", [stats("x", negatives=1, min=-0.5)]) == [
        ("sqrt-negative", "Sqrt of negative values: 'x' has 1 negative value(s), min -0.5")]
    assert rules("Sqrt", [stats("x", zeros=1, min=0.0)])[0][0] == "unexplained"
    assert rules("Log", [])[0][0] == "unexplained"

    base, exponent = stats("x", negatives=1, min=-2.0, max=3.0), stats("e", min=0.5, max=0.5)
    negative_base = ("pow-negative", "Pow of negative base: 'x' has 1 negative value(s) raised to a non-integer "
                                     "exponent 'e'")
    assert rules("Pow", [base, exponent], values={"e": np.array(0.5, np.float32)}) == [negative_base]
    assert rules("Pow", [base, exponent]) == [negative_base]  # the exponent's values unknown: maybe fractional
    assert rules("Pow", [base, stats("e", min=1.0, max=2.0)], values={"e": np.array([1.0, 2.0])})[0][0] == "unexplained"
    assert rules("Pow", [base, exponent], values={"e": np.array([2.0, 0.5])}) == [negative_base]
    zero_base = stats("x", zeros=2, min=0.0, max=1.0)
    assert rules("Pow", [zero_base, stats("e", negatives=1, min=-1.0, max=-1.0)], values={"e": np.array(-1.0)}) == [
        ("div-by-zero", "Pow of zero to a negative exponent: 'x' has 2 zero(s)")]
    assert rules("Pow", [zero_base, stats("e", min=0.0, max=0.0)], values={"e": np.array(0.0)})[0][0] == "unexplained"
    assert rules("Pow", [zero_base, stats("e")], values={"e": np.array(0.0)})[0][0] == "unexplained"  # min unknown
    assert rules("Pow", [base])[0][0] == "unexplained"


@pytest.mark.parametrize("op,lo,hi,message", [
    ("Acos", -0.5, 1.5, "Acos of values outside [-1, 1]: 'x' spans [-0.5, 1.5]"),
    ("Asin", -1.5, 0.0, "Asin of values outside [-1, 1]: 'x' spans [-1.5, 0]"),
    ("Acosh", 0.5, 3.0, "Acosh of values below 1: min of 'x' is 0.5"),
    ("Acosh", -2.0, 3.0, "Acosh of values below 1: min of 'x' is -2"),
    ("Atanh", 0.0, 1.0, "Atanh of values outside (-1, 1): 'x' spans [0, 1]"),
    ("Atanh", -1.0, 0.5, "Atanh of values outside (-1, 1): 'x' spans [-1, 0.5]"),
])
def test_inverse_trigonometric_domains(op, lo, hi, message):
    assert rules(op, [stats("x", min=lo, max=hi)]) == [("domain", message)]


@pytest.mark.parametrize("op,lo,hi", [("Acos", -1.0, 1.0), ("Asin", -1.0, 1.0), ("Acosh", 1.0, 5.0),
                                      ("Atanh", -0.5, 0.5), ("Acos", None, None), ("Acosh", None, None)])
def test_inside_the_domain_no_domain_hint(op, lo, hi):
    assert rules(op, [stats("x", min=lo, max=hi)]) == [("unexplained", f"{op} " + UNEXPLAINED)]


def test_exp_overflow_per_dtype_and_op():
    assert rules("Exp", [stats("x", min=-1.0, max=89.0)]) == [
        ("exp-overflow", "Exp overflow: input 'x' reaches 89, above 88.72 (exp of it exceeds the float32 range)")]
    assert rules("Softplus", [stats("x", "float16", min=0.0, max=12.0)], [stats("y", "float16", inf=1)]) == [
        ("exp-overflow", "Softplus overflow: input 'x' reaches 12, above 11.09 (exp of it exceeds the float16 range)")]
    # Cosh and Sinh overflow on both sides: the larger magnitude counts
    assert rules("Cosh", [stats("x", min=-90.0, max=1.0)]) == [
        ("exp-overflow", "Cosh overflow: input 'x' reaches 90, above 88.72 (exp of it exceeds the float32 range)")]
    assert rules("Sinh", [stats("x", min=-1.0, max=95.0)])[0][1].startswith("Sinh overflow: input 'x' reaches 95,")
    # Exp of a large negative is 0, not an overflow; a float64 input has room up to 709.78
    assert rules("Exp", [stats("x", min=-90.0, max=1.0)])[0][0] == "unexplained"
    assert rules("Exp", [stats("x", "float64", min=0.0, max=89.0)], [])[0][0] == "unexplained"
    assert rules("Exp", [stats("x", "float64", min=0.0, max=710.0)], [])[0][1].endswith(
        "above 709.8 (exp of it exceeds the float64 range)")
    assert rules("Exp", [stats("x", "int32", min=0.0, max=100.0)], [])[0][0] == "unexplained"
    assert rules("Exp", [stats("x", min=None, max=None)], [])[0][0] == "unexplained"
    assert rules("Exp", [], [])[0][0] == "unexplained"
    assert rules("Tanh", [stats("x", min=0.0, max=100.0)], [])[0][0] == "unexplained"


def test_zero_variance_needs_epsilon_zero():
    x = stats("x", min=1.0, max=1.0)
    assert rules("LayerNormalization", [x, stats("g"), stats("b")], attributes={"epsilon": 0.0}) == [
        ("zero-variance", "epsilon is 0, so a constant slice of 'x' (variance 0) divides by zero")]
    assert rules("LayerNormalization", [x], attributes={})[0][0] == "unexplained"  # the default 1e-5
    assert rules("LayerNormalization", [x], attributes={"epsilon": 1e-12})[0][0] == "unexplained"
    assert rules("LayerNormalization", [], attributes={"epsilon": 0.0})[0][0] == "unexplained"
    bn = [x, stats("scale"), stats("bias"), stats("mean"), stats("var", zeros=2, min=0.0, max=1.0)]
    assert rules("BatchNormalization", bn, attributes={"epsilon": 0.0}) == [
        ("zero-variance", "variance 'var' has 2 zero(s) and epsilon is 0: (x - mean) / sqrt(0)")]
    bn[4] = stats("var", min=1.0, max=1.0)
    assert rules("BatchNormalization", bn, attributes={"epsilon": 0.0}) == [
        ("zero-variance", "epsilon is 0, so a constant slice of 'x' (variance 0) divides by zero")]
    assert rules("BatchNormalization", bn[:4] + [stats("var", zeros=1)], attributes={"epsilon": 1e-5})[0][0] == "unexplained"
    assert rules("Relu", [x], attributes={"epsilon": 0.0})[0][0] == "unexplained"


def test_zero_times_inf_and_inf_minus_inf():
    w, x = stats("w", inf=1, min=1.0, max=2.0), stats("x", zeros=1, min=0.0, max=3.0)
    assert rules("Mul", [x, w]) == [("zero-times-inf", "0 * Inf: 'w' holds Inf and 'x' holds zeros")]
    # the zeros of the tensor holding the Inf are not another factor's zeros
    assert rules("Mul", [stats("w", inf=1, zeros=1), stats("x", min=1.0, max=2.0)])[0][0] == "unexplained"
    assert rules("Add", [x, w])[0][0] == "unexplained"  # a sum of 0 and Inf is Inf
    # Sub: Inf - Inf needs two Inf inputs of the same sign (or signs unknown)
    a, b = stats("a", inf=1), stats("b", inf=2)
    both = ("inf-minus-inf", "Inf - Inf: both 'a' and 'b' hold Inf")
    assert rules("Sub", [a, b]) == [both]
    assert rules("Sub", [a, b], values={"a": np.array([np.inf, 1.0]), "b": np.array([np.inf, np.inf, 0.0])}) == [both]
    assert rules("Sub", [a, b], values={"a": np.array([np.inf]), "b": np.array([-np.inf, 0.0])})[0][0] == "unexplained"
    assert rules("Sub", [a, stats("b", min=1.0, max=1.0)])[0][0] == "unexplained"
    # Add: opposite signs, or two Inf inputs whose signs are unknown
    assert rules("Add", [a, b]) == [("inf-minus-inf", "Inf - Inf: Add adds values of opposite infinite sign "
                                                      "('a', 'b' hold Inf)")]
    assert rules("ReduceSum", [a], values={"a": np.array([np.inf, -np.inf, 1.0])}) == [
        ("inf-minus-inf", "Inf - Inf: ReduceSum adds values of opposite infinite sign ('a' hold Inf)")]
    assert rules("Add", [a, b], values={"a": np.array([np.inf]), "b": np.array([np.inf])})[0][0] == "unexplained"
    assert rules("ReduceSum", [a])[0][0] == "unexplained"  # one Inf input, signs unknown


def test_inf_minus_inf_in_a_sum_of_products():
    w = stats("w", inf=1, min=-1.0, max=1.0, source="computed")
    message = "Inf - Inf: MatMul sums products of the Inf in 'w' with values of both signs"
    assert rules("MatMul", [w, stats("a", min=1.0, max=3.0)], values={"w": np.array([np.inf, -np.inf])}) == [
        ("inf-minus-inf", message)]
    assert rules("MatMul", [w, stats("a", negatives=1, min=-2.0, max=3.0)]) == [("inf-minus-inf", message)]
    # all-negative or all-positive activations times one signed Inf: no opposite signs to cancel
    assert rules("MatMul", [w, stats("a", negatives=4, min=-2.0, max=-1.0)], values={"w": np.array([np.inf])})[0][0] == "unexplained"
    assert rules("MatMul", [w, stats("a", negatives=1, min=-2.0, max=0.0)])[0][0] == "unexplained"
    # integer operands are not counted as values of both signs
    assert rules("MatMul", [w, stats("a", "int32", negatives=1, min=-2.0, max=3.0)], values={"w": np.array([np.inf])})[0][0] == "unexplained"
    # the Inf tensor's own signs are the Inf's, not another operand's
    assert rules("Gemm", [stats("w", inf=1, negatives=1, min=-1.0, max=1.0), stats("a", min=1.0, max=2.0)],
                 values={"w": np.array([np.inf, -1.0, 1.0])})[0][0] == "unexplained"


def test_overflow_is_the_fallback_only():
    big = [stats("a", min=-3e20, max=1e20), stats("b", min=0.0, max=2e19), stats("i", "int64", min=-1e30, max=0.0)]
    assert rules("Mul", big, [stats("y", inf=2)]) == [
        ("overflow", "float32 overflow: the result exceeds 3.40282e+38 (inputs reach |x| = 3e+20)")]
    assert rules("Mul", [stats("a", "float16", min=0.0, max=300.0)], [stats("y", "float16", inf=1)]) == [
        ("fp16-overflow", "float16 overflow: the result exceeds 65504 (inputs reach |x| = 300)")]
    assert rules("Mul", [stats("i", "int64", min=0.0, max=9.0)], [stats("y", inf=1)]) == [
        ("overflow", "float32 overflow: the result exceeds 3.40282e+38 (inputs reach |x| = 0)")]
    assert rules("Mul", [stats("a", min=None, max=None)], [stats("y", inf=1)]) == [
        ("overflow", "float32 overflow: the result exceeds 3.40282e+38 (inputs reach |x| = 0)")]
    # no Inf produced, a non-finite input, an unknown dtype, no outputs: not an overflow
    assert rules("Mul", big, [stats("y", nan=1)])[0][0] == "unexplained"
    assert rules("Mul", [stats("a", nan=1, min=1.0, max=1e30)], [stats("y", inf=1)])[0][0] == "unexplained"
    assert rules("Mul", big, [stats("y", "bfloat16", inf=1)])[0][0] == "unexplained"
    assert rules("Mul", big, [])[0][0] == "unexplained"
    # an Inf output explained by a specific rule (Log of 0 gives -Inf) is not also called an overflow
    assert rules("Log", [stats("x", zeros=1, min=0.0)], [stats("y", inf=1)]) == [
        ("log-nonpositive", "Log of values <= 0: 'x' has 1 zero(s) (-Inf); min 0")]


def test_hints_come_most_specific_first_one_per_rule():
    hints = hints_for("Mul", [stats("w", inf=1, source="initializer"), stats("x", zeros=1, min=0.0, max=2.0)],
                      [stats("y", nan=1, inf=1)], {}, None)
    assert hints == [Hint("corrupted-weight", "weight 'w' holds 0 NaN and 1 Inf values (of 4): an intended -Inf "
                                              "mask, or a weight corrupted or overflowed on export"),
                     Hint("zero-times-inf", "0 * Inf: 'w' holds Inf and 'x' holds zeros")]
