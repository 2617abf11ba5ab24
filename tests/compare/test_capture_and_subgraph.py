"""Focused tests of the layer-capture set-up (compare/capture.py with the optimised-graph reader,
compare/pairing/optgraph.py) and of subgraph isolation (compare/subgraph.py)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from inspector_cli.compare.capture import prepare_side
from inspector_cli.compare.config import CaptureMode
from inspector_cli.compare.pairing.match import match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.compare.subgraph import build_isolation
from inspector_cli.core.expose import serialized_with_outputs
from inspector_cli.core.graph import load_model
from inspector_cli.core.lazyload import load_model_lazy
from inspector_cli.core.runner import RuntimeConfig, Session, open_session
from inspector_cli.testing.models import image_samples, quantize_qdq

from ..fixtures.helpers import init, make_model, save, vi

W1 = np.random.default_rng(0).normal(0, 0.5, (4, 6)).astype(np.float32)
W2 = np.random.default_rng(1).normal(0, 0.5, (6, 3)).astype(np.float32)


def mlp(w1_scale: float):
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 3])], [init("w1", W1 * w1_scale), init("w2", W2)])


@pytest.fixture(scope="module")
def int8_sides(cnn_pair, tmp_path_factory):
    """Both capture modes of cnn_pair's CNN quantised with 7-bit weights: deployed capture reads
    onnxruntime's fused kernels, instrumented capture exposes the views as outputs (which keeps some
    Q/DQ groups from fusing: QDQ arithmetic there), and the two agree only where the fused int8 sums
    are exact. With
    full-range weights they are not on x86 without VNNI (core/fingerprint.u8s8_saturates; measured on
    an AMD EPYC: bn_15_out 6 steps apart, 0.0973 with a 0.0163 step)."""
    fp32, _, _ = cnn_pair
    calibration = image_samples(16, (1, 3, 32, 32), seed=100)  # build_pair's calibration
    int8 = quantize_qdq(fp32, tmp_path_factory.mktemp("int8_rr") / "model_int8.onnx", calibration, reduce_range=True)
    ga, gb = load_model_lazy(fp32), load_model_lazy(int8)
    sa, sb = SemanticGraph.build(ga), SemanticGraph.build(gb)
    pairs = match_tensors(sa, sb, inputs=[("input", "input")], user_map={}).pairs
    views = [p.view_b for p in pairs]
    sample = image_samples(1, seed=3)[0]
    work = tmp_path_factory.mktemp("capture")
    sides = {mode: prepare_side("B", gb, sb, RuntimeConfig(), views, mode, sample, observer=False, workdir=work)
             for mode in (CaptureMode.DEPLOYED, CaptureMode.INSTRUMENTED)}
    return gb, pairs, sample, sides


def captured(side, views, sample):
    exposes = [side.readers[v.expose].expose for v in views]
    graph = side.target_graph
    session = Session(serialized_with_outputs(graph, exposes), side.target_runtime, label="capture",
                      external_dir=graph.folder if graph.uses_external_data else None)
    raw = session.run(sample, exposes)
    return {v.expose: side.readers[v.expose].value(raw[e], side.resolver) for v, e in zip(views, exposes)}


def test_deployed_capture_reads_every_tensor_from_onnxruntimes_optimised_graph(int8_sides):
    graph, pairs, sample, sides = int8_sides
    side = sides[CaptureMode.DEPLOYED]
    assert side.mode == "deployed" and side.opt is not None
    assert side.target_graph.path.name == "b_optimised.onnx"
    assert len(pairs) == 11 and side.unavailable == {} and len(side.readers) == 11
    assert [p.a for p in pairs][:3] == ["input", "relu_3_out", "relu_6_out"] and pairs[-1].a == "logits"
    # the kernels are the deployed ones: the logits read there are bit-identical to a plain run
    values = captured(side, [p.view_b for p in pairs], sample)
    plain = open_session(graph, RuntimeConfig(), label="plain").run(sample, ["logits"])["logits"]
    assert np.array_equal(values["logits"], plain.reshape(-1))


def test_deployed_and_instrumented_capture_agree_within_one_quantisation_step(int8_sides):
    _, pairs, sample, sides = int8_sides
    instrumented = sides[CaptureMode.INSTRUMENTED]
    assert instrumented.mode == "instrumented" and instrumented.opt is None
    views = [p.view_b for p in pairs]
    deployed, exposed = captured(sides[CaptureMode.DEPLOYED], views, sample), captured(instrumented, views, sample)
    reader = instrumented.readers["relu_3_out_QuantizeLinear_Output"]
    step = float(instrumented.resolver.array(reader.quant.scale))
    for view in views:
        assert np.max(np.abs(deployed[view.expose] - exposed[view.expose])) <= step + 1e-6, view.expose


def test_isolation_model_is_the_candidates_subgraph_fed_with_reference_values(tmp_path):
    ga, gb = load_model(save(mlp(1.0), tmp_path / "a.onnx")), load_model(save(mlp(1.1), tmp_path / "b.onnx"))
    sa, sb = SemanticGraph.build(ga), SemanticGraph.build(gb)
    pairs = match_tensors(sa, sb, inputs=[("x", "x")], user_map={}, selected={"h", "r", "y"}).pairs
    assert [(p.a, p.b, p.op_a) for p in pairs] == [("h", "h", "MatMul"), ("r", "r", "MatMul+Relu"), ("y", "y", "MatMul")]
    plan = build_isolation(sb, pairs, pairs, {"x": "x"})
    assert [n.name for n in plan.model.graph.node] == ["iso0/fc1", "iso1/relu", "iso2/fc2"]
    assert [(f.name, f.source, f.shape) for f in plan.feeds] == [("x", "x", (1, 4)), ("h", "h", (1, 6)),
                                                                   ("r", "r", (1, 6))]
    assert plan.outputs == {"h": "iso0/h", "r": "iso1/r", "y": "iso2/y"} and plan.skipped == {}
    x = np.array([[1.0, -2.0, 0.5, 3.0]], np.float32)
    h = x @ W1  # the reference's values of the cut tensors
    r = np.maximum(h, 0)
    out = Session(plan.model.SerializeToString(), RuntimeConfig(), label="iso").run(
        {"x": x, "h": h, "r": r}, list(plan.outputs.values()))
    np.testing.assert_allclose(out["iso0/h"], x @ (W1 * 1.1), rtol=1e-6)  # fc1's own error: its weights
    np.testing.assert_array_equal(out["iso1/r"], r)  # relu adds none
    np.testing.assert_allclose(out["iso2/y"], r @ W2, rtol=1e-6)  # fc2 adds none: B's y error is inherited
