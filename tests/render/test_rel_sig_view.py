"""The significant relative error in the tables and the JSON (issue 20): shown by default, max_rel
only when gated, the layer column on request."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from ..fixtures.helpers import affine_model, invoke, output_entry, read_json, save_npz

SIG_LABEL = "max rel err (|a| >= 1e-3 max|a|)"
MAX_REL_ROW = re.compile(r"max rel err +\d")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("relsig")
    onnx.save(affine_model(1.0, 0.0), tmp / "a.onnx")
    onnx.save(affine_model(1.0, 0.01), tmp / "b.onnx")   # b = a + 0.01 everywhere
    # max|a| = 100 -> floor 0.1: 100 and 1 are significant (rel 1e-4 and 1e-2), 0.05 and 0 are not
    data = save_npz(tmp / "data", [{"x": np.array([[100.0, 1.0, 0.05, 0.0]], np.float32)}])
    return tmp / "a.onnx", tmp / "b.onnx", data, tmp


def test_output_table_and_json(pair):
    a, b, data, tmp = pair
    result = invoke(["compare", a, b, "-i", data, "--json", tmp / "out.json"])
    out = output_entry(read_json(tmp / "out.json"), "y")
    assert out["dataset"]["max_rel_sig"] == pytest.approx(0.01, rel=1e-3)
    assert out["dataset"]["mean_rel_sig"] == pytest.approx((1e-4 + 0.01) / 2, rel=1e-3)
    assert out["dataset"]["max_rel"] == pytest.approx(0.01 / 1e-12, rel=1e-3)  # the a = 0 element
    lines = result.stdout.splitlines()
    assert any(line.startswith(SIG_LABEL) and "0.01" in line for line in lines)
    assert not [line for line in lines if MAX_REL_ROW.match(line)]  # ungated max_rel: in the JSON only


def test_max_rel_row_appears_when_gated(pair):
    a, b, data, _ = pair
    result = invoke(["compare", a, b, "-i", data, "--max-rel", "0.5"], exit_code=1)
    row = next(line for line in result.stdout.splitlines() if MAX_REL_ROW.match(line))
    assert "1e+10" in row and "<= 0.5" in row and "1/1" in row


def test_layer_column_on_request(pair):
    a, b, data, tmp = pair
    default = invoke(["compare", a, b, "-i", data, "--layers", "all", "--json", tmp / "layers.json"])
    assert "max rel sig" not in default.stdout
    layer = next(r for r in read_json(tmp / "layers.json")["results"]["layers"]["layers"] if r["name"] == "y")
    assert layer["dataset"]["max_rel_sig"] == pytest.approx(0.01, rel=1e-3)   # the fast layer path
    wide = invoke(["--columns", "max_rel_sig", "compare", a, b, "-i", data, "--layers", "all"])
    header = next(line for line in wide.stdout.splitlines() if "tensor" in line and "cosine" in line)
    assert "max rel sig" in " ".join(header.split())
