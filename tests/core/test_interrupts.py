"""Ctrl-C deferred across statements that must happen together (core/interrupts.py), and nan-bisect's
use of it: a Ctrl-C while a record is written leaves the summary and the JSONL log agreeing."""
from __future__ import annotations

import json
import os
import signal

import pytest

from inspector_cli.core.interrupts import deferred_interrupt
from inspector_cli.nanbisect import batch as nanbisect_batch
from inspector_cli.nanbisect.config import NanBisectConfig
from inspector_cli.workflows.nan_bisect import nan_bisect

from ..nanbisect.test_nan_bisect_batch import batch


@pytest.fixture()
def python_sigint():  # type: ignore[no-untyped-def]
    """Python's own SIGINT handler, as in a terminal: a shell without job control starts background jobs
    (a CI runner's, `cmd &`) with SIGINT ignored, and Python then leaves it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_the_block_runs_to_its_end_then_the_interrupt_is_raised(python_sigint) -> None:  # type: ignore[no-untyped-def]
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("after the signal")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_no_signal_no_interrupt_and_an_ignored_sigint_stays_ignored() -> None:
    with deferred_interrupt():
        pass
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)  # ignored, as the caller asked: nothing raised
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_a_record_is_written_keeps_summary_and_log_equal(tmp_path, monkeypatch, python_sigint) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C arrives inside the JSONL write of the third record: that record is both logged and summed,
    the run stops there, and the result counts exactly the logged samples."""
    path, data = batch(tmp_path)
    jsonl = tmp_path / "nan.jsonl"
    original = nanbisect_batch.JsonlLog.write
    written = []

    def write_then_interrupt(self, record):  # type: ignore[no-untyped-def]
        original(self, record)
        written.append(record.sample)
        if len(written) == 3:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(nanbisect_batch.JsonlLog, "write", write_then_interrupt)
    result = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), jsonl=str(jsonl)))
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert result.interrupted and [line["sample"] for line in lines] == written == \
        ["x_0000.npz", "x_0001.npz", "x_0002.npz"]
    assert result.scanned == 3 and result.nonfinite == sum(line["status"] == "nonfinite" for line in lines)
