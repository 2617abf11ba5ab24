"""Plugin execution providers in any venv: discovery on disk, resolution errors, --device on the CPU
provider's own EP device, the runtime section, MI872 on hand-made placements. The real plugins run in
tests/providers/ (scripts/test_providers.sh)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnxruntime
import pytest

from inspector_cli.core import plugin_eps
from inspector_cli.results.placement import build_placement, idle_provider_findings

from ..fixtures.helpers import invoke, read_json
from ..fixtures.subproc import assert_status, run_mi
from ..providers.models import conv_block

QNN, CPU = "QNNExecutionProvider", "CPUExecutionProvider"
NOT_A_PLUGIN = str(Path(onnxruntime.__file__).parent / "capi" / "libonnxruntime_providers_shared.so")
"""A real shared library without CreateEpFactories (onnxruntime's provider bridge)."""


def _fake_plugin(site: Path, module: str = "onnxruntime_ep_fake", library: str = NOT_A_PLUGIN) -> Path:
    """A plugin package as wheels install them: the module and its .dist-info (METADATA, top_level.txt)."""
    package = site / module
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        f"def get_library_path():\n    return {library!r}\n\n"
        "def get_ep_names():\n    return ['FakeExecutionProvider']\n")
    info = site / f"{module}-0.3.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.4\nName: {module.replace('_', '-')}\nVersion: 0.3.1\n\nabout\n")
    (info / "top_level.txt").write_text(module + "\n")
    return site


