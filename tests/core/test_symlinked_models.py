"""Models reached through symlinks (the Hugging Face cache: `snapshots/<rev>/model.onnx` and its
`model.onnx_data` are symlinks into `blobs/`), which plain onnxruntime runs from the path: every
command that runs the model reads them, and a data symlink leading anywhere else is still refused."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from ..fixtures.helpers import invoke, read_json, save_npz

W = (np.arange(4096 * 80, dtype=np.float32).reshape(4096, 80) % 97 - 48) / 4096
X = np.linspace(-1, 1, 2 * 4096, dtype=np.float32).reshape(2, 4096)


def _model() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                               helper.make_node("Relu", ["h"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", 1, ["N", 4096])],
                              [helper.make_tensor_value_info("y", 1, ["N", 80])], [numpy_helper.from_array(W, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture()
def hub_cache(tmp_path):  # type: ignore[no-untyped-def]
    """blobs/<sha> files and a snapshot folder of symlinks to them, as huggingface_hub lays them out."""
    (tmp_path / "made").mkdir()
    onnx.save(_model(), str(tmp_path / "made" / "model.onnx"), save_as_external_data=True,
              location="model.onnx_data", size_threshold=0)
    (tmp_path / "blobs").mkdir()
    snapshot = tmp_path / "snapshots" / "rev1"
    snapshot.mkdir(parents=True)
    for name, sha in (("model.onnx", "9f1c"), ("model.onnx_data", "77ab")):
        os.rename(tmp_path / "made" / name, tmp_path / "blobs" / sha)
        os.symlink(f"../../blobs/{sha}", snapshot / name)
    save_npz(tmp_path / "data", [{"x": X}])
    return snapshot / "model.onnx", tmp_path / "data"


def test_probe_and_compare_read_a_model_from_the_hub_cache(hub_cache, tmp_path) -> None:
    model, data = hub_cache
    invoke(["probe", model, "--inputs", data, "--select", "h", "--no-history", "--json", tmp_path / "p.json"])
    h = X @ W
    row = next(t for t in read_json(tmp_path / "p.json")["results"]["tensors"] if t["name"] == "h")
    assert row["max"] == pytest.approx(float(h.max()), rel=1e-5) and row["min"] == pytest.approx(float(h.min()), rel=1e-5)
    invoke(["compare", model, model, "--inputs", data, "--layers", "all", "--json", tmp_path / "c.json"])
    layers = read_json(tmp_path / "c.json")["results"]["layers"]["layers"]
    assert [r["name"] for r in layers] == ["y"] and layers[0]["dataset"]["max_abs"] == 0.0  # h: in the MatMul+Relu chain
    invoke(["nan-bisect", model, "--inputs", data])  # clean: exit 0


def test_a_large_model_symlinked_under_another_name_is_read_lazily(tmp_path) -> None:
    """Above 1 MiB the lazy loader leaves weights in the file and names the file in the references:
    by the link's name, which only exists in the link's folder."""
    (tmp_path / "store").mkdir()
    (tmp_path / "work").mkdir()
    onnx.save(_model(), str(tmp_path / "store" / "real_name.onnx"))
    assert (tmp_path / "store" / "real_name.onnx").stat().st_size > (1 << 20)
    os.symlink(tmp_path / "store" / "real_name.onnx", tmp_path / "work" / "linked.onnx")
    save_npz(tmp_path / "data", [{"x": X}])
    invoke(["probe", tmp_path / "work" / "linked.onnx", "--inputs", tmp_path / "data", "--select", "y",
            "--no-history", "--json", tmp_path / "p.json"])
    row = read_json(tmp_path / "p.json")["results"]["tensors"][0]
    assert row["max"] == pytest.approx(float(np.maximum(X @ W, 0).max()), rel=1e-5)


def test_a_data_symlink_leading_out_of_both_folders_is_refused(hub_cache, tmp_path) -> None:
    model, data = hub_cache
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.rename(tmp_path / "blobs" / "77ab", elsewhere / "secret")
    os.remove(model.parent / "model.onnx_data")
    os.symlink(elsewhere / "secret", model.parent / "model.onnx_data")
    result = invoke(["probe", model, "--inputs", data, "--no-history"], exit_code=3)
    assert result.stderr.startswith(f"Error: {model}: tensor 'w': external data location 'model.onnx_data' "
                                    f"resolves outside the model's folder {model.parent}")
