"""Interruptions: Ctrl-C (SIGINT) and SIGTERM (a cancelled CI job) end a run the same way.

`sigterm_as_interrupt` makes SIGTERM raise `Terminated`, a `KeyboardInterrupt`, in the main thread,
so every path that already ends cleanly on Ctrl-C (executors kill their workers, nan-bisect keeps
its JSONL and summary in step, reports are written atomically or not at all) does the same on
SIGTERM; the CLI then exits `EXIT_TERMINATED` (143) instead of 130. Without it, SIGTERM's default
action ends the process at once (status -15), with no word and no cleanup.

`deferred_interrupt` holds either signal back across statements that must happen together (a
record written to the JSONL log and added to the run's summary), so an interrupted run's summary
and log agree."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, List


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where Ctrl-C's KeyboardInterrupt would be."""


_terminated = threading.Event()


def _raise_terminated(signum: int, frame: Any) -> None:
    _terminated.set()
    raise Terminated()


def terminated() -> bool:
    """Whether SIGTERM arrived while `sigterm_as_interrupt` was in force."""
    return _terminated.is_set()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` inside the block (main thread, default action only: a handler
    the caller installed, or an ignored SIGTERM, is left alone); restored afterwards."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    _terminated.clear()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block to its end even if SIGINT (or SIGTERM under `sigterm_as_interrupt`) arrives
    meanwhile; raise the interruption after it.

    Only where Python's default SIGINT handler (resp. our SIGTERM handler) is in place in the main
    thread: an ignored signal, or one a caller handles itself, is left as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    deferred = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: _raise_terminated}
    pending: List[int] = []
    previous = {}
    for signum, ours in deferred.items():
        if signal.getsignal(signum) is ours:
            previous[signum] = signal.signal(signum, lambda number, frame: pending.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if pending:
        if signal.SIGTERM in pending:
            _terminated.set()
            raise Terminated()
        raise KeyboardInterrupt
