"""Native work on background threads that must end before the interpreter does.

Some work starts early on a thread of its own so it overlaps the main thread's (onnxruntime
sessions built while the graphs load, nan-bisect's likely replay session, the sessions of a
comparison built side by side). Such a thread spends its time inside onnxruntime's C++ code with
the GIL released. If the interpreter finalises while one of them is still in there, the thread,
on its way back, asks for the GIL, CPython ends it with `pthread_exit`, and the forced unwind
meets a C++ frame that may not throw (pybind11's GIL guard): "terminate called without an active
exception", status 134 (-6) after a clean message (issues 28, 40). So every such thread is started
here, and the CLI's exit point (`cli.end_background_work`) ends the `mi` process without finalising
the interpreter while one still runs (an in-process caller waits for them: `drain`).

"Has it finished?" is answered by an event the thread sets when its target returns, never by
`Thread.join`/`is_alive` alone: on CPython 3.10 and 3.11 a `join` interrupted by Ctrl-C or SIGTERM
releases the thread's state lock although the thread still runs, and the thread then counts as
stopped for every later `join`, for `is_alive` and for the interpreter's own wait at exit
(python/cpython#90882). Measured in issue 40: that is how a session still being built was left to
the finalising interpreter (compare's early sessions, joined by the main thread when the signal
came). `NativeWork.join` and `is_alive` read the event; an interrupted wait on it changes nothing.

Imports nothing heavy: the CLI's exit path runs on every command, `mi --help` included.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, List, Optional, Sequence, TypeVar

from .interrupts import deferred_interrupt

T = TypeVar("T")

_lock = threading.Lock()
_works: List["NativeWork"] = []

DRAIN_SECONDS = 120.0
"""How long an in-process caller's exit path waits for background native work (a session build of
the largest models seen, 2.4 GB of external weights, takes a few seconds). The `mi` process itself
never waits: it ends without finalising the interpreter while such work runs (`cli.end_background_work`)."""

class NativeWork(threading.Thread):
    """A registered, non-daemon thread whose target may run inside onnxruntime. `finished` is set
    once the target has returned (or raised): from then on the thread runs no native code."""

    def __init__(self, target: Callable[..., Any], args: Sequence[Any], name: str) -> None:
        super().__init__(target=target, args=tuple(args), name=name, daemon=False)
        self.finished = threading.Event()

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.finished.set()

    def is_alive(self) -> bool:
        """Started and its target not yet returned (the event, not the state lock: see the module)."""
        return self.ident is not None and not self.finished.is_set()

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait for the target to return; an interruption of this wait leaves the thread's state
        intact. Then the thread's last Python steps, a few microseconds, are joined as usual."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.ident is not None and not self.finished.wait(timeout):
            return
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        super().join(remaining)


def import_native_first() -> None:
    """Import onnxruntime on the calling thread before starting threads that may import it: two first
    imports of one package at once can hand a thread a partially initialised module (importlib's
    deadlock avoidance: "cannot import name 'ExecutionMode' from partially initialized module
    'onnxruntime.capi._pybind_state'", an exit 4 once under load in CI). Free once imported."""
    import onnxruntime  # noqa: F401


def start(target: Callable[..., Any], *args: Any, name: str) -> NativeWork:
    """Start `target(*args)` on a registered `NativeWork` thread and return it."""
    import_native_first()
    work = NativeWork(target, args, name)
    with _lock:
        _works[:] = [w for w in _works if not w.finished.is_set()]
        _works.append(work)
    # Not interruptible: a Ctrl-C or SIGTERM raised inside start() (while it waits for the new thread
    # to run) would leave a thread that is about to enter onnxruntime, yet not alive to `drain`'s eyes
    # (a thread counts as alive only once it has started): joined by no one, it aborted the process.
    with deferred_interrupt():
        work.start()
    return work


def run_all(calls: Sequence[Callable[[], T]], *, name: str) -> List[T]:
    """Each call on a registered thread of its own, side by side; their results in order. The first
    call that raised (in order) raises here once all have returned, as one call after another would.
    A Ctrl-C while waiting leaves the threads to the exit path (`drain`): it is raised at once."""
    import_native_first()
    results: List[Any] = [None] * len(calls)
    errors: List[Optional[BaseException]] = [None] * len(calls)

    def one(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread below
            errors[index] = exc

    works = [start(one, index, name=name) for index in range(len(calls))]
    for work in works:
        work.join()
    for error in errors:
        if error is not None:
            raise error
    return results


def running() -> List[NativeWork]:
    """The registered threads still running their target."""
    with _lock:
        return [w for w in _works if w.is_alive()]


def pending() -> int:
    """How many registered threads are still running their target."""
    return len(running())


def drain(timeout: float = DRAIN_SECONDS) -> bool:
    """Wait until every registered thread's target has returned, within `timeout` seconds in all;
    True when none is left running. A Ctrl-C while waiting is left to the caller (it means: stop now)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = running()
        if not alive:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        alive[0].finished.wait(remaining)


def inside_onnxruntime() -> List[str]:
    """Names of the threads (other than this one) whose Python stack is inside a call into
    onnxruntime: native work the registry does not know of (a thread pool's worker), still alive.
    Read from the threads' current frames: a thread's state lock may lie (see the module)."""
    module = sys.modules.get("onnxruntime")
    paths = list(getattr(module, "__path__", [])) if module is not None else []
    if not paths:
        return []  # onnxruntime never imported: nothing can be inside it
    folder = os.path.join(paths[0], "")  # with its separator: not onnxruntime_genai's files
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    found = []
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        while frame is not None:
            if frame.f_code.co_filename.startswith(folder):
                found.append(names.get(ident, str(ident)))
                break
            frame = frame.f_back
    return found
