"""Ctrl-C deferred across a few statements that must happen together (a record written to the
JSONL log and added to the run's summary), so an interrupted run's summary and log agree."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, List


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block to its end even if SIGINT arrives meanwhile; raise KeyboardInterrupt after it.

    Only where Python's default SIGINT handler is in place in the main thread: an ignored SIGINT, or
    one a caller handles itself, is left as it is."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    pending: List[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt
