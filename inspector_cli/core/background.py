"""Native work on background threads that must end before the interpreter does.

Some work starts early on a thread of its own so it overlaps the main thread's (onnxruntime
sessions built while the graphs load, nan-bisect's likely replay session). Such a thread spends
its time inside onnxruntime's C++ code. If the main thread fails early (no samples, a bad shape)
and the interpreter finalises while one of them is still inside onnxruntime, the thread is torn
down in native code and the C++ runtime aborts the process: exit status 134 instead of the
documented code (issue 28). So every such thread is started here, and `drain` joins them, bounded,
at the one exit point (`cli.MiGroup.main`); threads are non-daemon as well, so a library caller's
interpreter also waits for them at exit instead of aborting.

Imports nothing heavy: the CLI's exit path calls `drain` on every command, `mi --help` included.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, List

from .interrupts import deferred_interrupt

_lock = threading.Lock()
_threads: List[threading.Thread] = []

DRAIN_SECONDS = 120.0
"""How long the exit path waits for background native work. A session build of the largest models
seen (2.4 GB of external weights) takes a few seconds; past this bound the caller ends the process
without finalising the interpreter (`os._exit`), which also cannot abort."""


def start(target: Callable[..., Any], *args: Any, name: str) -> threading.Thread:
    """Start `target(*args)` on a registered non-daemon thread and return it."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=False)
    with _lock:
        _threads[:] = [t for t in _threads if t.is_alive()]
        _threads.append(thread)
    # Not interruptible: a Ctrl-C or SIGTERM raised inside start() (while it waits for the new thread
    # to run) would leave a thread that is about to enter onnxruntime, yet not alive to `drain`'s eyes
    # (a thread counts as alive only once it has started): joined by no one, it aborted the process.
    with deferred_interrupt():
        thread.start()
    return thread


def pending() -> int:
    """How many registered threads are still running."""
    with _lock:
        return sum(1 for t in _threads if t.is_alive())


def drain(timeout: float = DRAIN_SECONDS) -> bool:
    """Join every registered thread within `timeout` seconds in all; True when none is left running.

    A Ctrl-C while waiting is left to the caller (it means: stop now)."""
    deadline = time.monotonic() + timeout
    while True:
        with _lock:
            alive = [t for t in _threads if t.is_alive()]
            _threads[:] = alive
        if not alive:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        alive[0].join(remaining)
