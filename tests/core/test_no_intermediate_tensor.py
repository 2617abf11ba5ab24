"""Graphs with no intermediate tensor (issue 41): a model that is a single Constant, an initializer wired to
the output, an Identity. onnxruntime runs each; `compare --layers all` and `probe` (default `--select all`)
report the outputs and exit 0. Before, both exited 2 with "pattern 'all' matches no tensor" on the
Constant and the initializer (a Constant's output is not selectable, and nothing else was left)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.select import select_tensors

from ..fixtures.helpers import init, make_model, save, save_npz, vi
from ..fixtures.subproc import assert_status, run_mi

VALUES = np.array([1.0, 2.0, 4.0], np.float32)  # mean 7/3, abs max 4


def _constant():
    node = helper.make_node("Constant", [], ["y"], name="const", value=init("v", VALUES))
    return make_model([node], [], [vi("y", [3])])


def _initializer():
    """No node at all: the graph output is an initializer (onnxruntime returns the stored tensor)."""
    return make_model([], [], [vi("y", [3])], [init("y", VALUES)])


@pytest.mark.parametrize("build", [_constant, _initializer], ids=["constant", "initializer"])
def test_all_selects_the_outputs(tmp_path, build):
    graph = load_model(save(build(), tmp_path / "m.onnx"))
    assert select_tensors(graph, ["all"]) == ["y"]


@pytest.mark.parametrize("build", [_constant, _initializer], ids=["constant", "initializer"])
def test_probe_and_compare_report_the_output(tmp_path, build):
    model = save(build(), tmp_path / "m.onnx")
    probe = run_mi(["probe", model, "--no-history", "--json", tmp_path / "probe.json"], cwd=tmp_path)
    assert_status(probe, 0)
    tensors = json.loads((tmp_path / "probe.json").read_text())["results"]["tensors"]
    assert [t["name"] for t in tensors] == ["y"]
    assert tensors[0]["absmax"] == pytest.approx(4.0)
    assert tensors[0]["mean"] == pytest.approx(7 / 3, rel=1e-6)
    listed = run_mi(["probe", model, "--list", "--no-history", "--json", tmp_path / "list.json"], cwd=tmp_path)
    assert_status(listed, 0)
    assert [t["name"] for t in json.loads((tmp_path / "list.json").read_text())["results"]["tensors"]] == ["y"]
    compare = run_mi(["compare", model, model, "--layers", "all", "--json", tmp_path / "compare.json"], cwd=tmp_path)
    assert_status(compare, 0)
    outputs = json.loads((tmp_path / "compare.json").read_text())["results"]["outputs"]
    assert [(o["name"], o["dataset"]["max_abs"]) for o in outputs] == [("y", 0.0)]


def test_identity_graph(tmp_path):
    """Input -> Identity -> output: the output is the probe's tensor and compare's output row."""
    model = save(make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [vi("x", [3])], [vi("y", [3])]),
                 tmp_path / "id.onnx")
    data = save_npz(tmp_path / "data", [{"x": VALUES}])
    probe = run_mi(["probe", model, "--inputs", data, "--no-history", "--json", tmp_path / "p.json"], cwd=tmp_path)
    assert_status(probe, 0)
    tensors = json.loads((tmp_path / "p.json").read_text())["results"]["tensors"]
    assert [(t["name"], t["absmax"]) for t in tensors] == [("y", pytest.approx(4.0))]
    compare = run_mi(["compare", model, model, "--inputs", data, "--layers", "all", "--json", tmp_path / "c.json"],
                     cwd=tmp_path)
    assert_status(compare, 0)
    assert [o["name"] for o in json.loads((tmp_path / "c.json").read_text())["results"]["outputs"]] == ["y"]
