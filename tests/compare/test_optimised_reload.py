"""Deployed capture whose saved optimised graph would not reload (issue 29): an older onnxruntime writes
DequantizeLinear `axis` into an opset-11 QDQ graph (converter-made, per-tensor, as paddle2onnx writes it),
which onnxruntime then refuses to load. That is our round trip's defect, not the model's: the side falls back
to instrumented capture and says so in one line, instead of exit 3 blaming model B."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from inspector_cli.compare import capture
from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.workflows.compare import compare_models


def _models(folder: Path):
    """fp32 Conv+Relu and its per-tensor int8 QDQ form at opset 11 (int32 bias DequantizeLinear)."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(8) * 0.1).astype(np.float32)
    io = [h.make_tensor_value_info("input", T.FLOAT, [1, 3, 8, 8])], [h.make_tensor_value_info("output", T.FLOAT, [1, 8, 8, 8])]
    fp32 = h.make_graph([h.make_node("Conv", ["input", "w", "b"], ["conv"], name="conv", pads=[1] * 4),
                         h.make_node("Relu", ["conv"], ["output"], name="relu")], "fp32", *io,
                        [nh.from_array(w, "w"), nh.from_array(b, "b")])
    ws, xs = float(np.abs(w).max() / 127), 0.02
    inits = [nh.from_array(np.array(xs, np.float32), "xs"), nh.from_array(np.array(128, np.uint8), "xz"),
             nh.from_array(np.clip(np.round(w / ws), -127, 127).astype(np.int8), "wq"),
             nh.from_array(np.array(ws, np.float32), "ws"), nh.from_array(np.array(0, np.int8), "wz"),
             nh.from_array(np.round(b / (xs * ws)).astype(np.int32), "bq"),
             nh.from_array(np.array(xs * ws, np.float32), "bs"), nh.from_array(np.array(0, np.int32), "bz"),
             nh.from_array(np.array(0.01, np.float32), "os"), nh.from_array(np.array(0, np.uint8), "oz")]
    nodes = [h.make_node("QuantizeLinear", ["input", "xs", "xz"], ["xq"], name="in_Q"),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"], name="in_DQ"),
             h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="w_DQ"),
             h.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["b"], name="b_DQ"),
             h.make_node("Conv", ["x", "w", "b"], ["conv"], name="conv", pads=[1] * 4),
             h.make_node("Relu", ["conv"], ["relu"], name="relu"),
             h.make_node("QuantizeLinear", ["relu", "os", "oz"], ["oq"], name="out_Q"),
             h.make_node("DequantizeLinear", ["oq", "os", "oz"], ["output"], name="out_DQ")]
    int8 = h.make_graph(nodes, "int8", *io, inits)
    paths = []
    for name, graph in (("fp32", fp32), ("int8", int8)):
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 11)], producer_name="paddle2onnx")
        model.ir_version = 6
        onnx.checker.check_model(model)
        onnx.save(model, str(folder / f"{name}.onnx"))
        paths.append(folder / f"{name}.onnx")
    np.savez(folder / "sample.npz", input=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    return paths


def _with_axis(load):
    """load_model_lazy of the optimised graph, then every DequantizeLinear given `axis` (what an older
    onnxruntime writes; opset 11 has no such attribute)."""
    def patched(path, *args, **kwargs):
        graph = load(path, *args, **kwargs)
        for node in graph.model.graph.node:
            if node.op_type == "DequantizeLinear" and not any(a.name == "axis" for a in node.attribute):
                node.attribute.append(h.make_attribute("axis", 1))
        return graph
    return patched


@pytest.mark.parametrize("mode", ["auto", "deployed"])
def test_optimised_graph_that_does_not_reload_falls_back_to_instrumented(tmp_path, monkeypatch, mode):
    fp32, int8 = _models(tmp_path)
    config = CompareConfig(inputs=(str(tmp_path / "sample.npz"),), layers=LayerConfig(capture=mode))
    plain = compare_models(fp32, int8, config)  # onnxruntime 1.32 writes a graph that reloads
    assert plain.layers.capture.capture_b == "deployed"
    monkeypatch.setattr(capture, "load_model_lazy", _with_axis(capture.load_model_lazy))
    result = compare_models(fp32, int8, config)
    info = result.layers.capture
    # B falls back; A (fp32) is deployed only when asked for (auto captures an fp32 model instrumented)
    assert (info.capture_a, info.capture_b) == ("instrumented" if mode == "auto" else "deployed", "instrumented")
    notes = [n for n in info.notes if "optimised graph does not reload" in n]
    # the first DequantizeLinear left in onnxruntime's graph (the others fused into QLinearConv)
    assert len(notes) == 1 and re.fullmatch(
        r"model B: onnxruntime's optimised graph does not reload \(DequantizeLinear '[\w/]+': Unrecognized "
        r"attribute: axis for operator DequantizeLinear\); its layers are captured instrumented", notes[0]), notes
    # the same layers, read from the model as exported: equal values within float rounding of the fused kernel
    assert [L.name for L in result.layers.layers] == [L.name for L in plain.layers.layers]
    for ours, deployed in zip(result.layers.layers, plain.layers.layers):
        assert abs(ours.dataset["cosine"] - deployed.dataset["cosine"]) < 1e-4, ours.name
