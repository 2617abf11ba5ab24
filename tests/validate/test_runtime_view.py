"""validate speaks for the runtime it validates for (issue 41): where onnx's checker and onnxruntime
disagree, the finding says which accepts what and its level follows onnxruntime's session (`--strict`:
the checker's view); every checker finding names its tensor or node; the first checker message does not
hide the next one. Each test says what the code before did."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.results.base import Severity
from inspector_cli.validate.config import ValidateConfig
from inspector_cli.workflows.validate import validate_model

from ..fixtures.helpers import init, make_model, save, vi
from ..fixtures.subproc import assert_status, run_mi

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO


def _validate(path, strict=False):
    result = validate_model(path, ValidateConfig(**({"strict": True} if strict else {}), disable=("MI405",)))
    return result, [(f.rule, f.severity, f.node, f.tensor) for f in result.findings]


def _loads(path) -> bool:
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return True
    except Exception:  # onnxruntime's own error types
        return False


def _simplified_layernorm(tmp_path):
    """SimplifiedLayerNormalization in the default domain, as onnxruntime-genai's builder writes it: no ONNX
    operator, but onnxruntime registers a kernel for it there."""
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "w"], ["y"], name="norm", axis=-1, epsilon=1e-5)
    model = make_model([node], [vi("x", [1, 3, 4])], [vi("y", [1, 3, 4])], [init("w", np.ones(4, np.float32))])
    return save(model, tmp_path / "sln.onnx")


def test_operator_onnxruntime_registers_is_a_warning(tmp_path):
    """Before: MI205 error "is not an operator of ai.onnx opset 17", exit 1."""
    path = _simplified_layernorm(tmp_path)
    assert _loads(path)
    result, found = _validate(path)
    assert found == [("MI205", W, "norm", None)] and result.passed
    message = result.findings[0].message
    assert "onnxruntime registers its own kernel" in message and "onnxruntime loads the model" in message
    assert result.findings[0].data["onnxruntime"] == "loads"
    strict, found = _validate(path, strict=True)
    assert found == [("MI205", E, "norm", None)] and not strict.passed


def test_operator_nobody_registers_stays_an_error(tmp_path):
    model = make_model([helper.make_node("Relux", ["x"], ["y"], name="r")], [vi("x", [1, 4])], [vi("y", [1, 4])])
    result, found = _validate(save(model, tmp_path / "relux.onnx"))
    assert ("MI205", E, "r", None) in found and not result.passed


def _untyped_outputs(tmp_path, name="io.onnx", strip_weight=False):
    """x -> MatMul(w) -> Neg -> y, z: y has a type but no shape field, z no type at all (what
    onnx-graphsurgeon writes for tensors of unknown shape / type). `strip_weight`: w keeps its dims but not
    its data (a weight-stripped model)."""
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    if strip_weight:
        weight.ClearField("raw_data")
    y = onnx.ValueInfoProto(name="y")
    y.type.tensor_type.elem_type = TensorProto.FLOAT
    z = onnx.ValueInfoProto(name="z")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Neg", ["m"], ["y"], name="neg"),
             helper.make_node("Relu", ["m"], ["z"], name="relu")]
    return save(make_model(nodes, [vi("x", [2, 4])], [y, z], [weight]), tmp_path / name)


def test_outputs_without_shape_or_type_are_named_notes(tmp_path):
    """Before: one MI201 error "Field 'shape' of 'type' is required but missing." naming no tensor, exit 1."""
    path = _untyped_outputs(tmp_path)
    assert _loads(path)
    result, found = _validate(path)
    assert sorted(found) == [("MI201", I, None, "y"), ("MI201", I, None, "z")] and result.passed
    by_tensor = {f.tensor: f.message for f in result.findings}
    assert by_tensor["y"].startswith("graph output 'y' has no shape field")
    assert by_tensor["z"].startswith("graph output 'z' has no type field")
    strict, found = _validate(path, strict=True)
    assert sorted(found) == [("MI201", E, None, "y"), ("MI201", E, None, "z")] and not strict.passed


def test_the_first_checker_message_does_not_hide_the_real_one(tmp_path):
    """A weight-stripped model with an output without a shape field. Before: the only MI201 was the shape
    field's (no tensor named); the missing weight was never named by the checker."""
    path = _untyped_outputs(tmp_path, "stripped.onnx", strip_weight=True)
    assert not _loads(path)
    result, found = _validate(path)
    weight = [f for f in result.findings if f.rule == "MI201" and f.tensor == "w"]
    assert len(weight) == 1 and weight[0].severity == E
    assert "should contain one and only one value field" in weight[0].message
    assert "onnxruntime does not load the model" in weight[0].message
    assert ("MI201", I, None, "y") in found  # still a note: onnxruntime infers it whatever else is wrong
    assert not result.passed


