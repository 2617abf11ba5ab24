"""On a real provider: onnxruntime-openvino (scripts/test_providers.sh builds its venv). Skipped
where the installed onnxruntime has no OpenVINOExecutionProvider (the default CPU build)."""
from __future__ import annotations

import pytest

from ..fixtures.helpers import invoke, read_json
from .models import conv_block, with_det

OV = "OpenVINOExecutionProvider"
CPU = "CPUExecutionProvider"


def _has_openvino() -> bool:
    import onnxruntime

    return OV in onnxruntime.get_available_providers()


pytestmark = [pytest.mark.providers,
              pytest.mark.skipif(not _has_openvino(), reason="onnxruntime without OpenVINOExecutionProvider")]


def _profile(model, tmp_path, *extra, exit_code=0):
    out = tmp_path / "r.json"
    result = invoke(["profile", model, "--runs", "2", "--warmup", "1", "--no-memory-stats",
                     "--providers", "openvino,cpu", "--json", out, *extra], exit_code=exit_code)
    return result, read_json(out)["results"]


def test_cnn_block_runs_whole_on_openvino(tmp_path):
    _, doc = _profile(conv_block(tmp_path), tmp_path, "--require-provider", "openvino")
    placement = doc["profiles"][0]["placement"]
    assert placement["requested"] == OV and placement["subgraphs"] == 1
    assert placement["nodes"] == {"conv": OV, "relu": OV, "sig": OV, "mul": OV}
    assert [(p["provider"], p["nodes"], p["time_share"]) for p in placement["providers"]] == [(OV, 4, 1.0)]
    assert placement["fallback"] == []
    kernels = doc["profiles"][0]["kernels"]
    assert [k["provider"] for k in kernels] == [OV] and "OpenVINO-EP-subgraph" in kernels[0]["name"]


def test_unsupported_op_falls_back_to_cpu_and_require_provider_fails(tmp_path):
    result, doc = _profile(with_det(tmp_path), tmp_path, "--require-provider", "openvino", exit_code=1)
    placement = doc["profiles"][0]["placement"]
    assert placement["nodes"]["det"] == CPU and placement["nodes"]["relu"] == OV
    assert ("det", "Det") in [(f["node"], f["op_type"]) for f in placement["fallback"]]
    finding = [f for f in doc["findings"] if f["rule"] == "MI871"][0]
    assert "det (Det on CPUExecutionProvider)" in finding["message"] and "det" in finding["data"]["nodes"]
    assert "relu" not in finding["data"]["nodes"]
    assert "fell back" in " ".join(result.stdout.split())
