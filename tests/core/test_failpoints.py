"""core/failpoints: the test-only points of the signal and kill tests, parsed from MI_FAILPOINT."""
from __future__ import annotations

import signal

import pytest

from inspector_cli.core import failpoints


def test_signal_and_slow_entries_are_read_apart_and_malformed_ones_ignored() -> None:
    spec = "session:SIGTERM, batch@3:SIGSTOP,session:SLOW=2.5,capture:SLOW=x,junk,batch:NOTASIGNAL"
    assert failpoints._parse(spec) == (("session", 2, signal.SIGTERM), ("batch", 3, signal.SIGSTOP))
    assert failpoints._parse_slow(spec) == {"session": 2.5}


def test_slow_keeps_the_first_caller_inside_onnxruntime_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    import onnxruntime as ort

    original = ort.InferenceSession.run

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "run", counted)
    monkeypatch.setattr(failpoints, "_SLOW", {"session": 0.01})
    failpoints.slow("capture")  # another point: nothing
    assert not calls
    failpoints.slow("session")
    ran = len(calls)
    assert ran >= 1 and failpoints._SLOW == {}  # ran onnxruntime, and fired
    failpoints.slow("session")  # the first time only
    assert len(calls) == ran


def test_a_slow_point_sends_its_signal_from_inside_its_slow_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """`session:SIGUSR1,session:SLOW=S`: reaching the point sends nothing; the slowed build sends the
    signal halfway through its work (so it lands while that build is still at work)."""
    import threading

    received = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: received.set())
    try:
        monkeypatch.setattr(failpoints, "_ENTRIES", failpoints._parse("session:SIGUSR1"))
        monkeypatch.setattr(failpoints, "_fired", [False])
        monkeypatch.setattr(failpoints, "_SLOW", {"session": 0.05})
        monkeypatch.setattr(failpoints, "_SLOW_POINTS", frozenset({"session"}))
        failpoints.hit("session")
        assert failpoints._fired == [False]  # not at the point: from the slow work
        failpoints.slow("session")
        assert failpoints._fired == [True]
        assert received.wait(30)
    finally:
        signal.signal(signal.SIGUSR1, previous)
