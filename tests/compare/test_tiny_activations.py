"""Layer metrics of tiny activations (issue 14, zoo: random-init MobileNetV2/EfficientNet activations are
~1e-25; every layer row said cosine 1.000000 where the recomputation gives 0.9966-0.998).

Cause: the layer metrics (diff/fast_stats.py) squared float32 values in float32: (1e-25)^2 underflows to
0, so a.a = b.b = 0 and the cosine of two all-"zero" tensors is 1. The values are now scaled by a power
of two first (exact), so the cosine is that of the values themselves.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, make_model, save, vi

S = 2.0 ** -83  # ~1e-25


def _model(gains):  # type: ignore[no-untyped-def]
    """x[1,2] -> Mul(gains * 2**-83) -> t (tiny) -> Mul(2**83) -> out."""
    nodes = [helper.make_node("Mul", ["x", "g"], ["t"], name="shrink"),
             helper.make_node("Mul", ["t", "up"], ["out"], name="grow")]
    inits = [init("g", np.array(gains, np.float32) * np.float32(S)), init("up", np.array(2.0 ** 83, np.float32))]
    return make_model(nodes, [vi("x", [1, 2])], [vi("out", [1, 2])], inits)


def test_tiny_layer_has_its_true_cosine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a = save(_model([1.0, 1.0]), tmp_path / "a.onnx")
    b = save(_model([1.0, 0.5]), tmp_path / "b.onnx")
    save_samples([{"x": np.array([[3.0, 4.0]], np.float32)}], tmp_path / "data")
    result = compare_models(a, b, CompareConfig(inputs=(str(tmp_path / "data"),),
                                                layers=LayerConfig(granularity="tensor")))
    rows = {row.name: row for row in result.layers.layers}
    # t: A [3, 4] * 2**-83, B [3, 2] * 2**-83: cosine (9 + 8) / (5 sqrt(13)), max |diff| 2 * 2**-83
    assert rows["t"].dataset["cosine"] == pytest.approx(17 / (5 * math.sqrt(13)), abs=1e-12)
    assert rows["t"].dataset["max_abs"] == 2 * S
    assert rows["out"].dataset["cosine"] == pytest.approx(17 / (5 * math.sqrt(13)), abs=1e-12)  # the same at 1x
