"""Killed processes (Linux: workers are found through /proc): a worker killed mid-run (its sample is retried) and then the whole run killed;
`--resume` then completes the JSONL exactly as an uninterrupted run writes it. Ctrl-C leaves a
valid JSONL and a summary."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..fixtures import nan_models as nm
from ..fixtures.helpers import invoke
from ..fixtures.load import heavy_mode, pytest_generate_tests, repeat  # noqa: F401 (heavy mode: by hand)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
COUNT = 48
FAILING = list(range(3, COUNT, 7))


@pytest.fixture(scope="module")
def slow_batch(tmp_path_factory):
    """Samples that take a few tens of milliseconds each, and the uninterrupted JSONL."""
    folder = tmp_path_factory.mktemp("slow")
    path, data = nm.write(folder, nm.log_batch(size=192, depth=6), nm.log_samples(COUNT, FAILING, (192, 192)))
    reference = folder / "reference.jsonl"
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", reference, "--intra-op-threads", "1"], exit_code=1)
    return path, data, reference


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child: SIGINT delivered and handled by default, as for a command typed in a terminal.
    A suite started in the background by a shell without job control inherits SIGINT ignored
    (POSIX), and Python keeps an ignored SIGINT ignored: Ctrl-C could not reach the run."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def start(path, data, jsonl, *extra, failpoint: str = ""):
    env = {**os.environ, "MI_FAILPOINT": failpoint} if failpoint else None
    return subprocess.Popen([sys.executable, "-m", "inspector_cli", "--no-color", "nan-bisect", str(path),
                             "--inputs", str(data), "--jsonl", str(jsonl), *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_in_a_terminal, env=env)


def wait_stopped(proc, timeout: float = 300) -> None:
    """Until `proc` is stopped (state T in /proc/PID/stat: it sent itself SIGSTOP at a failpoint)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before its failpoint stopped it")
        if Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.005)
    raise AssertionError("the run never stopped at its failpoint")


def wait_lines(jsonl: Path, count: int, proc, timeout: float = 300) -> int:  # generous: a loaded machine starts slowly
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = jsonl.read_text().count("\n") if jsonl.exists() else 0
        if lines >= count or proc.poll() is not None:
            return lines
        time.sleep(0.005)
    raise AssertionError(f"{jsonl} never reached {count} lines")


def children(pid: int) -> list:
    """(pid, command line) of the processes whose parent is `pid` (read from /proc: Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            found.append((int(entry.name), cmdline))
    return found


def spawned_children(pid: int) -> list:
    """Pids of the multiprocessing workers of `pid`: its spawned children, or the children of its
    fork server."""
    workers = []
    for child, cmdline in children(pid):
        if b"spawn_main" in cmdline:
            workers.append(child)
        elif b"forkserver" in cmdline:
            workers.extend(grandchild for grandchild, _ in children(child))
    return workers


def worker_of(proc) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        workers = spawned_children(proc.pid)
        if workers:
            return workers[0]
        time.sleep(0.01)
    raise AssertionError("no worker process")


def test_killed_worker_then_killed_run_then_resume(slow_batch, tmp_path):
    path, data, reference = slow_batch
    jsonl = tmp_path / "run.jsonl"
    # Where things happen is fixed by failpoints, never by how fast this test polls a loaded machine:
    # the run stops itself after its 3rd record and kills itself after its 12th.
    proc = start(path, data, jsonl, "--workers", "1", failpoint="batch@3:SIGSTOP,batch@12:SIGKILL")
    try:
        wait_stopped(proc)
        worker = worker_of(proc)
        os.kill(worker, signal.SIGKILL)  # e.g. the OOM killer: its sample is retried in a new worker
        os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=300)  # the whole run dies, mid-batch
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    done = jsonl.read_text().count("\n")
    assert 12 <= done < COUNT
    result = invoke(["nan-bisect", path, "--inputs", data, "--jsonl", jsonl, "--resume", "--workers", "2",
                     "--json", tmp_path / "r.json"], exit_code=1)
    assert jsonl.read_bytes() == reference.read_bytes()
    summary = json.loads((tmp_path / "r.json").read_text())["results"]
    assert summary["resumed"] == done and summary["scanned"] == COUNT - done and summary["errors"] == 0
    assert summary["nonfinite"] == len(FAILING) and summary["groups"][0]["node"] == "log"
    assert result.exit_code == 1


@pytest.fixture(scope="module")
def long_batch(slow_batch, tmp_path_factory):
    """A folder of LONG_COUNT samples (links to the slow batch's files, in turn): far more work than
    can finish between seeing a few JSONL lines and the Ctrl-C that follows, however loaded the
    machine (with the 48 samples alone, the run sometimes ended first under load)."""
    path, data, _ = slow_batch
    folder = tmp_path_factory.mktemp("long")
    sources = sorted(data.iterdir())
    for i in range(LONG_COUNT):
        (folder / f"x_{i:04d}.npz").symlink_to(sources[i % len(sources)])
    return path, folder


LONG_COUNT = 2000


def test_ctrl_c_leaves_valid_jsonl_and_a_summary(long_batch, tmp_path):
    path, data = long_batch
    jsonl = tmp_path / "run.jsonl"
    proc = start(path, data, jsonl, "--workers", "1", "--json", str(tmp_path / "r.json"))
    try:
        assert wait_lines(jsonl, 4, proc) < LONG_COUNT
        workers = spawned_children(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)  # generous: a loaded machine stops slowly
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert 4 <= len(lines) < LONG_COUNT and [r["sample"] for r in lines] == [f"x_{i:04d}.npz" for i in range(len(lines))]
    summary = json.loads((tmp_path / "r.json").read_text())["results"]
    assert summary["interrupted"] is True and summary["scanned"] == len(lines)
    assert "interrupted" in out
    # the workers went with it (after the run exits its children are re-parented: look them up by pid)
    assert workers and not [w for w in workers if Path(f"/proc/{w}").exists() and not zombie(w)]


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
