"""Tensors onnxruntime fuses away in the deployed graph are read from their recomputed chain
(issue 14, zoo defect DEPLOYED_FUSED: vit/whisper_enc/efficientnet `dynamic`, segformer `qop`).

The graph: x[N,8] -> MatMul w -> h -> Div sqrt(2) -> d -> Erf -> e -> Add 1 -> g -> Mul(h, g) -> m -> Mul 0.5
-> y, the erf Gelu as exporters write it. At the default level onnxruntime fuses Div/Erf/Add/Mul/Mul into
one Gelu kernel, so d, e, g and m do not exist in the deployed graph: deployed capture reported them "not
materialised". They are now recomputed beside the deployed kernels and marked so.
"""
from __future__ import annotations

import json
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.core import runner
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, invoke, make_model, save, vi

X = np.array([[0.5, -1.0, 2.0, 0.25, -0.75, 1.5, -2.0, 1.0],
              [1.0, 0.5, -0.5, -1.5, 2.0, -0.25, 0.75, -1.0]], np.float32)


def _weights(shift: float) -> np.ndarray:
    w = (np.arange(32, dtype=np.float32).reshape(8, 4) - 16) / 16
    w[:, 1] += shift  # the candidate's second column differs
    return w


def _gelu_model(shift: float, fused_pattern: bool = True) -> onnx.ModelProto:
    """The erf Gelu after a MatMul; without `fused_pattern` the Gelu is cut by a Relu onnxruntime cannot fuse."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Div", ["h", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["g"], name="add"),
             helper.make_node("Mul", ["h" if fused_pattern else "r", "g"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["y"], name="half_mul")]
    if not fused_pattern:
        nodes.insert(1, helper.make_node("Relu", ["h"], ["r"], name="relu"))
    inits = [init("w", _weights(shift)), init("sqrt2", np.array(math.sqrt(2), np.float32)),
             init("one", np.array(1.0, np.float32)), init("half", np.array(0.5, np.float32))]
    return make_model(nodes, [vi("x", ["N", 8])], [vi("y", ["N", 4])], inits)


def _deployed_ops(path) -> list:  # type: ignore[no-untyped-def]
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(path.with_suffix(".opt.onnx"))
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(path.with_suffix(".opt.onnx"))).graph.node]


def _unfused(path, names):  # type: ignore[no-untyped-def]
    """The tensors `names` of the model run with optimisation off, exposed as outputs (independent of mi)."""
    model = onnx.load(str(path))
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, {"x": X})))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / math.sqrt((a @ a) * (b @ b)))


@pytest.fixture()
def sessions(monkeypatch):  # type: ignore[no-untyped-def]
    """Labels of every onnxruntime session mi opens."""
    labels = []
    original = runner.Session.__init__

    def counting(self, source, runtime=runner.RuntimeConfig(), *, label="model", **kw):  # type: ignore[no-untyped-def]
        labels.append(label)
        original(self, source, runtime, label=label, **kw)

    monkeypatch.setattr(runner.Session, "__init__", counting)
    return labels


def _compare(tmp_path, fused_pattern: bool):  # type: ignore[no-untyped-def]
    a = save(_gelu_model(0.0, fused_pattern), tmp_path / f"a{fused_pattern}.onnx")
    b = save(_gelu_model(0.5, fused_pattern), tmp_path / f"b{fused_pattern}.onnx")
    save_samples([{"x": X}], tmp_path / "data")
    config = CompareConfig(inputs=(str(tmp_path / "data"),),
                           layers=LayerConfig(granularity="tensor", capture="deployed"))
    return a, b, compare_models(a, b, config).layers


def test_fused_gelu_tensors_are_recomputed_and_marked(tmp_path, sessions) -> None:  # type: ignore[no-untyped-def]
    a, b, section = _compare(tmp_path, fused_pattern=True)
    ops = _deployed_ops(b)
    assert "Gelu" in ops and not {"Div", "Erf"} & set(ops)  # the cause: d, e, g, m do not exist as deployed
    rows = {row.name: row for row in section.layers}
    assert set(rows) == {"h", "d", "e", "g", "m", "y"}
    assert not [u for u in section.unpaired_a if "materialised" in u.reason]
    for name in ("d", "e", "g", "m"):
        assert (rows[name].capture_a, rows[name].capture_b) == ("recomputed", "recomputed")
        assert "model B: fused away as deployed" in rows[name].recomputed
    assert rows["g"].recomputed.endswith("Div+Erf+Add rerun unfused on the deployed graph's tensors")
    for name in ("h", "y"):  # MatMul output and Gelu output exist as deployed: read there
        assert (rows[name].capture_a, rows[name].capture_b, rows[name].recomputed) == ("deployed", "deployed", None)
    # d = h / sqrt(2), h = x @ w: B's column 1 is 0.5 * sum(x) larger, so by hand
    h_a, h_b = X @ _weights(0.0), X @ _weights(0.5)
    assert rows["d"].dataset["max_abs"] == pytest.approx(0.5 * np.abs(X.sum(1)).max() / math.sqrt(2), rel=1e-5)
    assert rows["d"].dataset["cosine"] == pytest.approx(_cosine(h_a, h_b), abs=1e-6)
    truth_a, truth_b = _unfused(a, ["e", "g", "m"]), _unfused(b, ["e", "g", "m"])
    for name in ("e", "g", "m"):
        assert rows[name].dataset["cosine"] == pytest.approx(_cosine(truth_a[name], truth_b[name]), abs=1e-6)
        assert rows[name].dataset["max_abs"] == pytest.approx(float(np.abs(truth_a[name] - truth_b[name]).max()),
                                                              abs=1e-6)
    assert sum("recomputation" in label for label in sessions) == 2  # one check per model, at planning


def test_nothing_fused_away_opens_no_extra_session(tmp_path, sessions) -> None:  # type: ignore[no-untyped-def]
    _, b, section = _compare(tmp_path, fused_pattern=False)
    assert "Gelu" not in _deployed_ops(b)  # the Relu breaks the pattern: every tensor exists as deployed
    assert {r.capture_b for r in section.layers} == {"deployed"} and all(r.recomputed is None for r in section.layers)
    assert not [label for label in sessions if "recomputation" in label]


def test_the_table_marks_recomputed_rows_and_says_why(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a = save(_gelu_model(0.0), tmp_path / "a.onnx")
    b = save(_gelu_model(0.5), tmp_path / "b.onnx")
    save_samples([{"x": X}], tmp_path / "data")
    out = tmp_path / "r.json"
    result = invoke(["compare", str(a), str(b), "--inputs", str(tmp_path / "data"), "--layers", "all",
                     "--granularity", "tensor", "--capture", "deployed", "--wide", "--json", str(out)],
                    env={"COLUMNS": "250", "NO_COLOR": "1"})
    lines = {line.split()[1]: line for line in result.output.splitlines() if line.split()[:1] in (["0"], ["1"], ["5"])}
    assert "recomputed A+B" in lines["d"] and "recomputed" not in lines["h"] + lines["y"]
    text = " ".join(result.output.split())
    assert "recomputed A/B = 4 layer(s) fused away in that model's deployed graph" in text
    assert "model A deployed (4 recomputed), model B deployed (4 recomputed)" in text
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]["layers"]["layers"]}
    assert rows["e"]["capture_b"] == "recomputed" and rows["e"]["recomputed"].startswith("model A: fused away")


@pytest.mark.parametrize("refuse", ["deployed", "both"])
def test_a_refused_recomputation_falls_back_to_the_inputs_then_to_unread(tmp_path, monkeypatch, refuse):  # type: ignore[no-untyped-def]
    """onnxruntime refusing the combined graph (a boundary tensor of another type or layout) is simulated;
    the chains are then fed from the model inputs (same values here), and if that is refused too, the
    tensors are reported not materialised, as before, with a warning saying why."""
    from inspector_cli.compare import fused_side

    real = fused_side._runs

    def refusing(recomputation, runtime, label, first):  # type: ignore[no-untyped-def]
        if refuse == "both" or recomputation.from_deployed:
            return "Type Error: refused for the test"
        assert {n.name for n in recomputation.graph.nodes if n.name.startswith(fused_side.PREFIX)} == \
            {fused_side.PREFIX + n for n in ("mm", "div", "erf", "add", "mul")}  # the MatMul is recomputed too
        return real(recomputation, runtime, label, first)

    monkeypatch.setattr(fused_side, "_runs", refusing)
    _, _, section = _compare(tmp_path, fused_pattern=True)
    rows = {row.name: row for row in section.layers}
    if refuse == "both":
        assert set(rows) == {"h", "y"}
        assert {u.tensor for u in section.unpaired_a if "not materialised" in u.reason} == {"d", "e", "g", "m"}
        assert any("could not be recomputed (Type Error: refused for the test)" in n for n in section.capture.notes)
        return
    assert rows["g"].recomputed.endswith(
        "model B: fused away as deployed; 4 ops ending Div+Erf+Add rerun unfused on the model inputs")
    h_a, h_b = X @ _weights(0.0), X @ _weights(0.5)
    assert rows["d"].dataset["cosine"] == pytest.approx(_cosine(h_a, h_b), abs=1e-6)


def test_recomputed_layers_are_isolated(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--isolate feeds B's subgraph with A's captured tensors: for recomputed rows those come from A's
    combined graph. Only the MatMul weights differ, so h has its own error and the Gelu's tensors none."""
    a = save(_gelu_model(0.0), tmp_path / "a.onnx")
    b = save(_gelu_model(0.5), tmp_path / "b.onnx")
    save_samples([{"x": X}], tmp_path / "data")
    config = CompareConfig(inputs=(str(tmp_path / "data"),),
                           layers=LayerConfig(granularity="tensor", capture="deployed", isolate=("all",)))
    section = compare_models(a, b, config).layers
    rows = {row.name: row for row in section.layers}
    assert section.isolation["skipped"] == {} and set(section.isolation["isolated"]) == set(rows)
    assert rows["h"].error_source == "own" and rows["h"].isolated["max_abs"] == pytest.approx(0.75, rel=1e-6)
    for name in ("d", "e", "g", "m"):
        assert rows[name].capture_b == "recomputed"
        assert rows[name].isolated["max_abs"] == 0.0 and rows[name].error_source == "inherited"


