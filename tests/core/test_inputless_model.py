"""A model without inputs (ONNX's node/test_constant: one Constant node, its output the graph's): a sample
folder holding only the expected output is an empty sample, and probe's `all` includes the Constant's graph
output. Before: probe exit 2 ("pattern 'all' matches no tensor"), nan-bisect and profile exit 3 ("sample
folder holds no input files") while onnxruntime runs the model (issue 42's conformance sweep)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..fixtures.subproc import assert_status, run_mi


def test_every_command_runs_a_model_without_inputs(tmp_path: Path) -> None:
    value = np.array([[1.5, -2.0], [0.0, 4.0]], np.float32)
    node = helper.make_node("Constant", [], ["values"], value=numpy_helper.from_array(value, "v"))
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("values", 1, [2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "model.onnx"))
    data = tmp_path / "test_data_set_0"
    data.mkdir()
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(value, "values").SerializeToString())
    probe = tmp_path / "probe.json"
    assert_status(run_mi(["-q", "probe", "model.onnx", "--inputs", tmp_path, "--json", probe], cwd=tmp_path), 0)
    (tensor,) = json.loads(probe.read_text())["results"]["tensors"]
    assert (tensor["name"], tensor["min"], tensor["max"]) == ("values", -2.0, 4.0)
    for command in (["nan-bisect", "model.onnx", "--inputs", tmp_path], ["profile", "model.onnx", "--inputs", tmp_path],
                    ["compare", "model.onnx", "--golden", tmp_path, "--rtol", "0", "--atol", "0"]):
        assert_status(run_mi(["-q", *command], cwd=tmp_path), 0)
