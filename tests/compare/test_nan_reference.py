"""A reference that is itself non-finite (issue 42): NaN at the same position on both sides.

Golden mode counts it as agreement (the saved outputs say what is expected, as ONNX's backend test
runner's `assert_allclose(equal_nan=True)` does); two models that both produce it get finding MI807
(an error) in true words instead of MI802's "not matched". Either way the metrics are those of the
finite positions, hand-computed here. Before issue 42 every case below read cosine NaN, max abs inf
and "N NaN/Inf value(s) not matched by the other model" (the sqrt of negatives in
pytorch-operator/test_operator_sqrt, the NaN of test_cast_FLOAT16_to_FLOAT, ...).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from onnx import helper, numpy_helper

from ..fixtures.helpers import init, make_model, save, vi
from ..fixtures.subproc import assert_status, run_mi

X = np.array([[-1.0, 4.0, -9.0, 16.0]], np.float32)
"""sqrt(X) = [NaN, 2, NaN, 4]: NaN at positions 0 and 2."""


def _sqrt_model(path: Path, shift: "np.ndarray | None" = None) -> Path:
    """y = sqrt(x) (+ shift)."""
    nodes = [helper.make_node("Sqrt", ["x"], ["r" if shift is not None else "y"], name="sqrt")]
    inits = []
    if shift is not None:
        nodes.append(helper.make_node("Add", ["r", "c"], ["y"], name="shift"))
        inits.append(init("c", shift))
    return save(make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], inits), path)


def _golden(folder: Path, expected: np.ndarray) -> Path:
    """An ONNX test_data_set_0 folder: input_0.pb = X, output_0.pb = `expected`."""
    data = folder / "test_data_set_0"
    data.mkdir(parents=True)
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(X, "x").SerializeToString())
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(expected.astype(np.float32), "y").SerializeToString())
    return data


def _compare(tmp_path: Path, args: list, status: int) -> dict:
    out = tmp_path / "r.json"
    ran = run_mi(["-q", "compare", *args, "--json", out], cwd=tmp_path)
    assert_status(ran, status)
    return json.loads(out.read_text())


FINITE_COSINE = (2 * 2 + 4 * 4.5) / (math.sqrt(2 ** 2 + 4 ** 2) * math.sqrt(2 ** 2 + 4.5 ** 2))
"""a = [2, 4], b = [2, 4.5] over the two finite positions: 22 / (sqrt(20) sqrt(24.25))."""


def test_golden_nan_where_the_saved_output_expects_it_is_agreement(tmp_path: Path) -> None:
    # fails before issue 42: exit 1, cosine NaN, max abs inf, MI802 "2 NaN/Inf value(s) not matched"
    model = _sqrt_model(tmp_path / "sqrt.onnx")
    golden = _golden(tmp_path / "golden", np.array([[np.nan, 2.0, np.nan, 4.5]]))  # saved 4.5 where sqrt gives 4
    doc = _compare(tmp_path, [model, "--golden", golden, "--max-abs", "0.5"], 0)
    out = doc["results"]["outputs"][0]
    assert out["nonfinite"] == {"nan_a": 2, "inf_a": 0, "nan_b": 2, "inf_b": 0, "mismatch": 0, "inf_same": 0,
                                "nan_same": 2}
    ds = out["dataset"]  # the finite positions: a = [2, 4.5] (saved), b = [2, 4] (model)
    assert ds["max_abs"] == 0.5 and ds["mean_abs"] == 0.25 and ds["rmse"] == math.sqrt(0.125)
    assert ds["cosine"] == FINITE_COSINE and out["per_sample"][0]["nan_same"] == 2
    assert [(f["rule"], f["severity"]) for f in doc["results"]["findings"]] == [("MI807", "info")]
    assert doc["results"]["findings"][0]["message"] == (
        "output 'y': the saved output expects 2 NaN where the model produces them (saved: 2 NaN, 0 Inf; model: "
        "2 NaN, 0 Inf): counted as agreement; metrics over the 2 position(s) finite in both")
    # the finite positions are gated as usual
    failed = _compare(tmp_path, [model, "--golden", golden, "--max-abs", "0.4"], 1)
    assert [g["passed"] for g in failed["results"]["gates"]] == [False]
    assert not [f for f in failed["results"]["findings"] if f["severity"] == "error"]


def test_golden_nan_with_onnx_tolerance_is_agreement_as_onnx_runner_counts_it(tmp_path: Path) -> None:
    # fails before issue 42's NaN rule: exit 1 with MI802 (the --rtol/--atol check, MI806, agreed already)
    model = _sqrt_model(tmp_path / "sqrt.onnx")
    golden = _golden(tmp_path / "golden", np.array([[np.nan, 2.0, np.nan, 4.003]]))  # |4 - 4.003| <= 1e-7 + 1e-3 * 4.003
    doc = _compare(tmp_path, [model, "--golden", golden, "--rtol", "1e-3", "--atol", "1e-7"], 0)
    assert [(f["rule"], f["severity"]) for f in doc["results"]["findings"]] == [("MI807", "info")]
    assert doc["results"]["outputs"][0]["dataset"]["max_abs"] == float(np.float32(4.003)) - 4.0
    outside = _compare(tmp_path, [model, "--golden", golden, "--rtol", "1e-4", "--atol", "1e-7"], 1)
    assert [f["rule"] for f in outside["results"]["findings"]] == ["MI807", "MI806"]


def test_golden_nan_against_a_finite_value_is_never_agreement(tmp_path: Path) -> None:
    # issue 30's rule kept: the saved output holds NaN at position 1 where the model produces 2
    model = _sqrt_model(tmp_path / "sqrt.onnx")
    golden = _golden(tmp_path / "golden", np.array([[np.nan, np.nan, np.nan, 4.0]]))
    doc = _compare(tmp_path, [model, "--golden", golden], 1)
    out = doc["results"]["outputs"][0]
    assert out["nonfinite"]["mismatch"] == 1 and out["nonfinite"]["nan_same"] == 2
    assert math.isnan(float(out["dataset"]["cosine"])) and out["dataset"]["max_abs"] == "inf"
    messages = {f["rule"]: f["message"] for f in doc["results"]["findings"]}
    assert messages["MI802"] == ("output 'y': 1 NaN/Inf value(s) not matched by the saved output (saved: 3 NaN, "
                                 "0 Inf; model: 2 NaN, 0 Inf); both hold 2 NaN at the same positions")


def test_two_models_both_producing_nan_is_mi807_not_an_unmatched_nan(tmp_path: Path) -> None:
    # fails before issue 42: MI802 "2 NaN/Inf value(s) not matched by the other model", cosine NaN
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "s.npz", x=X)
    a = _sqrt_model(tmp_path / "a.onnx")
    b = _sqrt_model(tmp_path / "b.onnx", np.array([[0.0, 0.0, 0.0, 0.5]], np.float32))  # [NaN, 2, NaN, 4.5]
    doc = _compare(tmp_path, [a, b, "-i", data, "--min-cosine", "0.99"], 1)
    out = doc["results"]["outputs"][0]
    assert out["nonfinite"]["nan_same"] == 2 and out["nonfinite"]["mismatch"] == 0
    ds = out["dataset"]  # a = [2, 4], b = [2, 4.5]
    assert ds["max_abs"] == 0.5 and ds["cosine"] == FINITE_COSINE and ds["sqnr"] == 10 * math.log10(20 / 0.25)
    findings = doc["results"]["findings"]
    assert [(f["rule"], f["severity"]) for f in findings] == [("MI807", "error")]
    assert findings[0]["message"] == ("output 'y': both models produce NaN at 2 position(s) (A: 2 NaN, 0 Inf; "
                                      "B: 2 NaN, 0 Inf); metrics over the 2 position(s) finite in both")
    assert doc["results"]["gates"][0]["passed"] is True  # 0.9995 >= 0.99: the exit is the finding's
    assert doc["verdict"]["summary"].startswith("FAIL: output 'y': both models produce NaN at 2 position(s)")


def test_a_nan_one_model_adds_beside_shared_ones_is_both_findings(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "s.npz", x=X)
    a = _sqrt_model(tmp_path / "a.onnx")
    b = _sqrt_model(tmp_path / "b.onnx", np.array([[0.0, np.nan, 0.0, 0.0]], np.float32))  # [NaN, NaN, NaN, 4]
    doc = _compare(tmp_path, [a, b, "-i", data], 1)
    out = doc["results"]["outputs"][0]
    assert (out["nonfinite"]["mismatch"], out["nonfinite"]["nan_same"]) == (1, 2)
    assert out["dataset"]["max_abs"] == "inf"  # B's lone NaN: no agreement anywhere
    assert [f["rule"] for f in doc["results"]["findings"]] == ["MI802", "MI807"]
