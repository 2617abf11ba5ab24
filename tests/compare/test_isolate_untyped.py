"""`--isolate` where shape inference cannot type a cut tensor, or the cut is a model input's integers
(issue 14, the zoo: sklearn 40-50% isolated, gpt2like's renamed re-export 14 of 17).

Causes: (1) the isolation model declared each cut tensor with its inferred type, and onnx infers none
for the outputs of ai.onnx.ml ops (skl2onnx's Scaler): those layers were skipped. The type is known
from a run of the candidate (the arrays have one), which now supplies it. (2) A cut tensor that is an
Unsqueeze of an integer model input (an attention mask) was taken for "integers of the candidate's
own making" and skipped; its values are the input's, which the reference has exactly.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.core.graph import load_model
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, make_model, save, vi


def _scaler_model(weight_shift: float):  # type: ignore[no-untyped-def]
    """x[N,4] -> ai.onnx.ml Scaler -> s (untyped for onnx) -> MatMul w -> h -> Relu -> out[N,3]."""
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5
    w[0, 0] += weight_shift  # the candidate's MatMul differs: its own error
    nodes = [helper.make_node("Scaler", ["x"], ["s"], name="scaler", domain="ai.onnx.ml",
                              offset=[0.5, 0.0, -0.5, 1.0], scale=[2.0, 1.0, 0.5, 1.0]),
             helper.make_node("MatMul", ["s", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["out"], name="relu")]
    model = make_model(nodes, [vi("x", ["N", 4])], [vi("out", ["N", 3])], [init("w", w)])
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    return model


def test_layers_after_an_ml_op_are_isolated(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a = save(_scaler_model(0.0), tmp_path / "a.onnx")
    b = save(_scaler_model(0.25), tmp_path / "b.onnx")
    assert not load_model(b).tensor_info("s").elem_type  # the cause: inference cannot type it
    x = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, -1.0, 2.0, 0.5]], np.float32)
    save_samples([{"x": x}], tmp_path / "data")
    result = compare_models(a, b, CompareConfig(inputs=(str(tmp_path / "data"),),
                                                layers=LayerConfig(granularity="tensor", isolate=("all",))))
    rows = {row.name: row for row in result.layers.layers}
    assert result.layers.isolation["skipped"] == {} and set(result.layers.isolation["isolated"]) >= {"h", "out"}
    # h = scaled(x) @ w: the candidate's w[0,0] is 0.25 larger, so h[:, 0] differs by 0.25 * scaled(x)[:, 0]
    # = 0.25 * (x[:, 0] - 0.5) * 2 = [0.25, -0.25]; the inputs of h are identical, so that is its own error
    assert rows["h"].isolated["max_abs"] == pytest.approx(0.25, abs=1e-6)
    assert rows["h"].own_share == pytest.approx(1.0, abs=1e-6) and rows["h"].error_source == "own"
    assert rows["s"].isolated["max_abs"] == 0.0  # the Scaler itself is the same in both


def _masked_model(scale: float):  # type: ignore[no-untyped-def]
    """x[N,4] -> Mul(scale) -> r; mask[N,4] int64 -> Unsqueeze -> m[N,1,4] (an integer view of the input)
    -> Equal 0 -> Where(-9, r) -> out[N,1,4]: the attention-mask pattern of gpt2like."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["r"], name="mul"),
             helper.make_node("Unsqueeze", ["mask", "ax"], ["m"], name="unsq"),
             helper.make_node("Equal", ["m", "zero"], ["eq"], name="eq"),
             helper.make_node("Where", ["eq", "neg", "r"], ["out"], name="where")]
    inits = [init("k", np.array(scale, np.float32)), init("ax", np.array([1], np.int64)),
             init("zero", np.array(0, np.int64)), init("neg", np.array(-9.0, np.float32))]
    return make_model(nodes, [vi("x", ["N", 4]), vi("mask", ["N", 4], TensorProto.INT64)],
                      [vi("out", ["N", 1, 4])], inits)


def test_a_cut_on_an_integer_view_of_a_model_input_is_fed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a = save(_masked_model(1.0), tmp_path / "a.onnx")
    b = save(_masked_model(1.5), tmp_path / "b.onnx")
    x = np.array([[1.0, 2.0, -3.0, 4.0]], np.float32)
    save_samples([{"x": x, "mask": np.array([[1, 1, 0, 1]], np.int64)}], tmp_path / "data")
    result = compare_models(a, b, CompareConfig(inputs=(str(tmp_path / "data"),),
                                                layers=LayerConfig(granularity="tensor", isolate=("all",))))
    rows = {row.name: row for row in result.layers.layers}
    assert "out" in result.layers.isolation["isolated"], result.layers.isolation["skipped"]
    # out = where(mask == 0, -9, r): r = x (A) vs 1.5 x (B), so from A's r the candidate's Where gives
    # A's out exactly (the Mul's error is inherited): own error 0
    assert rows["out"].isolated["max_abs"] == 0.0 and rows["out"].error_source == "inherited"
    assert rows["out"].dataset["max_abs"] == pytest.approx(2.0)  # |1.5 - 1| * 4, the masked -3 excluded
