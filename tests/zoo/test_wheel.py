"""The wheel carries every file git tracks under inspector_cli/ (templates, schemas), so `pip install .`
users get working `--html` reports; and mi from that wheel, in a clean venv, writes one."""
from __future__ import annotations

import subprocess
import zipfile

import pytest

from .wheel import ROOT

pytestmark = pytest.mark.zoo


def test_wheel_holds_every_tracked_package_file(mi_wheel):
    tracked = subprocess.run(["git", "ls-files", "inspector_cli"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    in_wheel = set(zipfile.ZipFile(mi_wheel).namelist())
    missing = sorted(set(tracked) - in_wheel)
    assert missing == [], f"tracked but not in the wheel: {missing}"
    assert "inspector_cli/render/templates/sections/generic.html.j2" in in_wheel


def test_installed_wheel_writes_html(mi_wheel, tmp_path):
    from .wheel import installed_venv
    bin_dir = installed_venv(mi_wheel)
    # a clean venv: none of the dev extra's packages leak in
    assert not list((bin_dir.parent / "lib").glob("python3*/site-packages/torch"))
    from inspector_cli.testing.models import build_cnn
    import onnx
    model = tmp_path / "m.onnx"
    onnx.save(build_cnn(), str(model))
    proc = subprocess.run([str(bin_dir / "mi"), "validate", str(model), "--html", str(tmp_path / "v.html")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "<html" in (tmp_path / "v.html").read_text().lower()


def test_the_wheels_mi_is_run_even_with_the_checkout_on_pythonpath(mi_wheel, monkeypatch, tmp_path):
    """Run as `PYTHONPATH=$PWD pytest` (the helpers' way), pip saw the checkout's model_inspector.egg-info
    (left there by the wheel build), took model-inspector as installed and left it out: the venv had no
    bin/mi. The venv's pip and the sweep's mi runs get the environment without PYTHONPATH."""
    from .wheel import clean_env, installed_venv
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    bin_dir = installed_venv(mi_wheel)
    assert (bin_dir / "mi").exists()
    proc = subprocess.run([str(bin_dir / "python"), "-c", "import inspector_cli; print(inspector_cli.__file__)"],
                          capture_output=True, text=True, env=clean_env(), cwd=tmp_path)
    assert proc.stdout.strip().startswith(str(bin_dir.parent)), proc.stdout + proc.stderr