def test_input_without_type_is_an_error_naming_it(tmp_path):
    """onnxruntime refuses a graph input of unknown type ("does not have type information"). Before: an
    MI201 naming no tensor."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [onnx.ValueInfoProto(name="x")],
                       [vi("y", [2])])
    path = save(model, tmp_path / "notype.onnx")
    assert not _loads(path)
    result, found = _validate(path)
    assert ("MI201", E, None, "x") in found and not result.passed


def _constant_with_wrong_rank(tmp_path):
    """A Constant of shape [1] whose value_info declares rank 0, as onnxruntime-genai's builder writes
    `/model/constants/INT64/[1]`; onnxruntime keeps the inferred shape and runs the model."""
    const = helper.make_node("Constant", [], ["c"], name="const", value=init("v", np.array([1], np.int64)))
    nodes = [const, helper.make_node("ReduceSum", ["x", "c"], ["s"], name="total", keepdims=1),
             helper.make_node("Sub", ["s", "c"], ["y"], name="less_one")]  # the builder's mask lengths
    model = make_model(nodes, [vi("x", [1, 2], TensorProto.INT64)], [vi("y", [1, 1], TensorProto.INT64)])
    model.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.INT64, []))
    return save(model, tmp_path / "rank.onnx")


def test_declared_rank_onnxruntime_overrides_is_a_warning(tmp_path):
    """Before: MI204 error, exit 1, on a model onnxruntime loads and runs."""
    path = _constant_with_wrong_rank(tmp_path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.ones((1, 2), np.int64)})[0].tolist() == [[1]]
    result, found = _validate(path)
    assert found == [("MI204", W, "const", "c")] and result.passed
    assert "(1) vs (0)" in result.findings[0].message and "onnxruntime loads the model" in result.findings[0].message
    _, found = _validate(path, strict=True)
    assert found == [("MI204", E, "const", "c")]


def test_user_severity_wins_over_the_runtime_view(tmp_path):
    path = _constant_with_wrong_rank(tmp_path)
    result = validate_model(path, ValidateConfig(severity=(("MI204", E),), disable=("MI405",)))
    assert [(f.rule, f.severity) for f in result.findings] == [("MI204", E)]


def test_attention_mask_fill_is_no_nonfinite_weight(tmp_path):
    """Where(keep, scores, -inf) -> Softmax: the -inf is a mask's fill (core/masks.py), as nan-bisect reads
    it. Before: MI407 error "holds 0 NaN and 1 Inf" (the zoo's quantize_dynamic decoders, where the mask
    constant became an initializer)."""
    nodes = [helper.make_node("Where", ["keep", "scores", "fill"], ["masked"], name="mask"),
             helper.make_node("Softmax", ["masked"], ["probs"], name="softmax", axis=-1)]
    model = make_model(nodes, [vi("keep", [1, 4], TensorProto.BOOL), vi("scores", [1, 4])], [vi("probs", [1, 4])],
                       [init("fill", np.array(-np.inf, np.float32))])
    result, found = _validate(save(model, tmp_path / "mask.onnx"))
    assert [f for f in found if f[0] == "MI407"] == [] and result.passed
    nan = make_model(nodes, [vi("keep", [1, 4], TensorProto.BOOL), vi("scores", [1, 4])], [vi("probs", [1, 4])],
                     [init("fill", np.array(np.nan, np.float32))])
    result, found = _validate(save(nan, tmp_path / "nan.onnx"))
    assert ("MI407", E, "mask", "fill") in found  # a NaN is never a mask's fill


@pytest.mark.parametrize("strict,code", [(False, 0), (True, 1)])
def test_exit_codes_on_a_real_process(tmp_path, strict, code):
    path = _simplified_layernorm(tmp_path)
    ran = run_mi(["validate", path, *(["--strict"] if strict else [])], cwd=tmp_path)
    assert_status(ran, code)


def test_a_function_body_onnx_cannot_infer_is_a_warning_when_onnxruntime_runs_it(tmp_path):
    """MeanVarianceNormalization (a function op): onnx 1.23's inference of its body fails ('One and only one of
    the attributes ... must be specified for a Constant node'), onnxruntime runs it. Before: MI203 error, exit
    1 (the conformance case node/test_mvn, validate's one false positive over 1,871 cases); with --strict the
    checker's view stays an error."""
    mvn = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn")
    model = make_model([mvn], [vi("x", [3, 3, 3, 1])], [vi("y", [3, 3, 3, 1])], opset=13)
    path = save(model, tmp_path / "mvn.onnx")
    x = np.arange(27, dtype=np.float32).reshape(3, 3, 3, 1)
    y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mean, std = x.mean(axis=(0, 2, 3), keepdims=True), x.std(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / std, atol=1e-5)
    result, found = _validate(path)
    assert [(r, s, n) for r, s, n, _t in found] == [("MI203", W, "mvn")] and result.passed
    _, found = _validate(path, strict=True)
    assert [(r, s) for r, s, _n, _t in found] == [("MI203", E)]
