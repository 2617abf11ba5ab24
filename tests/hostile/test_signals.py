"""Ctrl-C (SIGINT) and SIGTERM as CI sends them, on real processes (issues 28 and 40): during session
creation, during capture and during a batch, every command ends with 130 (SIGINT) or 143
(SIGTERM), prints one line saying so, and leaves reports and journals complete or absent; never an
abort ("terminate called without an active exception", status -6) nor a hang, however busy the
machine.

Where the signal lands is fixed by a failpoint (`MI_FAILPOINT`, inspector_cli/core/failpoints.py),
not by a timer racing the run, so the assertions hold however loaded the machine is. The session
tests run on a machine made busy on purpose (`tests/fixtures/load.py`: CPU-bound helper processes
started and stopped by the test) with a session build slowed the native way (`session:SLOW=S`): a
signal then meets onnxruntime still at work, which is when it aborted (issue 40: 3 in 40 runs).

Heavy mode, by hand (issue 40's proof: 4 busy processes per core, every signal and kill test
repeated; `nice` keeps a shared machine usable):

    MI_TEST_BUSY_PER_CORE=4 MI_TEST_REPEAT=20 nice -n 10 .venv/bin/python -m pytest -n 0 -q \
        tests/hostile/test_signals.py tests/nanbisect/test_nan_bisect_kill.py

(`MI_TEST_EXIT_TIMES=FILE` records, for the runs this module's tests signal from outside (the
two-signal and the timer tests), the seconds from the signal to the process's end.)
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import onnx
import pytest

from ..fixtures.load import heavy_mode, mi_building_sessions, pytest_generate_tests, repeat  # noqa: F401 (fixtures, hook)
from ..fixtures.subproc import Ran, assert_status, child_env, default_signals, mi_argv, run_mi
from .world import build_world

SLOW = "session:SLOW=8"
"""The first session build to start keeps onnxruntime at work for 8 s first, and sends the point's
signal after 4 (failpoints.py): a slow build, at work when the signal is handled; mi ends without
waiting for it."""
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
    for name in ("big", "big2"):  # with external weights: compare builds them side by side (open_sessions)
        folder = world["dir"] / f"{name}_ext"
        folder.mkdir()
        onnx.save_model(onnx.load(str(world[name])), str(folder / "model.onnx"), save_as_external_data=True,
                        location="weights.bin", size_threshold=0)
        world[f"{name}_ext"] = folder / "model.onnx"
    return world


def _fields(world: Dict[str, Path], tmp_path: Path) -> Dict[str, str]:
    return {name: str(path) for name, path in world.items()} | {"out": str(tmp_path)}


def _interrupted(world: Dict[str, Path], tmp_path: Path, signame: str, point: str, *argv: str,
                 slow: str = ""):
    failpoint = ",".join(filter(None, [f"{point}:{signame}", slow]))
    ran = run_mi([a.format(**_fields(world, tmp_path)) for a in argv], cwd=tmp_path, env={"MI_FAILPOINT": failpoint})
    assert_status(ran, CODES[signame])
    _said_once(signame, ran.stdout, ran.stderr)
    return ran


def _said_once(signame: str, stdout: str, stderr: str) -> None:
    """Said once: on stderr by the error boundary, or in the result of a run that stopped cleanly;
    no traceback, no "Exception ignored", no abort."""
    assert SAID[signame] in stderr.splitlines() or "(interrupted)" in stdout, stdout + stderr
    assert stderr.count(SAID[signame]) <= 1, stderr
    assert "Traceback" not in stderr and "terminate called" not in stderr and "Exception ignored" not in stderr, stderr


def _no_partial_files(folder: Path) -> None:
    """Reports are written atomically: no temporary file left beside them."""
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix in (".tmp", ".part")]


@pytest.mark.parametrize("signame", sorted(CODES))
@pytest.mark.usefixtures("busy_machine")
def test_compare_outputs_during_session_creation(world, tmp_path: Path, signame: str) -> None:
    """The early sessions are being built on background threads when the signal arrives, slowly, on a
    busy machine. It aborted (status -6 after the clean line) when the main thread was waiting for
    a build as the signal came: Python's interrupted `join` let that build count as finished, and the
    interpreter finalised under it (issue 40; 5 in 40 runs of this test abort on the code before)."""
    _interrupted(world, tmp_path, signame, "session", "compare", "{big}", "{big2}", "-i", "{big_data}",
                 "--json", "{out}/r.json", "--html", "{out}/r.html", slow=SLOW)
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.html").exists()
    _no_partial_files(tmp_path)


@pytest.mark.parametrize("signame", sorted(CODES))
@pytest.mark.usefixtures("busy_machine")
def test_compare_outputs_during_side_by_side_session_creation(world, tmp_path: Path, signame: str) -> None:
    """Models with external weights: no early sessions, both sessions built side by side
    (`open_sessions`, on `core.background` threads), slowly, on a busy machine."""
    _interrupted(world, tmp_path, signame, "session", "compare", "{big_ext}", "{big2_ext}", "-i", "{big_data}",
                 "--json", "{out}/r.json", slow=SLOW)
    assert not (tmp_path / "r.json").exists()
    _no_partial_files(tmp_path)



@pytest.mark.usefixtures("busy_machine")
def test_an_early_error_while_sessions_build_ends_with_its_code(world, tmp_path: Path) -> None:
    """No samples: compare fails while both early sessions are still being built (slowly, on a busy
    machine); the process ends with the error's code, never the C++ runtime's abort (issue 28)."""
    argv = ["compare", "{big}", "{big2}", "-i", "{empty_dir}", "--json", "{out}/r.json"]
    ran = run_mi([a.format(**_fields(world, tmp_path)) for a in argv], cwd=tmp_path, env={"MI_FAILPOINT": SLOW})
    assert_status(ran, 3)
    assert "empty: no input samples found" in ran.stderr and "terminate called" not in ran.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("first,second", [("SIGINT", "SIGINT"), ("SIGTERM", "SIGINT"), ("SIGINT", "SIGTERM")])
@pytest.mark.usefixtures("busy_machine")
def test_two_signals_end_the_run_with_an_interruption_code(world, tmp_path: Path, first: str, second: str) -> None:
    """One signal from the layers' slowed session build (halfway through its slow work), another from
    this test at a random moment of the run: before the first, just after it while it is handled,
    or once the process has ended (a property: it must hold wherever they land, so a random moment
    serves). The run ends 130, or 143 when a SIGTERM arrived in time, and says so in the matching
    line; no abort, no traceback, no partial report."""
    argv = ["compare", "{big_ext}", "{big2_ext}", "-i", "{big_data}", "--layers", "all", "--json", "{out}/r.json"]
    # the failpoint's signal comes about 4 s into the slow build: this one before, around or after it
    returncode, out, err = _signalled_while_building(world, tmp_path, argv, f"session:{first},{SLOW}", second, 0.0, 6.0)
    allowed = {130} if first == second == "SIGINT" else {130, 143}
    assert returncode in allowed, f"exit {returncode} not in {allowed}\n{err}"
    _said_once("SIGTERM" if returncode == 143 else "SIGINT", out, err)
    assert not (tmp_path / "r.json").exists()
    _no_partial_files(tmp_path)


@pytest.mark.parametrize("signame", sorted(CODES))
@pytest.mark.usefixtures("busy_machine")
def test_compare_outputs_signalled_from_outside_while_sessions_build(world, tmp_path: Path, signame: str) -> None:
    """Issue 40's other half: the signal sent by another process (a user's Ctrl-C, a CI runner's
    cancel) at a random moment 0.2-2 s after the early session builds have begun, one of them kept
    at work for 8 s (no failpoint signal): it lands while onnxruntime builds, wherever in the build.
    Ends with the signal's code and line, no abort (2 in 20 of the issue's timer runs aborted)."""
    argv = ["compare", "{big}", "{big2}", "-i", "{big_data}", "--json", "{out}/r.json", "--html", "{out}/r.html"]
    returncode, out, err = _signalled_while_building(world, tmp_path, argv, SLOW, signame, 0.2, 2.0)
    assert_status(Ran(mi_argv(argv), returncode, out, err), CODES[signame])
    _said_once(signame, out, err)
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.html").exists()
    _no_partial_files(tmp_path)


def _signalled_while_building(world: Dict[str, Path], tmp_path: Path, argv: List[str], failpoint: str,
                              signame: str, earliest: float, latest: float) -> Tuple[int, str, str]:
    """Run `mi ARGV` with `MI_FAILPOINT=failpoint`; once it builds sessions, wait a random `earliest`
    to `latest` seconds and send `signame` (unless it has ended). Its status, stdout and stderr.
    (A property: it must hold wherever the signal lands, so a random moment serves.)"""
    proc = subprocess.Popen(mi_argv([a.format(**_fields(world, tmp_path)) for a in argv]), cwd=tmp_path,
                            env=child_env({"MI_FAILPOINT": failpoint}), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    try:
        while proc.poll() is None and not mi_building_sessions(proc.pid):
            time.sleep(0.005)
        time.sleep(random.uniform(earliest, latest))
        sent = None
        if proc.poll() is None:
            proc.send_signal(getattr(signal, signame))
            sent = time.monotonic()
        out, err = proc.communicate(timeout=600)
        if sent is not None and os.environ.get("MI_TEST_EXIT_TIMES"):  # heavy mode's record, never asserted
            with open(os.environ["MI_TEST_EXIT_TIMES"], "a") as record:
                record.write(f"{time.monotonic() - sent:.3f}\n")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


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
@pytest.mark.usefixtures("busy_machine")
def test_profile_during_session_creation(world, tmp_path: Path, signame: str) -> None:
    _interrupted(world, tmp_path, signame, "session", "profile", "{big}", "-i", "{big_data}", "--json",
                 "{out}/r.json", slow=SLOW)
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
