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


def start(path, data, jsonl, *extra):
    return subprocess.Popen([sys.executable, "-m", "inspector_cli", "--no-color", "nan-bisect", str(path),
                             "--inputs", str(data), "--jsonl", str(jsonl), *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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
    proc = start(path, data, jsonl, "--workers", "1")
    try:
        worker = worker_of(proc)
        assert wait_lines(jsonl, 3, proc) < COUNT
        os.kill(worker, signal.SIGKILL)  # e.g. the OOM killer: its sample is retried in a new worker
        assert wait_lines(jsonl, 12, proc) < COUNT
        proc.send_signal(signal.SIGKILL)  # the whole run dies, mid-batch
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    done = jsonl.read_text().count("\n")
    assert 12 <= done < COUNT
    result = invoke(["nan-bisect", path, "--inputs", data, "--jsonl", jsonl, "--resume", "--workers", "2",
                     "--json", tmp_path / "r.json"], exit_code=1)
    assert jsonl.read_bytes() == reference.read_bytes()
    summary = json.loads((tmp_path / "r.json").read_text())["results"]
    assert summary["resumed"] == done and summary["scanned"] == COUNT - done and summary["errors"] == 0
    assert summary["nonfinite"] == len(FAILING) and summary["groups"][0]["node"] == "log"
    assert result.exit_code == 1


def interrupt_mid_batch(path, data, tmp_path, attempt: int):
    """Start a run, freeze it (SIGSTOP) once it has written a line, and Ctrl-C it there.

    Freezing makes "mid-batch" certain: a frozen process writes no more lines, so fewer than COUNT
    lines then means it is still in its sample loop when the SIGINT lands on SIGCONT. (Sending the
    SIGINT right after seeing a few lines was a race under load: the test process, starved, saw 4..47
    lines, and the run had finished all 48, exit 1, before the signal came.) Returns None when the
    run got that far before it was frozen, after checking that it completed correctly.
    """
    jsonl, report = tmp_path / f"run{attempt}.jsonl", tmp_path / f"r{attempt}.json"
    proc = start(path, data, jsonl, "--workers", "1", "--json", str(report))
    try:
        wait_lines(jsonl, 1, proc)
        workers = spawned_children(proc.pid)
        proc.send_signal(signal.SIGSTOP)
        frozen = jsonl.read_text().count("\n") if jsonl.exists() else 0
        if proc.poll() is None and frozen < COUNT:
            proc.send_signal(signal.SIGINT)  # pending: handled first thing when the process runs again
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    if frozen >= COUNT or proc.returncode != 130:
        assert proc.returncode == 1 and frozen == COUNT, err  # completed: every sample, exit 1 (NaN found)
        return None
    return jsonl, report, out, workers


def test_ctrl_c_leaves_valid_jsonl_and_a_summary(slow_batch, tmp_path):
    path, data, reference = slow_batch
    for attempt in range(3):  # the run may outpace a starved test process: then it is run again
        interrupted = interrupt_mid_batch(path, data, tmp_path, attempt)
        if interrupted is not None:
            break
    else:
        pytest.fail("three runs finished before they could be interrupted")
    jsonl, report, out, workers = interrupted
    text = jsonl.read_text()
    # the JSONL: whole lines, in sample order, each as the uninterrupted run wrote it
    assert text and text.endswith("\n") and reference.read_text().startswith(text)
    lines = [json.loads(line) for line in text.splitlines()]
    assert 1 <= len(lines) < COUNT and [r["sample"] for r in lines] == [f"x_{i:04d}.npz" for i in range(len(lines))]
    summary = json.loads(report.read_text())["results"]
    assert summary["interrupted"] is True and summary["scanned"] == len(lines)
    assert "interrupted" in out
    assert workers and not [w for w in workers if Path(f"/proc/{w}").exists() and not zombie(w)]  # workers gone


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
