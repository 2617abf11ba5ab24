"""NaN/Inf counts of external weights, streamed in chunks (core/weights.py): the same counts as
reading each tensor whole, chunk boundaries included, and the same None for bytes that do not fit."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.core import weights
from inspector_cli.core.graph import load_model


def _model(tmp_path, arrays, *, external: bool = True):
    inits = [numpy_helper.from_array(a, name) for name, a in arrays.items()]
    nodes = [helper.make_node("Add", ["x", name], [f"y_{name}"], name=f"add_{name}") for name in arrays]
    outputs = [helper.make_tensor_value_info(f"y_{n}", TensorProto.FLOAT, None) for n in arrays]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path), save_as_external_data=external, all_tensors_to_one_file=True, location="w.bin",
              size_threshold=0)
    return path


def test_streamed_counts_equal_whole_reads_across_chunk_boundaries(tmp_path, monkeypatch):
    a = np.zeros(1000, np.float32)
    a[[0, 255, 256, 999]] = [np.nan, np.inf, -np.inf, np.nan]  # 256 floats per 1 KiB chunk: both sides of a cut
    b = np.ones(300, np.float16)
    b[299] = np.inf
    arrays = {"a": a, "b": b, "clean": np.ones(10, np.float32), "ints": np.arange(5, dtype=np.int64)}
    monkeypatch.setattr(weights, "STREAM_CHUNK_BYTES", 1024)
    streamed = weights.nonfinite_initializers(load_model(_model(tmp_path / "ext", arrays)))
    (tmp_path / "emb").mkdir()
    whole = weights.nonfinite_initializers(load_model(_model(tmp_path / "emb", arrays, external=False)))
    assert [(w.tensor, w.nan, w.inf, w.size, w.consumers) for w in streamed] == [
        ("a", 2, 2, 1000, ("add_a",)), ("b", 0, 1, 300, ("add_b",))]
    assert streamed == whole


def test_external_bytes_that_do_not_hold_the_elements_are_refused_at_load(tmp_path):
    a = np.full(64, np.nan, np.float32)
    path = _model(tmp_path, {"a": a})
    model = onnx.load(str(path), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "length":
            entry.value = "128"  # half the tensor: numpy could not reshape it either
    onnx.save(model, str(path))
    # refused when the model loads (issue 28: onnxruntime would fail on it later, "size mismatch")
    from inspector_cli.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match=r"tensor 'a': external data length 128 does not match the tensor's 256 bytes"):
        load_model(path)


@pytest.fixture(autouse=True)
def _folders(tmp_path):
    (tmp_path / "ext").mkdir()


def test_fp16_range_check_streams_external_weights(tmp_path, monkeypatch):
    """nan-bisect --simulate fp16's weight check: the same notes as whole reads, and external data
    read in chunks, never whole (the old check read each tensor through a proto copy: issue 33)."""
    from inspector_cli.nanbisect.static import fp16_unsafe_weights

    a = np.zeros(1000, np.float32)
    a[[255, 256, 700]] = [7e4, np.inf, -9e4]  # largest finite |x| past a chunk cut; the Inf is not a value
    arrays = {"a": a, "small": np.full(10, 6e4, np.float32), "ints": np.arange(5, dtype=np.int64)}
    monkeypatch.setattr(weights, "STREAM_CHUNK_BYTES", 1024)
    (tmp_path / "emb").mkdir()
    whole = fp16_unsafe_weights(load_model(_model(tmp_path / "emb", arrays, external=False)))
    ext_graph = load_model(_model(tmp_path / "ext", arrays))
    reads: list = []
    monkeypatch.setattr(weights, "initializer_array", lambda graph, tensor: reads.append(tensor.name))
    streamed = fp16_unsafe_weights(ext_graph)
    assert streamed == whole == ["weight 'a' holds values up to |x| = 90000, beyond the fp16 range (65504): "
                                 "it becomes Inf when converted"]
    assert reads == []  # no external tensor read whole
    assert weights.finite_abs_max(ext_graph, ext_graph.model.graph.initializer[0]) == 9e4
