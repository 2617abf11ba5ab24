"""On a real provider: OpenVINO, as a replacement build (onnxruntime-openvino) or as the plugin
package beside the stock onnxruntime (onnxruntime-ep-openvino; routes.py), whichever the venv has
(scripts/test_providers.sh builds both). Skipped where neither is installed (the default venv)."""
from __future__ import annotations

import pytest

from ..fixtures.helpers import invoke, read_json
from ..fixtures.subproc import assert_status, run_mi
from .models import conv_block, conv_then_det, with_det
from .routes import OV, openvino_route

CPU = "CPUExecutionProvider"
ROUTE, ARGS = openvino_route()
"""How OpenVINO is reached here, and the mi arguments that take that way (routes.py)."""

pytestmark = [pytest.mark.providers, pytest.mark.skipif(ROUTE is None, reason=(ARGS or [""])[0])]


def _profile(model, tmp_path, *extra, exit_code=0):
    out = tmp_path / "r.json"
    result = invoke(["profile", model, "--runs", "2", "--warmup", "1", "--no-memory-stats",
                     "--providers", "openvino,cpu", *ARGS, "--json", out, *extra], exit_code=exit_code)
    return result, read_json(out)["results"]


def test_cnn_block_runs_whole_on_openvino(tmp_path):
    _, doc = _profile(conv_block(tmp_path), tmp_path, "--require-provider", "openvino")
    placement = doc["profiles"][0]["placement"]
    assert placement["requested"] == OV and placement["subgraphs"] == 1
    assert placement["nodes"] == {"conv": OV, "relu": OV, "sig": OV, "mul": OV}
    assert [(p["provider"], p["nodes"], p["time_share"]) for p in placement["providers"]] == [(OV, 4, 1.0)]
    assert placement["fallback"] == []
    kernels = doc["profiles"][0]["kernels"]
    # one fused kernel: OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0 (replacement build) or
    # OpenVINOExecutionProvider_OpenVINOExecutionProvider_<hash>_0_0 (plugin)
    assert [k["provider"] for k in kernels] == [OV] and kernels[0]["name"].startswith(f"{OV}_")


def test_unsupported_op_falls_back_to_cpu_and_require_provider_fails(tmp_path):
    result, doc = _profile(with_det(tmp_path), tmp_path, "--require-provider", "openvino", exit_code=1)
    placement = doc["profiles"][0]["placement"]
    assert placement["nodes"]["det"] == CPU and placement["nodes"]["relu"] == OV
    assert ("det", "Det") in [(f["node"], f["op_type"]) for f in placement["fallback"]]
    finding = [f for f in doc["findings"] if f["rule"] == "MI871"][0]
    assert "det (Det on CPUExecutionProvider)" in finding["message"] and "det" in finding["data"]["nodes"]
    assert "relu" not in finding["data"]["nodes"]
    assert "fell back" in " ".join(result.stdout.split())


MOVED = {"conv": [OV, CPU], "relu": [OV, CPU], "sig": [OV, CPU], "mul": [OV, CPU]}
"""Exposing conv_then_det's Conv output makes OpenVINO drop the CNN block it heads (models.py)."""
legacy_only = pytest.mark.skipif(ROUTE != "legacy", reason="the replacement build's capability check drops the "
                                 "block when its Conv output is exposed; the plugin (1.8) keeps it (next test)")


@legacy_only
def test_compare_layers_detects_the_partition_change_and_marks_the_moved_rows(tmp_path):
    model, out, html = conv_then_det(tmp_path), tmp_path / "r.json", tmp_path / "r.html"
    result = invoke(["compare", model, model, "--b-providers", "openvino,cpu", "--layers", "all", "--granularity",
                     "tensor", *ARGS, "--json", out, "--html", html])
    doc = read_json(out)["results"]
    a, b = doc["placement"]
    assert a["nodes"] == dict.fromkeys(["conv", "relu", "sig", "mul", "det", "tanh"], CPU)
    assert b["nodes"] == {"conv": OV, "relu": OV, "sig": OV, "mul": OV, "det": CPU, "tanh": OV}
    assert [(f["node"], f["op_type"]) for f in b["fallback"]] == [("det", "Det")]
    (change,) = doc["partition"]
    assert change["plain"] == "B" and change["moved"] == MOVED
    assert (change["subgraphs_plain"], change["subgraphs_instrumented"]) == (2, 1)
    assert {row["name"]: row["moved"] for row in doc["layers"]["layers"]} == \
        {"c": ["B"], "r": ["B"], "s": ["B"], "m": ["B"], "d": [], "y": []}
    text = " ".join(result.stdout.split())
    assert "B: exposing tensors changed the provider partition (4 node(s) moved provider, 2 -> 1" in text
    assert "moved B" in text and "placement of B" in text
    page = html.read_text()
    assert page.count("moved B") == 4 and "B: exposing tensors changed the provider partition" in page
    assert "fell back: Det x1" in page


