"""Repro bundles driven directly (`repro.safe_name`, `one_node_model`, `input_values`, `write_bundle`):
the folder name, the one-node model's inputs, weights and outputs, the captured values and the
README's exact commands (issue 15, mutation testing of repro.py)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig, Session
from inspector_cli.nanbisect.model import PreparedModel
from inspector_cli.nanbisect.repro import REPLAY, input_values, one_node_model, safe_name, write_bundle

from ..fixtures import nan_models as nm
from ..fixtures.helpers import init, make_model, save, vi

W = np.array([[0.5, -1.0, 2.0, 0.0]], np.float32)


@pytest.mark.parametrize("name,folder", [
    ("conv/1:0", "conv_1_0"), ("Block.Conv-9", "Block.Conv-9"), ("a  b", "a_b"), (".hidden.", "hidden"),
    ("__x__", "x"), ("///", "node"), ("", "node"), ("é", "node"), ("_ok_/", "ok"), ("XrayX", "XrayX"),
])
def test_safe_folder_names(name, folder):
    assert safe_name(name) == folder


def prepared_model(tmp_path) -> PreparedModel:
    """x -> relu (r) -> target: Div(r, w) with w a weight (its 0 divides) -> out (Identity)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Div", ["r", "w"], ["t"], name="target"),
             helper.make_node("Identity", ["t"], ["y"], name="out")]
    model = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], [init("w", W)])
    return PreparedModel(load_model(save(model, tmp_path / "m.onnx")), RuntimeConfig())


def test_the_node_alone_reads_its_weight_and_is_fed_the_rest(tmp_path):
    prepared = prepared_model(tmp_path)
    r = np.array([[1.0, 0.0, 3.0, 2.0]], np.float32)
    model = one_node_model(prepared, "target", {"r": r})
    graph = model.graph
    assert [n.name for n in graph.node] == ["target"] and graph.name == "origin_target"
    assert [(i.name, i.type.tensor_type.elem_type, [d.dim_value for d in i.type.tensor_type.shape.dim])
            for i in graph.input] == [("r", TensorProto.FLOAT, [1, 4])]
    assert [t.name for t in graph.initializer] == ["w"]
    np.testing.assert_array_equal(numpy_helper.to_array(graph.initializer[0]), W)
    assert [(o.name, o.type.tensor_type.elem_type, o.type.tensor_type.HasField("shape")) for o in graph.output] == [
        ("t", TensorProto.FLOAT, False)]
    original = prepared.graph.model
    assert model.ir_version == original.ir_version and model.producer_name == "mi nan-bisect --repro"
    assert [(o.domain, o.version) for o in model.opset_import] == [(o.domain, o.version) for o in original.opset_import]
    out = Session(model.SerializeToString(), RuntimeConfig(), label="one node").run({"r": r}, ["t"])["t"]
    # 1 / 0.5, 0 / -1, 3 / 2, 2 / 0
    assert out.tolist() == [[2.0, -0.0, 1.5, np.inf]]


def test_the_values_of_the_inputs_it_does_not_own(tmp_path):
    prepared = prepared_model(tmp_path)
    x = np.array([[1.0, -2.0, 3.0, 0.0]], np.float32)
    values = input_values(prepared, "target", {"x": x})
    assert list(values) == ["r"] and values["r"].tolist() == [[1.0, 0.0, 3.0, 0.0]]  # relu(x); w is a weight
    values = input_values(prepared, "relu", {"x": x})
    assert list(values) == ["x"] and values["x"] is not None and values["x"].tolist() == x.tolist()


def test_an_if_node_alone_takes_the_outer_values_its_branches_read(tmp_path):
    prepared = PreparedModel(load_model(save(nm.if_model(), tmp_path / "if.onnx")), RuntimeConfig())
    feeds = {"x": nm.row(-1, 2, -3, 4), "cond": np.array(True)}
    values = input_values(prepared, "branch_if", feeds)
    assert sorted(values) == ["cond", "x1"] and values["x1"].tolist() == [[1.0, 2.0, 3.0, 4.0]]
    model = one_node_model(prepared, "branch_if", values)
    assert [i.name for i in model.graph.input] == ["cond", "x1"]
    assert [t.name for t in model.graph.initializer] == ["zero"]
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.BOOL


def test_the_bundle_folder(tmp_path):
    prepared = prepared_model(tmp_path)
    x = np.array([[1.0, -2.0, 3.0, 4.0]], np.float32)
    folder = tmp_path / "my bundle"
    target = write_bundle(prepared, "target", {"x": x}, folder, sample="s 1.npz", model_label="m.onnx")
    assert target == folder / "target"
    assert sorted(p.name for p in target.iterdir()) == ["README.txt", "inputs.npz", "origin.onnx", "replay.py"]
    assert (target / "replay.py").read_text(encoding="utf-8") == REPLAY.format()
    assert "{{" not in REPLAY.format() and "feeds = {name: data[name]" in REPLAY.format()  # braces unescaped
    with np.load(target / "inputs.npz", allow_pickle=False) as data:
        assert data.files == ["r"] and data["r"].tolist() == [[1.0, 0.0, 3.0, 4.0]]
    assert [n.name for n in onnx.load(str(target / "origin.onnx")).graph.node] == ["target"]
    quoted = f"'{target}"  # shlex quotes the folder with a space in it
    assert (target / "README.txt").read_text(encoding="utf-8") == "\n".join([
        "Origin of NaN/Inf: node 'target' of m.onnx, captured on sample s 1.npz.",
        "",
        "Replay with mi (finds the same origin):",
        f"  mi nan-bisect {quoted}/origin.onnx' --inputs {quoted}/inputs.npz'",
        "Replay with onnxruntime only:",
        f"  python {quoted}/replay.py'",
        "",
    ])
    # a second origin of the same name (another sample) writes into the same folder
    assert write_bundle(prepared, "target", {"x": x}, folder, sample="s 2.npz", model_label="m.onnx") == target
    assert "captured on sample s 2.npz." in (target / "README.txt").read_text(encoding="utf-8")


def test_a_weight_read_first_and_a_computed_input_after_it(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sub", ["w", "r"], ["t"], name="target"),
             helper.make_node("Identity", ["t"], ["y"], name="out")]
    model = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], [init("w", W)])
    prepared = PreparedModel(load_model(save(model, tmp_path / "w.onnx")), RuntimeConfig())
    alone = one_node_model(prepared, "target", {"r": np.ones((1, 4), np.float32)})
    assert [t.name for t in alone.graph.initializer] == ["w"] and [i.name for i in alone.graph.input] == ["r"]
