"""Ctrl-C (SIGINT) and SIGTERM as CI sends them, on real processes (issue 28): during session
creation, during capture and during a batch, every command ends with 130 (SIGINT) or 143
(SIGTERM), prints one line saying so, and leaves reports and journals complete or absent.

Where the signal lands is fixed by a failpoint (`MI_FAILPOINT`, inspector_cli/core/failpoints.py),
not by a timer racing the run, so the assertions hold however loaded the machine is."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

from ..fixtures.subproc import assert_status, run_mi
from .world import build_world

CODES = {"SIGINT": 130, "SIGTERM": 143}
SAID = {"SIGINT": "Interrupted; reports already written are complete.",
        "SIGTERM": "Terminated (SIGTERM); reports already written are complete."}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Dict[str, Path]:
    world = build_world(tmp_path_factory.mktemp("world"))
    for name, shape in (("big_data", (1, 2048)), ("small_data", (1, 4))):
        folder = world["dir"] / name
        folder.mkdir()
        for i in range(6):
            np.savez(folder / f"s{i}.npz", x=np.full(shape, 0.01 * (i + 1), np.float32))
        world[name] = folder
    return world


def _interrupted(world: Dict[str, Path], tmp_path: Path, signame: str, point: str, *argv: str):
    fields = {name: str(path) for name, path in world.items()} | {"out": str(tmp_path)}
    ran = run_mi([a.format(**fields) for a in argv], cwd=tmp_path, env={"MI_FAILPOINT": f"{point}:{signame}"})
    assert_status(ran, CODES[signame])
    # said once: on stderr by the error boundary, or in the result of a run that stopped cleanly
    assert SAID[signame] in ran.stderr.splitlines() or "(interrupted)" in ran.stdout, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr and "terminate called" not in ran.stderr
    return ran


def _no_partial_files(folder: Path) -> None:
    """Reports are written atomically: no temporary file left beside them."""
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix in (".tmp", ".part")]


@pytest.mark.parametrize("signame", sorted(CODES))
def test_compare_outputs_during_session_creation(world, tmp_path: Path, signame: str) -> None:
    """The early sessions are being built on background threads when the signal arrives."""
    _interrupted(world, tmp_path, signame, "session", "compare", "{big}", "{big2}", "-i", "{big_data}",
                 "--json", "{out}/r.json", "--html", "{out}/r.html")
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.html").exists()
    _no_partial_files(tmp_path)


@pytest.mark.parametrize("signame", sorted(CODES))
def test_compare_layers_during_capture(world, tmp_path: Path, signame: str) -> None:
    _interrupted(world, tmp_path, signame, "capture", "compare", "{m}", "{m2}", "-i", "{small_data}",
                 "--layers", "all", "--json", "{out}/r.json")
    assert not (tmp_path / "r.json").exists()
    _no_partial_files(tmp_path)


@pytest.mark.parametrize("signame", sorted(CODES))
def test_probe_during_capture(world, tmp_path: Path, signame: str) -> None:
    _interrupted(world, tmp_path, signame, "capture", "probe", "{m}", "-i", "{small_data}",
                 "--history-dir", "{out}/h", "--json", "{out}/r.json")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("signame", sorted(CODES))
def test_profile_during_session_creation(world, tmp_path: Path, signame: str) -> None:
    _interrupted(world, tmp_path, signame, "session", "profile", "{big}", "-i", "{big_data}", "--json",
                 "{out}/r.json")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("signame", sorted(CODES))
def test_nan_bisect_during_a_batch_keeps_journal_and_summary(world, tmp_path: Path, signame: str) -> None:
    """The signal lands after the second record: the JSONL holds whole records in sample order and
    the JSON summary (written: the run stopped cleanly) says it was interrupted and counts them."""
    _interrupted(world, tmp_path, signame, "batch", "nan-bisect", "{m}", "-i", "{small_data}", "--jsonl",
                 "{out}/n.jsonl", "--json", "{out}/r.json")
    records = [json.loads(line) for line in (tmp_path / "n.jsonl").read_text().splitlines()]
    assert 2 <= len(records) < 6
    assert [r["sample"] for r in records] == [f"s{i}.npz" for i in range(len(records))]
    summary = json.loads((tmp_path / "r.json").read_text())["results"]
    assert summary["interrupted"] is True and summary["scanned"] == len(records)
    _no_partial_files(tmp_path)


def test_without_a_signal_the_same_runs_pass(world, tmp_path: Path) -> None:
    """The failpoint names a point these runs reach: without it they end 0 (so the tests above
    interrupt real work, not a run that failed on its own)."""
    fields = {name: str(path) for name, path in world.items()}
    for argv in (["compare", "{big}", "{big2}", "-i", "{big_data}"],
                 ["compare", "{m}", "{m2}", "-i", "{small_data}", "--layers", "all"],
                 ["nan-bisect", "{m}", "-i", "{small_data}", "--jsonl", str(tmp_path / "n.jsonl")]):
        assert_status(run_mi([a.format(**fields) for a in argv], cwd=tmp_path), 0)