def _quantised_gelu(shift: float) -> onnx.ModelProto:
    """The Gelu model with its output quantised (y -> Q -> DQ -> z): a quantised model, which auto capture
    reads as deployed when enough of its tensors can be read there."""
    model = _gelu_model(shift)
    model.graph.node.extend([helper.make_node("QuantizeLinear", ["y", "scale", "zero"], ["q"], name="quant"),
                             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["z"], name="dequant")])
    model.graph.initializer.extend([init("scale", np.array(0.05, np.float32)), init("zero", np.array(0, np.int8))])
    del model.graph.output[:]
    model.graph.output.append(vi("z", ["N", 4]))
    return model


@pytest.mark.parametrize("recomputable", [True, False])
def test_auto_capture_counts_recomputed_tensors_as_read(tmp_path, monkeypatch, recomputable):  # type: ignore[no-untyped-def]
    """Four of the tensors auto capture wants are fused away as deployed, too few located for AUTO_SHARE.
    Recomputed, every one is read as deployed (zoo: fp16 EfficientNet read 74 of 101 located, so it was
    exposed instead, which disables the very fusions deployed; 101 of 101 with recomputation); if the
    recomputation is refused, auto falls back to exposing them, saying so."""
    from inspector_cli.compare import fused_side

    if not recomputable:
        monkeypatch.setattr(fused_side, "_runs", lambda *args: "Type Error: refused for the test")
    a = save(_quantised_gelu(0.0), tmp_path / "a.onnx")
    b = save(_quantised_gelu(0.5), tmp_path / "b.onnx")
    save_samples([{"x": X}], tmp_path / "data")
    config = CompareConfig(inputs=(str(tmp_path / "data"),), layers=LayerConfig(granularity="tensor", capture="auto"))
    section = compare_models(a, b, config).layers
    rows = {row.name: row for row in section.layers}
    assert {"d", "e", "g", "m", "h"} <= set(rows)
    fused = {rows[n].capture_b for n in ("d", "e", "g", "m")}
    if recomputable:
        assert (section.capture.capture_a, section.capture.capture_b) == ("deployed", "deployed")
        assert fused == {"recomputed"} and rows["h"].capture_b == "deployed"
        assert section.capture.notes == []
    else:
        assert (section.capture.capture_a, section.capture.capture_b) == ("instrumented", "instrumented")
        assert fused == {"instrumented"} and all(r.recomputed is None for r in section.layers)
        located = len(rows) - 4
        assert section.capture.notes == [
            f"model {side}: only {located} of {len(rows)} tensors can be read in onnxruntime's optimised graph; "
            "captured by exposing them in the model instead" for side in "AB"]
    truth_a, truth_b = _unfused(a, ["e", "g", "m"]), _unfused(b, ["e", "g", "m"])
    for name in ("e", "g", "m"):  # either way, the values are the tensors' own
        assert rows[name].dataset["cosine"] == pytest.approx(_cosine(truth_a[name], truth_b[name]), abs=1e-6)
