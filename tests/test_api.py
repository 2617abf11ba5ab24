"""The Python API as a contract: exported names, the README example, no stray files, configs that
refuse what their command refuses (with the CLI's words)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import inspector_cli
from inspector_cli.compare.config import CaptureMode, CompareConfig, Granularity, LayerConfig
from inspector_cli.errors import ConfigError
from inspector_cli.executor.base import ExecutorSpec
from inspector_cli.nanbisect.config import NanBisectConfig, Simulate
from inspector_cli.probe.config import ProbeConfig

from .fixtures import nan_models as nm
from .fixtures.helpers import affine_model, invoke, save, save_npz

README = Path(__file__).resolve().parent.parent / "docs" / "library.md"  # the README links here


def test_every_exported_name_resolves():
    for name in inspector_cli.__all__:
        assert getattr(inspector_cli, name) is not None, name
    assert inspector_cli.CompareConfig is CompareConfig and inspector_cli.NanBisectConfig is NanBisectConfig


def test_exported_functions_are_not_shadowed_by_engine_packages():
    """Importing an engine must not turn `inspector_cli.<function>` into a module."""
    import inspector_cli.nanbisect.job  # noqa: F401
    from inspector_cli import compare_models, nan_bisect, probe_model, profile_model, validate_model

    assert all(callable(f) for f in (compare_models, nan_bisect, probe_model, profile_model, validate_model))


def library_example() -> str:
    text = README.read_text()
    section = text[text.index("Everything the CLI does"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_library_example_runs_as_written(tmp_path, cnn_pair, monkeypatch, capsys):
    fp32, int8, data = cnn_pair
    shutil.copy(fp32, tmp_path / "fp32.onnx")
    shutil.copy(int8, tmp_path / "int8.onnx")
    shutil.copytree(data, tmp_path / "data")
    nm.write(tmp_path / "nan", nm.chain(), [{"x": np.full((1, 8), -1.0, np.float32)}])
    shutil.move(tmp_path / "nan" / "model.onnx", tmp_path / "model.onnx")
    shutil.move(tmp_path / "nan" / "data", tmp_path / "nan-data")
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    exec(compile(library_example(), "README.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("True ")  # the CNN pair passes min-cosine 0.99
    assert lines[2].startswith("log 1 ")  # the NaN is born at node 'log' in the one sample
    assert sorted(os.listdir(tmp_path)) == before  # the library wrote nothing here


def test_library_probe_writes_no_history_but_the_cli_does(tmp_path, monkeypatch):
    model = save(affine_model(shape=(1, 4)), tmp_path / "m.onnx")
    save_npz(tmp_path / "data", [{"x": np.ones((1, 4), np.float32)}])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    inspector_cli.probe_model(str(model), ProbeConfig(inputs=(str(tmp_path / "data"),)))
    assert os.listdir(work) == []
    invoke(["probe", model, "--inputs", tmp_path / "data"], exit_code=0)
    assert os.listdir(work) == [".mi"]


@pytest.mark.parametrize("make, message", [
    (lambda: NanBisectConfig(resume=True), "--resume needs --jsonl PATH"),
    (lambda: ProbeConfig(reference="fp32.onnx"), "--reference is used by --quant-ranges; add --quant-ranges"),
    (lambda: CompareConfig(golden="golden/", layers=LayerConfig()),
     "--layers needs two models; --golden compares outputs only"),
    (lambda: CompareConfig(layers=LayerConfig(), executor=ExecutorSpec("local", 2)), "--layers runs in this process"),
    (lambda: CompareConfig(golden="g/", executor=ExecutorSpec("ray")), "--golden runs in this process"),
    (lambda: LayerConfig(isolate=("worst:x",)), "--isolate worst:x: expected worst:N with a whole number N"),
    (lambda: LayerConfig(granularity="layer"), "--granularity layer: expected one of chain, tensor"),
    (lambda: LayerConfig(capture="fast"), "--capture fast: expected one of auto, deployed, instrumented"),
])
def test_each_config_refuses_what_its_command_refuses(make, message):
    with pytest.raises(ConfigError) as caught:
        make()
    assert str(caught.value).startswith(message) and caught.value.exit_code == 2


def test_the_cli_gives_the_configs_words(tmp_path):
    model = save(affine_model(shape=(1, 4)), tmp_path / "m.onnx")
    result = invoke(["probe", model, "--reference", model], exit_code=2)
    assert "Error: --reference is used by --quant-ranges; add --quant-ranges" in result.stderr
    result = invoke(["compare", model, model, "--layers", "all", "--isolate", "worst:x"], exit_code=2)
    assert "Error: --isolate worst:x: expected worst:N with a whole number N" in result.stderr


def test_configs_take_strings_and_keep_enums():
    lc = LayerConfig(granularity="tensor", capture="deployed")
    assert lc.granularity is Granularity.TENSOR and lc.capture is CaptureMode.DEPLOYED
    assert lc.to_dict()["granularity"] == "tensor" and lc.to_dict()["capture"] == "deployed"
    assert NanBisectConfig(simulate="fp16").simulate is Simulate.FP16
    spec = ExecutorSpec("local", 3, None, 1 << 30)
    flat = NanBisectConfig(executor=spec).to_dict()
    assert (flat["workers"], flat["executor"], flat["address"], flat["worker_memory"]) == (3, "local", None, 1 << 30)
