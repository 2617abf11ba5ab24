"""A reduction's documented +-inf over an empty set is not a fault (issue 42, core/identities.py).

ReduceMax of no element is -inf, ReduceMin +inf, ReduceLogSumExp and ReduceLogSum -inf, and the
spelled-out Log(ReduceSum) too. Before issue 42, probe exited 1 (MI821) and nan-bisect 1 (origin at the
reduction, "float32 overflow") on the backend tests test_reduce_{max,min,log_sum,log_sum_exp}_empty_set
and their _expanded forms. An infinity a reduction makes of data that is not empty is still found."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest
from onnx import helper

from ..fixtures.helpers import init, make_model, save, save_npz, vi
from ..fixtures.subproc import assert_status, run_mi
from .attention_spellings import empty_reduction_model

EMPTY = np.zeros((2, 0, 4), np.float32)


def _run(tmp_path: Path, command: str, model: Path, data: np.ndarray, status: int, *extra: Any) -> Dict[str, Any]:
    folder = save_npz(tmp_path / f"{command}-data", [{"data": data}])
    out = tmp_path / f"{command}.json"
    args = ["-q", command, model, "-i", folder, "--json", out, *extra, *(["--no-history"] if command == "probe" else [])]
    ran = run_mi(args, cwd=tmp_path)
    assert_status(ran, status)
    return json.loads(out.read_text())


@pytest.mark.parametrize("op, sign, answer", [
    ("ReduceMax", "-inf", "ReduceMax of no element"), ("ReduceMin", "+inf", "ReduceMin of no element"),
    ("ReduceLogSumExp", "-inf", "ReduceLogSumExp of no element"), ("ReduceLogSum", "-inf", "ReduceLogSum of no element"),
    ("LogOfSum", "-inf", "the log of an empty sum"),
])
def test_the_identity_of_an_empty_reduction_is_no_fault(tmp_path: Path, op: str, sign: str, answer: str) -> None:
    # fails before issue 42: probe exit 1 (MI821 "tensor 'reduced' holds 0 NaN and 8 Inf"), nan-bisect exit 1
    model = empty_reduction_model(tmp_path / "m.onnx", op)
    node = "reduce_sum" if op == "LogOfSum" else "reduce"
    probe = _run(tmp_path, "probe", model, EMPTY, 0)
    reduced = next(t for t in probe["results"]["tensors"] if t["name"] == "reduced")
    assert (reduced["inf"], reduced["masked"], reduced["nan"]) == (0, 8, 0)  # [2, 1, 4]: every value the identity
    info = [f for f in probe["results"]["findings"] if f["rule"] == "MI830"]
    assert [f["message"] for f in info] == [
        f"tensor 'reduced': its 8 {sign} value(s) are {answer} ('{node}' reduces 'data', which holds no element): "
        f"the documented answer, not counted as Inf"]
    nb = _run(tmp_path, "nan-bisect", model, EMPTY, 0)
    assert nb["results"]["nonfinite"] == 0 and nb["results"]["intended"] == 1
    mi908 = [f for f in nb["results"]["findings"] if f["rule"] == "MI908"]
    op_type = "ReduceSum" if op == "LogOfSum" else op
    what = "the log of its empty sum" if op == "LogOfSum" else answer
    assert [f["message"] for f in mi908] == [
        f"{node} ({op_type}) reduces 'data' of shape [2, 0, 4], which holds no element: its {sign} ({what}) is the "
        f"documented answer, not a NaN/Inf birth"]
    assert nb["verdict"]["summary"] == ("CLEAN: no NaN/Inf but intended ones in 1/1 sample(s); the outputs of 1 hold "
                                        "such values (a mask's -inf, a reduction's answer over an empty set)")


def test_an_input_empty_only_at_run_time_is_read_from_the_sample(tmp_path: Path) -> None:
    model = empty_reduction_model(tmp_path / "m.onnx", "ReduceMax", data_shape=[2, "n", 4])
    probe = _run(tmp_path, "probe", model, EMPTY, 0)
    reduced = next(t for t in probe["results"]["tensors"] if t["name"] == "reduced")
    assert (reduced["inf"], reduced["masked"]) == (0, 8)
    nb = _run(tmp_path, "nan-bisect", model, EMPTY, 0)
    assert nb["results"]["intended"] == 1 and not [f for f in nb["results"]["findings"] if f["rule"] == "MI908"]
    # the same model over data that is not empty: ReduceMax of finite values is finite, nothing to excuse
    assert _run(tmp_path / "full", "nan-bisect", model, np.ones((2, 3, 4), np.float32), 0)["results"]["intended"] == 0


def test_an_infinity_reduced_from_data_that_is_not_empty_is_still_found(tmp_path: Path) -> None:
    # Log(0) = -inf in column [0, :, 0], then ReduceMax over axis 1 keeps it: born at the Log
    nodes = [helper.make_node("Log", ["data"], ["logged"], name="log"),
             helper.make_node("ReduceMax", ["logged", "axes"], ["reduced"], name="reduce", keepdims=1)]
    model = save(make_model(nodes, [vi("data", [2, 3, 4])], [vi("reduced", [2, 1, 4])],
                            [init("axes", np.array([1], np.int64))], opset=18), tmp_path / "log.onnx")
    data = np.ones((2, 3, 4), np.float32)
    data[0, :, 0] = 0.0
    probe = _run(tmp_path, "probe", model, data, 1)
    reduced = next(t for t in probe["results"]["tensors"] if t["name"] == "reduced")
    assert (reduced["inf"], reduced["masked"]) == (1, 0)
    assert not [f for f in probe["results"]["findings"] if f["rule"] == "MI830"]
    nb = _run(tmp_path, "nan-bisect", model, data, 1)
    assert nb["results"]["records"][0]["origin"]["node"] == "log" and nb["results"]["intended"] == 0
