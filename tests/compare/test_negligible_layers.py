"""No false alarm on rounding noise (issue 14, zoo: Swin fp16/int8 named `layernorm_before/ReduceMean_output_0`,
the mean of rows that are already centred, |value| ~6e-8 beside inputs ~3, as the first divergence: cosine
0.1 where the two models differ by 1e-7). Such a layer is `negligible` (max |b - a| <= --layer-atol): shown,
never the first divergence, never a worst layer, no layer gate fails on it; `--layer-atol 0` restores the
strict reading, which proves the models below do reproduce the alarm."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, invoke, make_model, read_json, save, vi

WIDTH = 96  # Swin-T's channels: 1/96 is not a power of two, so the two ways of averaging round differently


def _centring(split: bool):  # type: ignore[no-untyped-def]
    """x[4, 96] -> m1 = mean(x) -> c = x - m1 -> m2 = mean(c) (~1e-8: rounding noise) -> y = c * 2 + m2.
    `split` averages in two stages (2 x 48), another summation order: m1, hence c and m2, round differently."""
    axes = init("axes", np.array([-1], np.int64))
    if split:
        mean = [helper.make_node("Reshape", ["x", "halves"], ["xh"], name="halve"),
                helper.make_node("ReduceMean", ["xh", "axes"], ["mh"], name="mean_halves", keepdims=1),
                helper.make_node("ReduceMean", ["mh", "mid"], ["m1h"], name="mean_of_means", keepdims=1),
                helper.make_node("Reshape", ["m1h", "col"], ["m1"], name="m1_shape")]
        extra = [init("halves", np.array([4, 2, WIDTH // 2], np.int64)), init("mid", np.array([1], np.int64)),
                 init("col", np.array([4, 1], np.int64))]
    else:
        mean = [helper.make_node("ReduceMean", ["x", "axes"], ["m1"], name="mean", keepdims=1)]
        extra = []
    nodes = mean + [helper.make_node("Sub", ["x", "m1"], ["c"], name="centre"),
                    helper.make_node("ReduceMean", ["c", "axes"], ["m2"], name="mean_centred", keepdims=1),
                    helper.make_node("Mul", ["c", "two"], ["c2"], name="double"),
                    helper.make_node("Add", ["c2", "m2"], ["y"], name="add_mean")]
    return make_model(nodes, [vi("x", [4, WIDTH])], [vi("y", [4, WIDTH])],
                      [axes, init("two", np.array(2.0, np.float32))] + extra, opset=18)


@pytest.fixture()
def pair(tmp_path):  # type: ignore[no-untyped-def]
    a = save(_centring(split=False), tmp_path / "a.onnx")
    b = save(_centring(split=True), tmp_path / "b.onnx")
    rng = np.random.default_rng(7)
    save_samples([{"x": (3.0 + 2.0 * rng.standard_normal((4, WIDTH))).astype(np.float32)} for _ in range(3)],
                 tmp_path / "data")
    return a, b, tmp_path / "data"


def _rows(a, b, data, atol):  # type: ignore[no-untyped-def]
    result = compare_models(a, b, CompareConfig(inputs=(str(data),),
                                                layers=LayerConfig(patterns=("m1", "c", "m2", "c2"),
                                                                   granularity="tensor", atol=atol)))
    return result.layers, {row.name: row for row in result.layers.layers}


def test_rounding_noise_is_negligible_not_the_first_divergence(pair) -> None:  # type: ignore[no-untyped-def]
    section, rows = _rows(*pair, atol=1e-5)
    m2 = rows["m2"]
    # the alarm the strict reading raises: m2 is noise (|value| < 1e-6 beside x ~3), its cosine meaningless
    assert m2.dataset["cosine"] < 0.99
    assert m2.dataset["max_abs"] < 1e-6
    assert m2.negligible and not m2.failed_gates and m2.excused_gates == ["cosine"]
    # the layers carrying signal agree to float32 rounding and are not negligible by luck of scale
    assert rows["c"].dataset["cosine"] > 0.999999
    assert section.first_divergence is None
    assert "m2" not in section.worst["cosine"] and "m2" not in section.worst["sqnr"]
    assert section.worst["max_abs"][0] in ("c2", "y")  # absolute errors still rank every layer
    assert section.atol == 1e-5


def test_layer_atol_zero_restores_the_strict_reading(pair) -> None:  # type: ignore[no-untyped-def]
    section, rows = _rows(*pair, atol=0.0)
    assert not rows["m2"].negligible and rows["m2"].excused_gates == []
    assert section.first_divergence == "m2" and section.first_divergence_metrics == ["cosine"]
    assert section.worst["cosine"][0] == "m2"


def test_cli_gate_layers_exit_codes_and_json(pair, tmp_path) -> None:  # type: ignore[no-untyped-def]
    a, b, data = pair
    base = ["compare", str(a), str(b), "--inputs", str(data), "--layers", "all", "--granularity", "tensor",
            "--gate-layers"]
    out = tmp_path / "r.json"
    quiet = invoke(base + ["--json", out], exit_code=0)
    layers = read_json(out)["results"]["layers"]
    assert layers["atol"] == 1e-5 and layers["first_divergence"] is None
    assert {L["name"]: L["negligible"] for L in layers["layers"]}["m2"] is True
    assert "negligible = 1 layer(s) crossing a threshold" in quiet.stdout
    strict = invoke(base + ["--layer-atol", "0"], exit_code=1)
    assert "first divergence: 'm2'" in strict.stdout


def test_layer_atol_needs_layers(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, data = pair
    result = invoke(["compare", a, b, "--inputs", data, "--layer-atol", "0"], exit_code=2)
    assert "--layer-atol needs --layers" in result.stderr
