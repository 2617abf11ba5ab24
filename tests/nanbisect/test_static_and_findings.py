"""The static pass (`static.py`: weights and Constants already holding NaN/Inf, weights beyond fp16)
and the findings built from a run (`findings.py`): exact issues, rule ids, severities and messages
(issue 15, mutation testing of static.py and findings.py)."""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.nanbisect.batch import Summary
from inspector_cli.nanbisect.findings import RULES, build_findings
from inspector_cli.nanbisect.static import fp16_unsafe_weights, nonfinite_weights
from inspector_cli.results.base import Finding, Severity
from inspector_cli.results.nan_bisect import Group, WeightIssue

from ..fixtures.helpers import init, make_model, vi

NAN, INF = np.nan, np.inf


def weights_model() -> ModelGraph:
    """w (an initializer with a NaN) read by 'mul'; Constants: 'c_inf' (two Inf, read by 'add'),
    'c_ok' (finite), 'c_int' (integers), 'c_scalar' (value_float), 'c_dead' (NaN, read by nobody)."""
    def constant(name: str, out: str, **value) -> object:
        return helper.make_node("Constant", [], [out], name=name, **value)

    nodes = [
        constant("c_inf", "ci", value=numpy_helper.from_array(np.array([1.0, INF, -INF], np.float32))),
        constant("c_ok", "co", value=numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32))),
        constant("c_int", "cn", value=numpy_helper.from_array(np.array([1, 2, 3], np.int64))),
        constant("c_scalar", "cs", value_float=2.0),
        constant("c_dead", "cd", value=numpy_helper.from_array(np.array([NAN], np.float32))),
        helper.make_node("Mul", ["x", "w"], ["m"], name="mul"),
        helper.make_node("Add", ["m", "ci"], ["a"], name="add"),
        helper.make_node("Add", ["a", "co"], ["b"], name="add_ok"),
        helper.make_node("Mul", ["b", "cs"], ["y"], name="scale"),
    ]
    model = make_model(nodes, [vi("x", [3])], [vi("y", [3])],
                       [init("w", np.array([NAN, 1.0, 2.0], np.float32)), init("v", np.array([7e4, -8e4, NAN], np.float32)),
                        init("n", np.array([10 ** 6], np.int64)), init("e", np.zeros(0, np.float32)),
                        init("edge", np.array([65504.0, -65504.0], np.float32)), init("allnan", np.array([NAN], np.float32))])
    return ModelGraph.from_proto(model)


def test_weights_and_constants_holding_nan_or_inf():
    issues = nonfinite_weights(weights_model())
    assert issues == [
        WeightIssue(tensor="w", nan=1, inf=0, size=3, consumers=["mul"]),
        WeightIssue(tensor="v", nan=1, inf=0, size=3, consumers=[]),
        WeightIssue(tensor="allnan", nan=1, inf=0, size=1, consumers=[]),
        WeightIssue(tensor="ci", nan=0, inf=2, size=3, consumers=["add"]),
        WeightIssue(tensor="cd", nan=1, inf=0, size=1, consumers=[]),
    ]


def test_weights_beyond_the_fp16_range():
    # v: |-8e4| is the largest finite magnitude (its NaN ignored); 65504 itself fits; integers,
    # empty and all-NaN weights have nothing to convert
    assert fp16_unsafe_weights(weights_model()) == [
        "weight 'v' holds values up to |x| = 80000, beyond the fp16 range (65504): it becomes Inf when converted"]


def test_findings_of_the_static_pass_and_of_each_group():
    assert RULES == {"static": "MI901", "origin": "MI902", "masked": "MI903", "fp16-overflow": "MI904",
                     "fp16-underflow": "MI905", "error": "MI906", "mask": "MI907", "empty-reduction": "MI908"}
    many = [f"n{i}" for i in range(6)]
    static = [WeightIssue("w", 1, 0, 3, ["mul"]), WeightIssue("v", 0, 2, 8, many), WeightIssue("u", 1, 1, 2, [])]
    groups = [
        Group(node="log", op_type="Log", kind="origin", samples=3, examples=["a", "b", "c", "d"], hint="h1",
              message="NaN born at log"),
        Group(node="sq", op_type="Sqrt", kind="masked", samples=1, examples=["a"], message="masked at sq"),
        Group(node="up", op_type="Mul", kind="fp16-overflow", samples=2, examples=["a", "b"], message="over"),
        Group(node="t", op_type="Mul", kind="fp16-underflow", samples=1, examples=["c"], message="under"),
        Group(node="", op_type="", kind="error", samples=2, examples=["e1", "e2"], message="bad file"),
        Group(node="z", op_type="Div", kind="other", samples=1, examples=["a"], message="m"),
    ]
    findings = build_findings(static, groups, Summary())
    hint = "re-export the model from a healthy checkpoint"
    assert findings[:3] == [
        Finding(rule="MI901", severity=Severity.ERROR, tensor="w", node="mul", hint=hint,
                message="weight 'w' holds 1 NaN and 0 Inf of 3 values; read by mul", data={"consumers": ["mul"]}),
        Finding(rule="MI901", severity=Severity.ERROR, tensor="v", node="n0", hint=hint,
                message="weight 'v' holds 0 NaN and 2 Inf of 8 values; read by n0, n1, n2, n3, n4 ...",
                data={"consumers": many}),
        Finding(rule="MI901", severity=Severity.ERROR, tensor="u", node=None, hint=hint,
                message="weight 'u' holds 1 NaN and 1 Inf of 2 values; read by no node", data={"consumers": []}),
    ]
    assert findings[3] == Finding(rule="MI902", severity=Severity.ERROR, node="log", hint="h1",
                                  message="NaN born at log [3 sample(s), e.g. a, b, c]",
                                  data={"samples": 3, "examples": ["a", "b", "c", "d"], "kind": "origin"})
    assert [(f.rule, f.severity, f.node, f.message) for f in findings[4:]] == [
        ("MI903", Severity.WARNING, "sq", "masked at sq [1 sample(s), e.g. a]"),
        ("MI904", Severity.ERROR, "up", "over [2 sample(s), e.g. a, b]"),
        ("MI905", Severity.ERROR, "t", "under [1 sample(s), e.g. c]"),
        ("MI906", Severity.ERROR, None, "2 sample(s) could not be analysed (e.g. e1, e2): bad file"),
        ("MI902", Severity.ERROR, "z", "m [1 sample(s), e.g. a]"),  # an unknown kind is an origin
    ]
    assert [f.tensor for f in findings[3:]] == [None] * 6
    n = build_findings([WeightIssue("w", 1, 0, 3, [f"n{i}" for i in range(5)])], [], Summary())
    assert n[0].message.endswith("read by n0, n1, n2, n3, n4")  # five readers: all named, no "..."


def test_every_weight_is_checked_for_fp16_after_ones_it_skips():
    """Integer, empty and all-NaN weights come first here: the big one after them is still found."""
    model = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [vi("x", [1])], [vi("y", [1])],
                       [init("n", np.array([10 ** 6], np.int64)), init("e", np.zeros(0, np.float32)),
                        init("allnan", np.array([NAN], np.float32)), init("big", np.array([1e5], np.float32))])
    assert fp16_unsafe_weights(ModelGraph.from_proto(model)) == [
        "weight 'big' holds values up to |x| = 100000, beyond the fp16 range (65504): it becomes Inf when converted"]
