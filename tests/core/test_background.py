"""core/background: background native work is joined before exit, whatever interrupts its start."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from inspector_cli.core import background


def test_drain_joins_every_started_thread() -> None:
    release, done = threading.Event(), threading.Event()

    def work() -> None:
        release.wait(10)
        done.set()

    background.start(work, name="t-work")
    assert background.pending() == 1 and not background.drain(timeout=0.05)  # bounded: gives up, says so
    release.set()
    assert background.drain(timeout=10) and done.is_set() and background.pending() == 0


def test_a_ctrl_c_during_start_is_raised_after_the_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (or SIGTERM) pending while start() waits for the new thread used to be raised inside
    start(): the thread then ran unseen by drain and aborted the process at exit (issue 28)."""
    ran = threading.Event()
    original = threading.Thread.start

    def start_with_a_signal_pending(self: threading.Thread) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode: inside start() without the guard
        original(self)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(threading.Thread, "start", start_with_a_signal_pending)
    try:
        with pytest.raises(KeyboardInterrupt):
            background.start(ran.set, name="t-interrupted")
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGINT, previous)
    assert background.drain(timeout=10)
    assert ran.is_set()  # the thread was started, and it ran
