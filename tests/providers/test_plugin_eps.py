"""Plugin execution providers beside the stock onnxruntime (scripts/test_providers.sh's .venv-ep):
the QNN plugin, which on x86-64 registers, offers a device, builds its HTP backend and takes no node
of these models, and OpenVINO's plugin package found without configuration. Skipped without them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..fixtures.helpers import invoke, read_json
from ..fixtures.subproc import assert_status, run_mi
from .models import conv_block, conv_block_dynamic
from .routes import OV, QNN, has_qnn_plugin, openvino_route

CPU = "CPUExecutionProvider"
HTP = ["--provider-option", "qnn:backend_type=htp"]
"""QNN's plugin finds no default backend for a CPU device: it is asked for its HTP backend (x86 simulator)."""

qnn_only = pytest.mark.skipif(not has_qnn_plugin(), reason="onnxruntime-qnn is not installed")
pytestmark = [pytest.mark.providers]


def _idle(doc: dict) -> list:
    return [f for f in doc["findings"] if f["rule"] == "MI872"]


@qnn_only
def test_qnn_takes_no_node_and_every_command_says_so(tmp_path):
    model = conv_block_dynamic(tmp_path)
    expected = "QNNExecutionProvider was asked for and took no node: all 4 nodes ran elsewhere (4 on CPUExecutionProvider)"
    runs = {
        "compare": ["compare", model, model, "--b-providers", "qnn,cpu"],
        "layers": ["compare", model, model, "--b-providers", "qnn,cpu", "--layers", "all"],
        "probe": ["probe", model, "--providers", "qnn,cpu", "--no-history"],
        "nan-bisect": ["nan-bisect", model, "--providers", "qnn,cpu"],
        "profile": ["profile", model, "--providers", "qnn,cpu", "--runs", "2", "--warmup", "1", "--no-memory-stats",
                    "--shape", "x:1x3x8x8"],
    }
    labels = {"compare": "B", "layers": "B", "probe": "model (tensors exposed)", "nan-bisect": "model (tensors exposed)",
              "profile": str(model)}
    for name, args in runs.items():
        out = tmp_path / f"{name}.json"
        result = invoke([*args, *HTP, "--json", out])
        doc = read_json(out)
        (finding,) = _idle(doc["results"])
        assert finding["severity"] == "warning" and finding["message"] == f"{labels[name]}: {expected}", name
        assert finding["data"] == {"provider": QNN, "nodes": 4, "ran": {CPU: 4}}
        assert expected.split(":")[0] in " ".join(result.stdout.split()), name
        runtime = doc["config"]["runtime_b" if name in ("compare", "layers") else "runtime"]
        qnn, cpu = runtime["execution_providers"]
        assert (qnn["name"], qnn["source"], qnn["package"]) == (QNN, "plugin", "onnxruntime-qnn")
        assert qnn["version"] == _version("onnxruntime-qnn") and qnn["options"] == {"backend_type": "htp"}
        assert qnn["library"].endswith("libonnxruntime_providers_qnn.so")
        (device,) = qnn["devices"]
        assert device["ep_vendor"] == "Qualcomm" and device["type"] == "CPU"
        assert (cpu["name"], cpu["source"]) == (CPU, "built-in")
        plugins = {p["package"]: p["version"] for p in doc["fingerprint"]["onnxruntime"]["plugins"]}
        assert plugins["onnxruntime-qnn"] == _version("onnxruntime-qnn")


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


@qnn_only
def test_require_provider_qnn_exits_1_naming_every_node(tmp_path):
    model, out = conv_block_dynamic(tmp_path), tmp_path / "r.json"
    ran = run_mi(["compare", model, model, "--b-providers", "qnn,cpu", *HTP, "--require-provider", "qnn",
                  "--json", out], cwd=tmp_path)
    assert_status(ran, 1)
    findings = read_json(out)["results"]["findings"]
    assert [f["rule"] for f in findings] == ["MI872", "MI871"]
    assert findings[1]["message"].startswith("B: 4 of 4 nodes did not run on QNNExecutionProvider: conv (Conv on")
    profile = tmp_path / "p.json"
    ran = run_mi(["profile", model, "--providers", "qnn", *HTP, "--runs", "2", "--warmup", "1", "--no-memory-stats",
                  "--shape", "x:1x3x8x8", "--require-provider", "qnn", "--json", profile], cwd=tmp_path)
    assert_status(ran, 1)
    assert "MI871" in [f["rule"] for f in read_json(profile)["results"]["findings"]]


