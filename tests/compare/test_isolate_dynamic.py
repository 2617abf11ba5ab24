"""`--isolate` on models exported with dynamic axes (issue 14): symbolic dims are bound per sample.

Cause of the defect: the isolation model declared each cut tensor with the candidate's static shape
and skipped every layer whose cut had a symbolic dimension, i.e. every layer of a dynamic-batch export.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.core.graph import load_model
from inspector_cli.compare.subgraph import IsolationFeed, feed_shape
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, make_model, save, vi


def _dynamic_model(factor: float):  # type: ignore[no-untyped-def]
    """x[batch, 8] -> MatMul -> h[batch,16] -> Reshape r[batch,4,4] -> Mul(factor) m -> Reshape y[batch,16]
    -> MatMul -> out. Every activation has a symbolic batch dim; `r` (what Mul reads) is a reshaped
    view of the paired `h`, so its shape differs from the reference tensor that feeds it, and only a
    run of the candidate tells it (isoshapes.ShapeProbe)."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
        # the target shape is computed from x (as exporters do): shape inference leaves r's dims unknown
        helper.make_node("Shape", ["x"], ["sx"], name="shape", end=1),
        helper.make_node("Concat", ["sx", "c44"], ["s3"], name="cat", axis=0),
        helper.make_node("Reshape", ["h", "s3"], ["r"], name="rs1"),
        helper.make_node("Mul", ["r", "k"], ["m"], name="mul"),
        helper.make_node("Reshape", ["m", "s2"], ["y"], name="rs2"),
        helper.make_node("Relu", ["y"], ["z"], name="relu"),
        helper.make_node("MatMul", ["z", "w2"], ["out"], name="mm2"),
    ]
    inits = [init("w1", rng.normal(size=(8, 16)).astype(np.float32)),
             init("w2", rng.normal(size=(16, 5)).astype(np.float32)),
             init("c44", np.array([4, -1], np.int64)), init("s2", np.array([-1, 16], np.int64)),
             init("k", np.array(factor, np.float32))]
    return make_model(nodes, [vi("x", ["batch", 8])], [vi("out", ["batch", 5])], inits)


@pytest.fixture(scope="module")
def dynamic_pair(tmp_path_factory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("dyn")
    a = save(_dynamic_model(2.0), folder / "a.onnx")
    b = save(_dynamic_model(2.2), folder / "b.onnx")  # the Mul is the culprit
    rng = np.random.default_rng(0)
    save_samples([{"x": rng.normal(size=(batch, 8)).astype(np.float32)} for batch in (3, 3, 2)], folder / "data")
    return a, b, folder / "data"


def test_dynamic_batch_layers_are_isolated_and_the_culprit_named(dynamic_pair):  # type: ignore[no-untyped-def]
    a, b, data = dynamic_pair
    result = compare_models(a, b, CompareConfig(inputs=(str(data),),
                                                layers=LayerConfig(granularity="tensor", isolate=("all",))))
    rows = {row.name: row for row in result.layers.layers}
    iso = result.layers.isolation
    assert not [k for k, why in iso["skipped"].items() if "model input" not in why]
    assert set(iso["isolated"]) >= {"h", "m", "z", "out"}
    # h is computed identically: its own error is zero; m (x2.2 vs x2) owns all of its error.
    assert rows["h"].isolated["max_abs"] == 0.0
    assert rows["m"].error_source == "own" and rows["m"].own_share == pytest.approx(1.0, abs=1e-6)
    assert rows["m"].isolated["cosine"] == pytest.approx(1.0, abs=1e-6)  # a scale: cosine 1, error 10%
    assert rows["z"].error_source == "inherited" and rows["z"].isolated["max_abs"] == 0.0
    assert rows["out"].error_source == "inherited"
    shape = load_model(b).tensor_info("r").shape  # symbolic in the candidate: only the probe knows it
    assert shape is None or sum(not isinstance(d, int) for d in shape) >= 2


def test_feed_shape_binds_symbolic_dims_from_the_observed_value() -> None:
    feed = IsolationFeed("t", "t", 1, (None, 4, 4))
    assert feed_shape(feed, 48, (3, 4, 4)) == (3, 4, 4)
    assert feed_shape(feed, 32, (2, 16)) == (2, 4, 4)  # a view of another shape: the one free dim is inferred
    with pytest.raises(ValueError, match="isolation input 't'"):
        feed_shape(IsolationFeed("t", "t", 1, (None, None, 4)), 48, (3, 16))
    unranked = IsolationFeed("t", "t", 1, None)  # QOperator output: shape inference knew nothing
    with pytest.raises(ValueError):  # the reference's [1, 512, 1, 1] may be what the candidate flattened
        feed_shape(unranked, 512, (1, 512, 1, 1))
    assert feed_shape(unranked, 512, (1, 512), exact=True) == (1, 512)  # the candidate's own shape
