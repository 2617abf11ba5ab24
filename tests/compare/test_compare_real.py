"""A real fp32 vs int8 QDQ pair: the tool's metrics against an independent numpy computation."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from inspector_cli import CompareConfig, compare_models
from inspector_cli.diff.gates import parse_gate

from ..fixtures.helpers import invoke, read_json


def independent_outputs(model_path, samples):
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return [session.run(None, dict(np.load(p)))[0] for p in samples]


def test_qdq_pair_metrics_match_numpy(cnn_pair, tmp_path):
    fp32, int8, data = cnn_pair
    ops = {n.op_type for n in onnx.load(str(int8)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops  # really a QDQ model
    result = compare_models(fp32, int8, CompareConfig(inputs=(str(data),),
                                                     gates=(parse_gate("min-top5", "0.6"),)))
    files = sorted(data.glob("*.npz"))
    ref, cand = independent_outputs(fp32, files), independent_outputs(int8, files)
    cosines, top5 = [], []
    for a, b in zip(ref, cand):
        a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
        cosines.append(a64 @ b64 / np.linalg.norm(a64) / np.linalg.norm(b64))
        top5.append(len(set(np.argsort(-a[0])[:5]) & set(np.argsort(-b[0])[:5])) / 5)
    out = result.outputs[0]
    assert out.name == "logits" and out.samples == 6
    assert [s.metrics["cosine"] for s in out.per_sample] == pytest.approx(cosines, rel=1e-9)
    assert [s.metrics["top5"] for s in out.per_sample] == pytest.approx(top5)
    assert out.worst["cosine"] == pytest.approx(min(cosines), rel=1e-9)
    assert out.mean["top5"] == pytest.approx(np.mean(top5))
    a_all = np.concatenate([r.ravel() for r in ref]).astype(np.float64)
    b_all = np.concatenate([c.ravel() for c in cand]).astype(np.float64)
    assert out.dataset["cosine"] == pytest.approx(a_all @ b_all / np.linalg.norm(a_all) / np.linalg.norm(b_all))
    assert 0.9 < out.dataset["cosine"] < 1.0  # quantisation changes the outputs, but not wildly
    gate = result.gates[0]
    assert gate.failed_samples == sum(t < 0.6 for t in top5)


def test_qdq_pair_through_cli_gates(cnn_pair, tmp_path):
    fp32, int8, data = cnn_pair
    invoke(["compare", fp32, int8, "--inputs", data, "--min-cosine", "0.9", "--min-top1", "0.5",
            "--json", tmp_path / "ok.json"], exit_code=0)
    invoke(["compare", fp32, int8, "--inputs", data, "--min-cosine", "0.99999", "--json", tmp_path / "bad.json"],
           exit_code=1)
    gate = read_json(tmp_path / "bad.json")["results"]["gates"][0]
    assert gate["failed_samples"] == 6 and gate["passed"] is False
