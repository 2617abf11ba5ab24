"""A model's large embedded weights moved to a page-aligned `weights.bin` before the search opens
sessions (`model.externalise`, `PreparedModel.load`): the exact layout, what stays inline, and
the same values when run (issue 15: no test reached it, its threshold being 32 MiB)."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.core.graph import ModelGraph, load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.model import PreparedModel, embedded_weight_bytes, externalise

from ..fixtures.helpers import make_model, save, vi

BIG = np.arange(300, dtype=np.float32).reshape(1, 300) / 7          # 1,200 bytes as raw_data
SMALL = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)                 # 16 bytes: stays inline
TYPED = np.linspace(-1, 1, 300, dtype=np.float32).reshape(1, 300)    # 1,200 bytes as float_data
TINY_TYPED = np.array([[0.5, 0.25, 2.0, 4.0]], np.float32)          # float_data, 16 bytes
EDGE = np.full((1, 256), 0.5, np.float32)                            # exactly 1,024 bytes: stays inline
THIRD = np.arange(300, dtype=np.float32).reshape(1, 300) / 3        # 1,200 bytes, the third page


def model() -> onnx.ModelProto:
    typed = helper.make_tensor("typed", TensorProto.FLOAT, [1, 300], TYPED.reshape(-1).tolist())
    tiny = helper.make_tensor("tiny", TensorProto.FLOAT, [1, 4], TINY_TYPED.reshape(-1).tolist())
    nodes = [helper.make_node("Add", ["x", "big"], ["a"], name="add_big"),
             helper.make_node("Mul", ["a", "typed"], ["b"], name="mul_typed"),
             helper.make_node("ReduceSum", ["b"], ["s"], name="sum", keepdims=1),
             helper.make_node("Mul", ["s", "small"], ["c"], name="mul_small"),
             helper.make_node("Mul", ["c", "tiny"], ["y"], name="mul_tiny"),
             helper.make_node("ReduceSum", ["edge"], ["es"], name="sum_edge", keepdims=1),
             helper.make_node("ReduceSum", ["third"], ["ts"], name="sum_third", keepdims=1),
             helper.make_node("Add", ["es", "ts"], ["z"], name="add_sums")]
    # the small typed one before the large typed one: skipping it must not end the pass
    return make_model(nodes, [vi("x", [1, 300])], [vi("y", [1, 4]), vi("z", [1, 1])],
                      [numpy_helper.from_array(BIG, "big"), numpy_helper.from_array(SMALL, "small"), tiny, typed,
                       numpy_helper.from_array(EDGE, "edge"), numpy_helper.from_array(THIRD, "third")])


def expected(x: np.ndarray) -> np.ndarray:
    return ((x + BIG) * TYPED).sum(axis=1, keepdims=True) * SMALL * TINY_TYPED


def test_large_weights_go_page_aligned_into_weights_bin(tmp_path):
    proto = model()
    assert embedded_weight_bytes(proto) == 1200 + 16 + 1024 + 1200  # raw_data only: float_data is not counted
    path = externalise(ModelGraph.from_proto(proto), tmp_path)
    assert path == tmp_path / "model.onnx"
    saved = {t.name: t for t in onnx.load(str(path), load_external_data=False).graph.initializer}
    # big at 0; typed after a pad to the next 4 KiB page; small and tiny (<= 1 KiB) stay inline
    assert [(e.key, e.value) for e in saved["big"].external_data] == [
        ("location", "weights.bin"), ("offset", "0"), ("length", "1200")]
    assert [(e.key, e.value) for e in saved["typed"].external_data] == [
        ("location", "weights.bin"), ("offset", "4096"), ("length", "1200")]
    assert saved["big"].data_location == saved["typed"].data_location == TensorProto.EXTERNAL
    assert not saved["big"].HasField("raw_data") and list(saved["typed"].float_data) == []
    assert [(e.key, e.value) for e in saved["third"].external_data] == [
        ("location", "weights.bin"), ("offset", "8192"), ("length", "1200")]
    assert saved["small"].data_location == saved["tiny"].data_location == saved["edge"].data_location == TensorProto.DEFAULT
    assert numpy_helper.to_array(saved["small"]).tolist() == SMALL.tolist()
    assert list(saved["tiny"].float_data) == [0.5, 0.25, 2.0, 4.0]
    assert embedded_weight_bytes(onnx.load(str(path), load_external_data=False)) == 16 + 1024
    data = (tmp_path / "weights.bin").read_bytes()
    assert len(data) == 8192 + 1200
    assert data[:1200] == BIG.tobytes() and data[1200:4096] == b"\0" * 2896 and data[4096:5296] == TYPED.tobytes()
    assert data[5296:8192] == b"\0" * 2896 and data[8192:] == THIRD.tobytes()


def test_an_externalised_model_computes_the_same(tmp_path):
    path = save(model(), tmp_path / "m.onnx")
    x = np.full((1, 300), 0.5, np.float32)
    prepared = PreparedModel.load(load_model(path), RuntimeConfig(), externalise_above=1000)
    try:
        workdir = prepared.workdir
        assert workdir is not None and sorted(os.listdir(workdir)) == ["model.onnx", "weights.bin"]
        assert prepared.label == str(path) and prepared.run_path == os.path.join(workdir, "model.onnx")
        assert prepared.graph.uses_external_data
        np.testing.assert_array_equal(prepared.initializer("big"), BIG)
        np.testing.assert_array_equal(prepared.initializer("typed"), TYPED)
        out = prepared.open_full(["s"]).run({"x": x}, ["y", "s"])
        np.testing.assert_allclose(out["y"], expected(x), rtol=1e-5)
    finally:
        prepared.close()
    assert not os.path.exists(workdir)
    prepared.close()  # twice: nothing left to remove


def test_small_weights_stay_embedded(tmp_path):
    graph = load_model(save(model(), tmp_path / "m.onnx"))
    prepared = PreparedModel.load(graph, RuntimeConfig(), externalise_above=3440)  # exactly the embedded bytes
    assert prepared.graph is graph and prepared.workdir is None and prepared.run_path == str(tmp_path / "m.onnx")
    prepared.close()
    assert (tmp_path / "m.onnx").exists()
    above = PreparedModel.load(load_model(tmp_path / "m.onnx"), RuntimeConfig(), externalise_above=3439)
    assert above.workdir is not None
    above.close()


def test_a_weight_already_external_is_left_and_the_pass_goes_on(tmp_path):
    # A model that mixes external and embedded weights: the external one keeps its reference, and the
    # large embedded ones after it are still moved out (a `break` there left them embedded: mutant 16).
    proto = model()
    first = proto.graph.initializer[0]
    assert first.name == "big"
    first.ClearField("raw_data")
    first.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "elsewhere.bin"), ("offset", "0"), ("length", "1200")):
        entry = first.external_data.add()
        entry.key, entry.value = key, value
    path = externalise(ModelGraph.from_proto(proto), tmp_path)
    saved = {t.name: t for t in onnx.load(str(path), load_external_data=False).graph.initializer}
    assert [(e.key, e.value) for e in saved["big"].external_data] == [
        ("location", "elsewhere.bin"), ("offset", "0"), ("length", "1200")]
    assert [(e.key, e.value) for e in saved["typed"].external_data] == [
        ("location", "weights.bin"), ("offset", "0"), ("length", "1200")]
    assert [(e.key, e.value) for e in saved["third"].external_data] == [
        ("location", "weights.bin"), ("offset", "4096"), ("length", "1200")]
    assert (tmp_path / "weights.bin").read_bytes()[4096:] == THIRD.tobytes()
