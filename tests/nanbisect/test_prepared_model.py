"""`PreparedModel` driven directly: tensor sizes per input shape (cached, with a fallback for the
unknown), the sessions it opens (labels, runtimes, what they compute) and initializer values
(issue 15, mutation testing of model.py)."""
from __future__ import annotations

import numpy as np
from onnx import helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.model import SPIN_STOP, PreparedModel
from inspector_cli.nanbisect.regions import make_region

from ..fixtures.helpers import init, make_model, save, vi


def model(batch: object = "N"):
    """x [batch, 4] -> relu (r) -> mul by w (m) -> nonzero (nz, size unknown) ; m -> neg (y)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Mul", ["r", "w"], ["m"], name="mul"),
             helper.make_node("NonZero", ["m"], ["nz"], name="nonzero"), helper.make_node("Neg", ["m"], ["y"], name="neg")]
    return make_model(nodes, [vi("x", [batch, 4])], [vi("y", [batch, 4]), vi("nz", None, 7)],
                      [init("w", np.array([1.0, -2.0, 0.0, 3.0], np.float32))])


def prepared(tmp_path, batch: object = "N", runtime: RuntimeConfig = RuntimeConfig()) -> PreparedModel:
    return PreparedModel(load_model(save(model(batch), tmp_path / "m.onnx")), runtime)


def test_sizes_follow_the_sample_shape_and_are_kept_per_shape(tmp_path):
    p = prepared(tmp_path)
    two = p.sizes({"x": np.zeros((2, 4), np.float32)})
    # 2 x 4 float32 = 32 bytes each; NonZero's output size is unknown: the largest known stands in
    assert two == {"r": 32, "m": 32, "nz": 32, "y": 32}
    assert p.sizes({"x": np.ones((2, 4), np.float32)}) is two  # same shape: the same dict
    assert p.sizes({"x": np.zeros((5, 4), np.float32)}) == {"r": 80, "m": 80, "nz": 80, "y": 80}
    fixed = prepared(tmp_path, batch=3)
    assert fixed.sizes({"x": np.zeros((3, 4), np.float32)}) == {"r": 48, "m": 48, "nz": 48, "y": 48}


def test_weights_are_read_once_and_only_weights_are_weights(tmp_path):
    p = prepared(tmp_path)
    assert p.is_initializer("w") and not p.is_initializer("x") and not p.is_initializer("r")
    w = p.initializer("w")
    assert w.tolist() == [1.0, -2.0, 0.0, 3.0] and p.initializer("w") is w
    assert p.initializer("r") is None
    assert p.label == str(tmp_path / "m.onnx") and p.external_dir is None and p.workdir is None


def test_the_scan_session_and_a_span_replay(tmp_path):
    p = prepared(tmp_path)
    x = np.array([[1.0, -1.0, 2.0, 3.0]], np.float32)
    scan = p.open_full(["r", "m"])
    assert scan.label == f"{p.label} (scan)" and (SPIN_STOP, "1") in scan.runtime.session_config
    out = scan.run({"x": x}, ["y", "r", "m"])
    assert out["r"].tolist() == [[1.0, 0.0, 2.0, 3.0]] and out["m"].tolist() == [[1.0, -0.0, 0.0, 9.0]]
    assert p.open_full([], label="values").label == f"{p.label} (values)"
    # the span relu..mul replayed from x: its target m and the exposed r
    region = make_region(p.topo, ["x"], ["m"])
    span = p.open_region(region, ["r"])
    assert span.label == f"{p.label} (span of 2 nodes)" and span.runtime.intra_op_threads == 1
    assert span.run({"x": x}, ["m", "r"])["m"].tolist() == [[1.0, -0.0, 0.0, 9.0]]
    # a thread count the user chose is kept
    assert prepared(tmp_path, runtime=RuntimeConfig(intra_op_threads=2)).open_region(region, []).runtime.intra_op_threads == 2
