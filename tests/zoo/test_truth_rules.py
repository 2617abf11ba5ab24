"""The zoo's truth recomputation (tests/zoo/truth.py) follows docs/metrics.md on non-finite values, so a
masked attention score (-inf in both models) is checked and a NaN layer is compared (issue 30): before,
the mask summed to a NaN cosine and `abs(mi - nan) > tol` let every masked layer pass unchecked, and mi's
"nan" metric strings raised TypeError."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from onnx import helper

from tests.fixtures.helpers import init, make_model, save, vi

from .truth import recompute


def _masked(path: Path, nan: bool) -> Path:
    """y = x + c, c holding -inf at [0, 0] (a mask) and, with `nan`, NaN at [0, 1]."""
    c = np.zeros((1, 4), np.float32)
    c[0, 0] = -np.inf
    if nan:
        c[0, 1] = np.nan
    return save(make_model([helper.make_node("Add", ["x", "c"], ["y"], name="add")], [vi("x", [1, 4])],
                           [vi("y", [1, 4])], [init("c", c)]), path)


def _mi_json(path: Path, cosine: object) -> Path:
    path.write_text(json.dumps({"results": {"layers": {"layers": [{"name": "y", "dataset": {"cosine": cosine}}]}}}))
    return path


def test_a_mask_in_both_models_is_equal_and_a_nan_only_equals_a_nan(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "s.npz", x=np.array([[1.0, 2.0, 3.0, 4.0]], np.float32))
    a, b = _masked(tmp_path / "a.onnx", False), _masked(tmp_path / "b.onnx", True)
    same = recompute(_mi_json(tmp_path / "same.json", 1.0), a, a, data)[0]
    assert same.true_cosine == 1.0 and same.true_max_abs == 0.0 and same.delta == 0.0
    bad = recompute(_mi_json(tmp_path / "bad.json", "nan"), a, b, data)[0]
    assert np.isnan(bad.true_cosine) and bad.true_max_abs == float("inf") and bad.delta == 0.0
    # mi reading agreement where the recomputation finds a NaN is a disagreement, not noise
    assert recompute(_mi_json(tmp_path / "wrong.json", 1.0), a, b, data)[0].delta == float("inf")
    # NaN at the same position in both (issue 42) is left out like the mask: the finite positions agree
    both = recompute(_mi_json(tmp_path / "both.json", 1.0), b, b, data)[0]
    assert both.true_cosine == 1.0 and both.true_max_abs == 0.0 and both.delta == 0.0
