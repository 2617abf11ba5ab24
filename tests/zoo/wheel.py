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
    """This process's environment without PYTHONPATH: with the checkout on it, pip takes the checkout's
    `model_inspector.egg-info` for the installed package and skips the wheel, and `mi` imports the
    checkout instead of what the wheel installed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def installed_venv(wheel: Path, extra: str = "") -> Path:
    """A clean venv with `wheel` and its dependencies installed (core only, or with one optional `extra`,
    e.g. fp16); reused while the wheel's contents are the same. Returns the venv's bin folder."""
    venv = CACHE / f"venv-{content_hash(wheel)}{'-' + extra if extra else ''}"
    bin_dir = venv / "bin"
    if (venv / ".complete").exists():
        return bin_dir
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q",
                    f"{wheel}[{extra}]" if extra else str(wheel)], check=True,
                   capture_output=True, text=True, env=clean_env())
    if not (bin_dir / "mi").exists():  # pip said yes without installing it: never mark such a venv complete
        raise RuntimeError(f"{venv}: pip installed {wheel.name} but there is no bin/mi")
    (venv / ".complete").write_text(str(wheel.name))
    return bin_dir