@qnn_only
def test_qnn_takes_a_static_block_whole_and_agrees_with_cpu(tmp_path):
    """A plugin that takes nodes, on any x86-64 host: QNN's HTP backend (its x86 simulator) runs the
    static-shape block. Its assignment lists the graph it partitioned: the 4 nodes and the layout
    Transposes it added around the Conv."""
    model, out = conv_block(tmp_path), tmp_path / "c.json"
    invoke(["compare", model, model, "--b-providers", "qnn,cpu", *HTP, "--require-provider", "qnn", "--json", out])
    doc = read_json(out)["results"]
    b = doc["placement"][1]
    # the Conv, rewritten to NHWC as conv_token_1, counted as `conv`; the Transposes onnxruntime added, as theirs
    assert b["nodes"] == {"conv": QNN, "relu": QNN, "sig": QNN, "mul": QNN, "Transpose": QNN,
                          "Transpose_token_5": QNN}
    assert b["partitions"] == {QNN: 1}
    assert b["fallback"] == [] and _idle(doc) == [] and doc["findings"] == []
    (output,) = doc["outputs"]
    assert output["dataset"]["cosine"] > 0.999999 and output["dataset"]["max_abs"] < 1e-4


@qnn_only
def test_json_on_stdout_stays_json_when_the_plugin_prints(tmp_path):
    """QNN's backend prints a line to file descriptor 1 when it loads: mi sends it to stderr."""
    model = conv_block(tmp_path)
    ran = run_mi(["compare", model, model, "--b-providers", "qnn,cpu", *HTP, "--json", "-"], cwd=tmp_path)
    assert_status(ran, 0)
    doc = json.loads(ran.stdout)
    assert doc["results"]["placement"][1]["asked"] == [QNN, CPU]


@qnn_only
def test_a_plugin_without_the_options_it_needs_says_which_flag_gives_them(tmp_path):
    model = conv_block(tmp_path)
    ran = run_mi(["compare", model, model, "--b-providers", "qnn"], cwd=tmp_path)
    assert_status(ran, 3)
    line = " ".join(ran.stderr.split())
    assert "onnxruntime could not load the model: Could not determine default backend path for device" in line
    assert "QNNExecutionProvider from onnxruntime-qnn" in line and "--provider-option qnn:KEY=VALUE" in line


@qnn_only
def test_a_plugin_registered_by_someone_else_is_still_given_by_device(tmp_path):
    """Once registered, onnxruntime lists a plugin among its available providers but ignores it by
    name; a plan made then (another thread mid-registration, a host application) must not take it
    for a built-in. Fails on the code before: the session ran on CPU alone, QNN unasked."""
    code = (
        "import onnxruntime as o, onnxruntime_qnn as q\n"
        "o.register_execution_provider_library('QNNExecutionProvider', q.get_library_path())\n"
        "assert 'QNNExecutionProvider' in o.get_available_providers()\n"
        "from inspector_cli.core.runner import RuntimeConfig, Session\n"
        f"s = Session({str(conv_block_dynamic(tmp_path))!r}, RuntimeConfig(providers=('qnn', 'cpu'), "
        "provider_options=(('qnn', 'backend_type', 'htp'),)))\n"
        "print(s.providers)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == str([QNN, CPU])


ROUTE, OV_ARGS = openvino_route()


@pytest.mark.skipif(ROUTE not in ("plugin", "plugin+shim"), reason="OpenVINO is not a plugin here")
def test_openvino_plugin_runs_the_block_and_says_where_it_came_from(tmp_path):
    model, out = conv_block(tmp_path), tmp_path / "c.json"
    invoke(["compare", model, model, "--b-providers", "openvino,cpu", "--require-provider", "openvino", *OV_ARGS,
            "--json", out])
    doc = read_json(out)
    b = doc["results"]["placement"][1]
    assert b["nodes"] == dict.fromkeys(["conv", "relu", "sig", "mul"], OV) and _idle(doc["results"]) == []
    ov = doc["config"]["runtime_b"]["execution_providers"][0]
    assert (ov["name"], ov["source"]) == (OV, "plugin")
    (device,) = ov["devices"]
    assert device["type"] == "CPU" and device["ep_metadata"]["ov_device"] == "CPU"
    if ROUTE == "plugin":  # found without configuration
        assert (ov["package"], ov["version"]) == ("onnxruntime-ep-openvino", _version("onnxruntime-ep-openvino"))


@pytest.mark.skipif(ROUTE != "plugin+shim", reason="OpenVINO's plugin offers a device here (or is absent)")
def test_openvino_plugin_without_a_device_for_this_cpu_is_a_clear_error(tmp_path):
    model = conv_block(tmp_path)
    ran = run_mi(["compare", model, model, "--b-providers", "openvino,cpu"], cwd=tmp_path)
    assert_status(ran, 2)
    line = " ".join(ran.stderr.split())
    assert (f"execution provider 'openvino' ({OV} from onnxruntime-ep-openvino "
            f"{_version('onnxruntime-ep-openvino')}) is registered but offers no device on this machine") in line


@pytest.mark.skipif(ROUTE not in ("plugin", "plugin+shim"), reason="OpenVINO is not a plugin here")
def test_help_looks_for_no_plugin_with_plugins_installed():
    code = ("import sys; import click.testing as t; from inspector_cli.cli import cli\n"
            "for args in (['--help'], ['compare', '--help'], ['profile', '--help']):\n"
            "    assert t.CliRunner().invoke(cli, args).exit_code == 0\n"
            "print(sorted(m for m in sys.modules if m.startswith('onnxruntime') or m.endswith('plugin_eps')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
