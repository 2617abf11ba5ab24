"""Every root-cause hint, each on a model whose origin and cause are known."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from inspector_cli.nanbisect.config import NanBisectConfig
from inspector_cli.workflows.nan_bisect import nan_bisect
from inspector_cli.nanbisect.rootcause import hints_for
from inspector_cli.results.nan_bisect import TensorStats

from ..fixtures import nan_models as nm

H = TensorProto.FLOAT16
INF = np.inf


def origin_of(tmp_path, model, feeds):
    path, data = nm.write(tmp_path, model, [feeds])
    result = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),)))
    assert result.exit_code == 1 and result.nonfinite == 1
    return result.records[0].origin


CASES = [
    # (id, model, feeds, expected rule, words the message must contain)
    ("div", lambda: nm.binary("Div", nm.row(1, 0, 2, 4)), {"x": nm.row(1, 2, 3, 4)}, "div-by-zero",
     "divisor 'w' has 1 zero(s)"),
    ("reciprocal", lambda: nm.unary("Reciprocal"), {"x": nm.row(1, 0, 2, 4)}, "div-by-zero", "reciprocal of zero"),
    ("log-zero", lambda: nm.unary("Log"), {"x": nm.row(1, 0, 2, 4)}, "log-nonpositive", "1 zero(s) (-Inf)"),
    ("log-negative", lambda: nm.unary("Log"), {"x": nm.row(1, -3, 2, 4)}, "log-nonpositive", "1 negative value(s)"),
    ("sqrt", lambda: nm.unary("Sqrt"), {"x": nm.row(1, -3, 2, 4)}, "sqrt-negative", "min -3"),
    ("pow", lambda: nm.binary("Pow", np.array(0.5, np.float32)), {"x": nm.row(1, -3, 2, 4)}, "pow-negative",
     "non-integer exponent"),
    ("exp-fp32", lambda: nm.unary("Exp"), {"x": nm.row(1, 89, 2, 4)}, "exp-overflow", "above 88.72"),
    ("exp-fp16", lambda: nm.unary("Exp", H), {"x": nm.row(1, 11.5, 2, 4, dtype=np.float16)}, "exp-overflow",
     "above 11.09"),
    ("fp16-overflow", lambda: nm.binary("Mul", nm.row(300, 1, 1, 1, dtype=np.float16), H),
     {"x": nm.row(300, 2, 3, 4, dtype=np.float16)}, "fp16-overflow", "exceeds 65504"),
    ("zero-times-inf", lambda: nm.binary("Mul", nm.row(INF, 1, 1, 1)), {"x": nm.row(0, 2, 3, 4)}, "zero-times-inf",
     "'x' holds zeros"),
    ("zero-variance", nm.batchnorm_zero_var, {"x": np.ones((1, 2, 2, 2), np.float32)}, "zero-variance",
     "epsilon is 0"),
    ("corrupted-weight", lambda: nm.binary("Add", nm.row(1, np.nan, 1, 1)), {"x": nm.row(1, 2, 3, 4)},
     "corrupted-weight", "holds 1 NaN and 0 Inf"),
]


@pytest.mark.parametrize("build,feeds,rule,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hint(tmp_path, build, feeds, rule, words):
    origin = origin_of(tmp_path, build(), feeds)
    assert origin.node == "target"
    rules = [h.rule for h in origin.hints]
    assert rule in rules, rules
    assert words in next(h.message for h in origin.hints if h.rule == rule)


def test_inf_minus_inf_where_the_inf_becomes_nan(tmp_path):
    origin = origin_of(tmp_path, nm.inf_then_nan(), {"x": nm.row(1, 2, 10, 3)})
    assert origin.node == "exp" and origin.nan_birth.node == "sub"
    assert origin.nan_birth.hints[0].rule == "inf-minus-inf"
    assert "both 'r' and 'r' hold Inf" in origin.nan_birth.hints[0].message


def test_a_single_signed_inf_in_a_product_is_not_called_inf_minus_inf():
    """+Inf weights times non-negative activations: 0 * Inf explains the NaN, Inf - Inf cannot."""
    weight = TensorStats("w", "float32", [2, 2], 4, inf=1, min=-1.0, max=1.0, source="initializer")
    act = TensorStats("a", "float32", [1, 2], 2, zeros=1, min=0.0, max=3.0)
    out = TensorStats("y", "float32", [1, 2], 2, nan=1, inf=1)
    rules = [h.rule for h in hints_for("MatMul", [act, weight], [out], {},
                                       {"w": np.array([[np.inf, 1], [0, 1]], np.float32)})]
    assert rules == ["corrupted-weight", "zero-times-inf"]
    mixed = TensorStats("a", "float32", [1, 2], 2, negatives=1, min=-2.0, max=3.0)
    rules = [h.rule for h in hints_for("MatMul", [mixed, weight], [out], {},
                                       {"w": np.array([[np.inf, 1], [0, 1]], np.float32)})]
    assert "inf-minus-inf" in rules


def test_no_rule_matches_says_so():
    out = TensorStats("y", "float32", [1], 1, nan=1)
    hints = hints_for("Erf", [TensorStats("x", "float32", [1], 1, min=0.0, max=1.0)], [out], {})
    assert [h.rule for h in hints] == ["unexplained"]


@pytest.mark.parametrize("all_origins", [False, True], ids=["layered", "full-scan"])
def test_nan_already_in_the_input_is_the_origin_not_its_first_consumer(tmp_path, all_origins):
    # issue 15 item 17: the headline said "first born at target (Relu)"; the model made none of it
    path, data = nm.write(tmp_path, nm.unary("Relu"), [{"x": nm.row(1, np.nan, np.inf, 4)}, {"x": nm.row(1, 2, 3, 4)}])
    result = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), all_origins=all_origins))
    record = result.records[0]
    assert (record.origin.node, record.origin.op_type, record.origin.position) == ("x", "(input)", -1)
    assert record.strategy.startswith("full-scan" if all_origins else "layered")
    assert [(s.name, s.nan, s.inf, s.source) for s in record.origin.outputs] == [("x", 1, 1, "input")]
    assert record.origin.hints[0].rule == "nonfinite-input"
    assert record.origin.hints[0].message == ("input 'x' of sample x_0000.npz already holds 1 NaN and 1 Inf value(s) "
                                              "(first read by target (Relu)): the model did not create them")
    assert [(g.node, g.op_type, g.samples) for g in result.groups] == [("x", "(input)", 1)]
    assert result.summary() == "FOUND: 1 sample(s) with NaN/Inf outputs, already in input 'x' in 1 of them (2/2 sample(s) scanned)"


def test_nan_born_in_the_model_after_a_finite_input_keeps_its_node(tmp_path):
    # the input rule must not swallow real origins: finite input, Log of a negative
    path, data = nm.write(tmp_path, nm.unary("Log"), [{"x": nm.row(1, -3, 2, 4)}])
    record = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),))).records[0]
    assert (record.origin.node, record.origin.op_type) == ("target", "Log")
