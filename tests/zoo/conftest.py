"""Fixtures of the zoo sweep: the zoo (built once and cached), mi installed from a wheel into a clean
venv, and the sweep that runs every command. MI_ZOO=full sweeps the whole zoo, else the fast subset;
MI_ZOO_DIR=DIR sweeps the models built in DIR (e.g. new members: `scripts/zoo.py DIR --only NAME`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .sweep import Sweep
from .wheel import CACHE, ROOT, build_wheel, installed_venv

FULL = os.environ.get("MI_ZOO", "") == "full"
ARTIFACTS = Path(os.environ.get("MI_ARTIFACTS", ROOT / "test-artifacts")) / ("zoo-full" if FULL else "zoo")


@pytest.fixture(scope="session")
def mi_wheel(tmp_path_factory) -> Path:
    """This checkout built as a wheel (what `pip install .` installs)."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


ZOO_DIR = os.environ.get("MI_ZOO_DIR")
"""A zoo folder built already (`scripts/zoo.py DIR --only NAME ...`): swept as it is, its models only."""


@pytest.fixture(scope="session")
def zoo_dir() -> Path:
    """The zoo, built by scripts/zoo.py (cached across runs by recipe hash), or MI_ZOO_DIR as it is."""
    if ZOO_DIR:
        return Path(ZOO_DIR).resolve()
    pytest.importorskip("torch", reason="the zoo needs the dev extra (torch, transformers, skl2onnx)")
    out = CACHE / ("zoo-full" if FULL else "zoo-fast")
    cmd = [sys.executable, str(ROOT / "scripts" / "zoo.py"), str(out)] + ([] if FULL else ["--fast"])
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="session")
def sweep(mi_wheel, zoo_dir):
    """The sweep over the zoo with mi from the installed wheel; writes runs.jsonl and facts.json for the table."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    s = Sweep(installed_venv(mi_wheel), zoo_dir, ARTIFACTS,
              extras={"fp16": lambda: installed_venv(mi_wheel, "fp16")})  # fp16 fallback plans need the extra
    if os.environ.get("MI_ZOO_REUSE") == "1":  # re-check criteria on the recorded runs (docs/zoo.md)
        s.reuse()
    else:
        (ARTIFACTS / "runs.jsonl").unlink(missing_ok=True)
    yield s
    facts = [{"model": m, "variant": v, **f} for (m, v), f in sorted(s.facts.items())]
    if os.environ.get("MI_ZOO_REUSE") == "1" and (ARTIFACTS / "facts.json").exists():
        old = {(f["model"], f["variant"]): f for f in json.loads((ARTIFACTS / "facts.json").read_text())}
        for f in facts:
            old[(f["model"], f["variant"])] = {**old.get((f["model"], f["variant"]), {}), **f}
        facts = list(old.values())
    (ARTIFACTS / "facts.json").write_text(json.dumps(facts, indent=1))