def test_discovery_reads_packages_from_disk_without_importing_them(tmp_path, monkeypatch):
    site = _fake_plugin(tmp_path / "site")
    other = site / "onnxruntime_helpers"  # an onnxruntime_* package that is no plugin
    other.mkdir()
    (other / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    plugin_eps.installed_plugins.cache_clear()
    try:
        found = [p for p in plugin_eps.installed_plugins() if p.folder.startswith(str(site))]
    finally:
        plugin_eps.installed_plugins.cache_clear()
    assert [(p.module, p.distribution, p.version) for p in found] == \
        [("onnxruntime_ep_fake", "onnxruntime-ep-fake", "0.3.1")]
    assert "onnxruntime_ep_fake" not in sys.modules and found[0].describe() == "onnxruntime-ep-fake 0.3.1"


def test_a_package_whose_library_is_no_plugin_is_named_in_the_error(tmp_path):
    site, model = _fake_plugin(tmp_path / "site"), conv_block(tmp_path)
    ran = run_mi(["compare", model, model, "--b-providers", "fake,cpu"], cwd=tmp_path,
                 env={"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])})
    assert_status(ran, 3)
    line = " ".join(ran.stderr.split())
    assert f"onnxruntime could not register the execution provider library '{NOT_A_PLUGIN}' " \
           "(onnxruntime-ep-fake 0.3.1): Failed to get symbol CreateEpFactories" in line
    assert "Traceback" not in ran.stderr


def test_ep_library_that_is_no_plugin_is_a_usage_error(tmp_path):
    model = conv_block(tmp_path)
    ran = run_mi(["profile", model, "--providers", "mine", "--ep-library", f"mine={NOT_A_PLUGIN}"], cwd=tmp_path)
    assert_status(ran, 2)
    assert "(--ep-library mine): Failed to get symbol CreateEpFactories" in " ".join(ran.stderr.split())
    ran = run_mi(["profile", model, "--ep-library", "mine"], cwd=tmp_path)
    assert_status(ran, 2)
    assert "'mine' is not of the form NAME=PATH" in ran.stderr


def test_an_unknown_provider_lists_builtins_and_plugin_packages(tmp_path):
    model = conv_block(tmp_path)
    ran = run_mi(["compare", model, model, "--b-providers", "openvino,cpu"], cwd=tmp_path)
    assert_status(ran, 2)
    line = " ".join(ran.stderr.split())
    assert "execution provider 'openvino' is not available in this onnxruntime build nor in an installed plugin " \
           "package" in line
    assert "pip install onnxruntime-ep-openvino" in line and "--ep-library NAME=PATH" in line


@pytest.mark.parametrize("args, message", [
    (["--b-providers", "cpu", "--provider-option", "qnn:backend_type=htp"],
     "--provider-option qnn:backend_type=htp: 'qnn' is not among the providers asked for (cpu)"),
    (["--provider-option", "qnn-backend"], "'qnn-backend' is not of the form PROVIDER:KEY=VALUE"),
    (["--b-device", "gpu"], "--device gpu: CPUExecutionProvider runs on the CPU only"),
    (["--ep-policy", "prefer-npu", "--providers", "cpu,cpu"], "--ep-policy lets onnxruntime choose the providers"),
])
def test_provider_settings_that_cannot_work_are_usage_errors(tmp_path, args, message):
    model = conv_block(tmp_path)
    ran = run_mi(["compare", model, model, *args], cwd=tmp_path)
    assert_status(ran, 2)
    assert message in " ".join(ran.stderr.split()) and "Traceback" not in ran.stderr


def test_device_cpu_runs_on_the_cpu_providers_ep_device_and_is_recorded(tmp_path):
    model, out = conv_block(tmp_path), tmp_path / "r.json"
    invoke(["compare", model, model, "--b-device", "cpu", "--json", out])
    doc = read_json(out)
    (output,) = doc["results"]["outputs"]
    assert output["dataset"]["max_abs"] == 0.0  # the same CPU kernels, reached by device
    runtime_b = doc["config"]["runtime_b"]
    assert runtime_b["device"] == "cpu" and "device" not in doc["config"]["runtime"]
    (cpu,) = runtime_b["execution_providers"]
    (device,) = cpu["devices"]
    assert (cpu["name"], cpu["source"], device["type"], device["ep_vendor"]) == (CPU, "built-in", "CPU", "Microsoft")
    assert doc["results"]["findings"] == []
    assert "execution_providers" not in doc["config"]["runtime"]  # the default run's section is unchanged


def test_provider_options_from_yaml_as_a_mapping(tmp_path):
    model, out, config = conv_block(tmp_path), tmp_path / "r.json", tmp_path / "mi.yaml"
    config.write_text("profile:\n  provider-option:\n    cpu:\n      arena_extend_strategy: kSameAsRequested\n")
    invoke(["-c", config, "profile", model, "--runs", "1", "--warmup", "0", "--no-memory-stats", "--json", out])
    runtime = read_json(out)["config"]["runtime"]
    assert runtime["provider_options"] == {"cpu": {"arena_extend_strategy": "kSameAsRequested"}}
    assert runtime["execution_providers"] == [{"name": CPU, "source": "built-in",
                                               "options": {"arena_extend_strategy": "kSameAsRequested"}}]


def _placement(nodes, asked):
    subgraphs = [(provider, [(name, "Conv")]) for name, provider in nodes.items()]
    return build_placement("B", asked[0], subgraphs, order=list(nodes), asked=asked)


def test_mi872_names_a_provider_that_took_no_node_and_the_node_count():
    (finding,) = idle_provider_findings(_placement({"a": CPU, "b": CPU, "c": CPU}, [QNN, CPU]))
    assert finding.rule == "MI872" and finding.severity.value == "warning"
    assert finding.message == ("B: QNNExecutionProvider was asked for and took no node: all 3 nodes ran elsewhere "
                               "(3 on CPUExecutionProvider)")
    assert "--require-provider qnn makes this an error" in finding.hint
    assert finding.data == {"provider": QNN, "nodes": 3, "ran": {CPU: 3}}
    assert idle_provider_findings(_placement({"a": QNN, "b": CPU}, [QNN, CPU])) == []  # it took one
    assert idle_provider_findings(_placement({"a": CPU}, [CPU])) == []  # CPU alone asked


def test_a_layout_rewritten_node_counts_under_its_own_name():
    """QNN's NHWC rewrite: onnxruntime's record names the Conv conv_token_1 and adds Transposes."""
    subgraphs = [(QNN, [("Transpose", "Transpose"), ("conv_token_1", "Conv"), ("relu", "Relu")])]
    placement = build_placement("B", QNN, subgraphs, order=["conv", "relu"], asked=[QNN, CPU])
    assert placement.nodes == {"conv": QNN, "relu": QNN, "Transpose": QNN}
    assert placement.op_types["conv"] == "Conv"


def test_help_imports_no_discovery_even_for_runtime_flags():
    code = ("import sys; import click.testing as t; from inspector_cli.cli import cli\n"
            "r = t.CliRunner().invoke(cli, ['probe', '--help']); assert '--provider-option' in r.output\n"
            "print(sorted(m for m in sys.modules if 'plugin_eps' in m or m.startswith('onnxruntime')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
