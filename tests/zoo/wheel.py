"""The installed-wheel environment the zoo sweep runs `mi` from: the project built as a wheel and
installed into a clean venv (no system site-packages), cached by a hash of the wheel's contents."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("MI_ZOO_CACHE", Path.home() / ".cache" / "mi-zoo"))


def build_wheel(out: Path) -> Path:
    """`pip wheel . --no-deps` of this checkout into `out`; returns the wheel."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("model_inspector-*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out)], check=True, capture_output=True, text=True)
    return next(out.glob("model_inspector-*.whl"))


def content_hash(wheel: Path) -> str:
    """Hash of the wheel's file names and bytes (not of the zip, whose timestamps change per build)."""
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            h.update(name.encode()); h.update(z.read(name))
    return h.hexdigest()[:16]


def clean_env() -> dict:
    """This process's environment without PYTHONPATH: what the installed wheel's venv runs under, so the
    checkout's own inspector_cli (or its egg-info) cannot stand in for the wheel."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def installed_venv(wheel: Path) -> Path:
    """A clean venv with `wheel` and its dependencies installed; reused while the wheel's contents are the same.
    Returns the venv's bin folder."""
    venv = CACHE / f"venv-{content_hash(wheel)}"
    bin_dir = venv / "bin"
    if (venv / ".complete").exists():
        return bin_dir
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    # without PYTHONPATH: a checkout on it (PYTHONPATH=$PWD) holds model_inspector.egg-info once a wheel
    # was built there, and pip then takes model-inspector as installed and leaves it out (no bin/mi)
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True,
                   capture_output=True, text=True, env=clean_env())
    (venv / ".complete").write_text(str(wheel.name))
    return bin_dir