@pytest.mark.skipif(ROUTE == "legacy", reason="the replacement build moves the block (test above)")
def test_the_plugin_keeps_the_partition_with_every_tensor_exposed(tmp_path):
    model, out = conv_then_det(tmp_path), tmp_path / "r.json"
    result = invoke(["compare", model, model, "--b-providers", "openvino,cpu", "--layers", "all", "--granularity",
                     "tensor", *ARGS, "--json", out])
    doc = read_json(out)["results"]
    b = doc["placement"][1]
    assert b["nodes"] == {"conv": OV, "relu": OV, "sig": OV, "mul": OV, "det": CPU, "tanh": OV}
    (change,) = doc["partition"]
    assert change["moved"] == {} and (change["subgraphs_plain"], change["subgraphs_instrumented"]) == (2, 2)
    assert all(row["moved"] == [] for row in doc["layers"]["layers"])
    assert "B: exposing tensors left the provider partition as in the plain session" in " ".join(result.stdout.split())


def test_exposing_only_tensors_that_keep_the_partition_reports_no_change(tmp_path):
    model, out = conv_then_det(tmp_path), tmp_path / "r.json"
    invoke(["compare", model, model, "--b-providers", "openvino,cpu", "--layers", "r", "--layers", "m",
            *ARGS, "--json", out])
    doc = read_json(out)["results"]
    assert doc["partition"][0]["moved"] == {} and doc["partition"][0]["subgraphs_instrumented"] == 2
    assert all(row["moved"] == [] for row in doc["layers"]["layers"])


def test_compare_outputs_require_provider_exits_1_naming_det(tmp_path):
    model, out = conv_then_det(tmp_path), tmp_path / "r.json"
    ran = run_mi(["compare", model, model, "--b-providers", "openvino,cpu", "--require-provider", "openvino",
                  *ARGS, "--json", out], cwd=tmp_path)
    assert_status(ran, 1)
    (finding,) = [f for f in read_json(out)["results"]["findings"] if f["rule"] == "MI871"]
    assert finding["message"].startswith("B: 1 of 6 nodes did not run on OpenVINOExecutionProvider: det (Det on")
    assert finding["data"]["nodes"] == {"det": CPU}
    assert read_json(out)["results"]["partition"] == []  # outputs only: nothing exposed


@legacy_only
def test_probe_marks_the_moved_tensors_and_nan_bisect_requires_the_provider(tmp_path, monkeypatch):
    import inspector_cli.placement as placement

    model, out = conv_then_det(tmp_path), tmp_path / "p.json"
    monkeypatch.setattr(placement, "PLAIN_CHECK_SHARE", 0.0)  # one more session build never cheap enough
    invoke(["probe", model, "--providers", "openvino,cpu", "--no-history", *ARGS, "--json", out])
    doc = read_json(out)["results"]
    assert doc["partition"] is None and doc["placement"]["session"] == "model (tensors exposed)"
    assert doc["placement"]["nodes"]["conv"] == CPU  # the capture session's: c is exposed, the block moved
    assert any(w.startswith("placement read from a session with tensors exposed") for w in doc["warnings"])
    monkeypatch.setattr(placement, "PLAIN_CHECK_SHARE", 1e9)  # always cheap enough: checked unasked
    invoke(["probe", model, "--providers", "openvino,cpu", "--no-history", *ARGS, "--json", out])
    doc = read_json(out)["results"]
    assert doc["placement"]["nodes"]["det"] == CPU and doc["placement"]["nodes"]["conv"] == OV
    assert doc["partition"]["moved"] == MOVED
    assert {t["name"]: t["moved"] for t in doc["tensors"]} == \
        {"c": True, "r": True, "s": True, "m": True, "d": False, "y": False}
    assert doc["placement"]["session"] == "model" and doc["placement"]["nodes"]["conv"] == OV
    bisect = tmp_path / "n.json"
    ran = run_mi(["nan-bisect", model, "--providers", "openvino,cpu", "--require-provider", "openvino",
                  *ARGS, "--json", bisect], cwd=tmp_path)
    assert_status(ran, 1)
    doc = read_json(bisect)["results"]
    assert doc["placement"]["nodes"]["det"] == CPU and doc["partition"]["moved"] == MOVED  # its checkpoints hold c
    (finding,) = [f for f in doc["findings"] if f["rule"] == "MI871"]
    assert finding["data"]["nodes"] == {"det": CPU} and "det (Det on CPUExecutionProvider)" in ran.stdout
