"""Deployed capture of a 1-D convolution in an int8 model (issue 14: per-channel QDQ OCR heads and
GRU/If voice-activity models exited 4, 'axes don't match array' / 'tuple index out of range').

Cause: onnxruntime runs the int8 Conv channels-last; optgraph.py records that layout as NHWC,
(0, 2, 3, 1), whatever the rank, so undoing it on the rank-3 output of a Conv1d failed. The layout
is now taken at the array's own rank, (0, 2, 1), checked against the declared shape.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from inspector_cli.compare.capture import Reader, settle_layout
from inspector_cli.testing.models import quantize_qdq, save_samples

from ..fixtures.helpers import init, invoke, make_model, read_json, save, vi


def _conv1d_model():  # type: ignore[no-untyped-def]
    """x[batch, 4, 16] -> Conv1d(8, k3) -> Relu -> Conv1d(8, k3) -> y (an OCR head over a sequence)."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="conv2", pads=[1, 1])]
    inits = [init("w1", rng.normal(size=(8, 4, 3)).astype(np.float32)), init("b1", np.zeros(8, np.float32)),
             init("w2", rng.normal(size=(8, 8, 3)).astype(np.float32) * 0.3), init("b2", np.zeros(8, np.float32))]
    return make_model(nodes, [vi("x", ["batch", 4, 16])], [vi("y", ["batch", 8, 16])], inits, opset=13)


def test_per_channel_int8_conv1d_is_compared_in_its_own_layout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a = save(_conv1d_model(), tmp_path / "a.onnx")
    rng = np.random.default_rng(1)
    samples = [{"x": rng.normal(size=(1, 4, 16)).astype(np.float32)} for _ in range(6)]
    b = quantize_qdq(a, tmp_path / "b.onnx", samples[2:], per_channel=True)
    save_samples(samples[:2], tmp_path / "data")
    invoke(["compare", a, b, "--inputs", tmp_path / "data", "--layers", "all", "--isolate", "all",
            "--json", tmp_path / "r.json"], exit_code=0)
    layers = {row["name"]: row for row in read_json(tmp_path / "r.json")["results"]["layers"]["layers"]}
    relu = layers["r1"]
    assert relu["capture_b"] == "deployed" and relu["shape_b"] == relu["shape_a"] == [1, 8, 16]
    assert relu["dataset"]["cosine"] > 0.99 and layers["y"]["dataset"]["cosine"] > 0.99


def test_settle_layout_rebuilds_channels_last_at_the_array_rank() -> None:
    nhwc = Reader("t", None, (0, 2, 3, 1))
    assert settle_layout(nhwc, np.zeros((1, 16, 8)), ("batch", 8, 16)).perm == (0, 2, 1)
    assert settle_layout(nhwc, np.zeros((1, 8, 16)), ("batch", 8, 16)).perm is None  # already as declared
    assert settle_layout(nhwc, np.zeros((8, 16)), None).perm is None
