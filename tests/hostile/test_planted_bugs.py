"""Tests that fail on the bugs planted in issue 15's mutation read ("tests that let bugs through").

Each test names the planted bug it catches. They exercise compare, diff and nan-bisect from the
outside (CLI, public functions) only, so they hold across the move of those modules.
"""
from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pytest
from onnx import helper

from inspector_cli.cli import run_guarded
from inspector_cli.diff.fast_stats import fast_pair_stats
from inspector_cli.diff.metrics import compare_arrays
from inspector_cli.errors import ConfigError, InferenceError, InputDataError, ModelLoadError, SelectionError

from ..fixtures.helpers import affine_model, init, invoke, make_model, save, save_npz, vi


def _one_nan_candidate(tmp_path: Path) -> Path:
    """y = x * s + b with s = [2, 2, NaN, 2]: one output position NaN, the other three exact."""
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"], name="mul"), helper.make_node("Add", ["m", "b"], ["y"], name="add")]
    scale = np.array([[2.0, 2.0, np.nan, 2.0]], np.float32)
    model = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                       [init("s", scale), init("b", np.array(1.0, np.float32))])
    return save(model, tmp_path / "candidate.onnx")


def test_compare_candidate_nan_where_reference_is_finite_fails_with_mi802(tmp_path: Path) -> None:
    # planted: no non-finite check in the gate bookkeeping / no MI802 -> exit 0 with cosine 1.0
    reference = save(affine_model(2.0, 1.0), tmp_path / "reference.onnx")
    candidate = _one_nan_candidate(tmp_path)
    out = tmp_path / "r.json"
    invoke(["-q", "compare", reference, candidate, "--min-cosine", "0.99", "--json", out], exit_code=1)
    document = json.loads(out.read_text())
    findings = [(f["rule"], f["tensor"]) for f in document["results"]["findings"]]
    assert ("MI802", "y") in findings
    message = next(f["message"] for f in document["results"]["findings"] if f["rule"] == "MI802")
    assert "1 NaN/Inf value(s) not matched by the other model (A: 0 NaN, 0 Inf; B: 1 NaN, 0 Inf)" in message
    assert document["verdict"]["exit_code"] == 1 and document["verdict"]["passed"] is False


@pytest.mark.parametrize("a, b, mismatch, nan_same", [
    ([np.nan, 1.0], [np.inf, 1.0], 1, 0),      # NaN vs +Inf disagree
    ([np.inf, 1.0], [-np.inf, 1.0], 1, 0),     # +Inf vs -Inf disagree
    ([np.nan, 1.0], [np.nan, 1.0], 0, 1),      # NaN on both: counted apart, for compare's findings (issue 42)
    ([-np.inf, 1.0], [-np.inf, 1.0], 0, 0),    # the same Inf agrees
    ([np.nan, np.inf], [1.0, 2.0], 2, 0),      # non-finite vs finite
])
def test_compare_arrays_non_finite_agreement(a, b, mismatch, nan_same) -> None:
    # planted: any two non-finite values treated as agreeing
    stats = compare_arrays(np.array(a), np.array(b))
    assert (stats.nonfinite_mismatch, stats.nan_same) == (mismatch, nan_same)
    assert stats.count == 1 if mismatch < 2 else stats.count == 0


def test_fast_stats_int8_vs_int8_dequantises_the_reference_side() -> None:
    # planted: fast_stats ignoring affine_a (the reference side's scale and zero point)
    a = np.array([10, 20, -30, 2], np.int8)        # (q - 2) * 0.5 = 4, 9, -16, 0
    b = np.array([4, 9, -16, 0], np.int8)          # scale 1, zero 0: the same values
    stats = fast_pair_stats(a, b, affine_a=(0.5, 2.0), affine_b=(1.0, 0.0))
    assert stats.sum_sq_err == 0.0 and stats.max_abs == 0.0
    assert stats.sum_a2 == 16 + 81 + 256 + 0 == stats.sum_b2
    assert stats.metrics()["cosine"] == pytest.approx(1.0)
    skewed = fast_pair_stats(a, b, affine_a=(0.5, 0.0), affine_b=(1.0, 0.0))  # zero point matters
    assert skewed.max_abs == pytest.approx(1.0)


@pytest.fixture
def log_model(tmp_path: Path) -> Path:
    return save(make_model([helper.make_node("Log", ["x"], ["y"], name="log")], [vi("x", [1, 4])], [vi("y", [1, 4])]),
                tmp_path / "log.onnx")


def test_nan_bisect_found_beats_errors_exit_1(log_model: Path, tmp_path: Path) -> None:
    # planted: errors checked before found in the exit code
    data = save_npz(tmp_path / "data", [{"x": -np.ones((1, 4), np.float32)}, {"x": np.ones((1, 4), np.float32)},
                                        {"x": np.ones((1, 5), np.float32)}])
    result = invoke(["-q", "nan-bisect", log_model, "-i", data, "--json", "-"], exit_code=1)
    document = json.loads(result.stdout)
    assert document["results"]["errors"] == 1 and document["results"]["nonfinite"] == 1
    assert document["verdict"]["summary"].startswith("FOUND: 1 sample(s) with NaN/Inf outputs, first born at log (Log)")


def test_nan_bisect_errors_only_exit_3_with_one_error_line(log_model: Path, tmp_path: Path) -> None:
    data = save_npz(tmp_path / "data", [{"x": np.ones((1, 4), np.float32)}, {"x": np.ones((1, 5), np.float32)}])
    result = invoke(["-q", "nan-bisect", log_model, "-i", data], exit_code=3)
    assert result.stderr == ("Error: 1 sample(s) could not be analysed (e.g. s001.npz): s001.npz: input 'x' has shape "
                             "[1, 5], the model expects [1, 4]\n")


@pytest.mark.parametrize("exc, code", [
    (click.UsageError("bad flag"), 2), (click.ClickException("bad file"), 2), (click.exceptions.Exit(5), 5),
    (click.exceptions.Abort(), 130), (KeyboardInterrupt(), 130), (ConfigError("c"), 2), (SelectionError("s"), 2),
    (ModelLoadError("m"), 3), (InputDataError("i"), 3), (InferenceError("r"), 3), (ValueError("bug"), 4),
])
def test_the_error_boundary_maps_every_exception_to_its_exit_code(exc: BaseException, code: int,
                                                                  capsys: pytest.CaptureFixture) -> None:
    # planted: the ClickException -> exit code mapping
    def fail() -> None:
        raise exc

    assert run_guarded(fail, debug=False) == code
    err = capsys.readouterr().err
    if code == 4:
        assert err == "Internal error: ValueError: bug (this is a bug in mi; rerun with --debug for the traceback)\n"
    elif code == 3:
        assert err.startswith("Error: ") and err.count("\n") == 1
