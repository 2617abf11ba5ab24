"""Interruptions: Ctrl-C (SIGINT) and SIGTERM (a cancelled CI job) end a run the same way.

`interrupt_handlers` (the CLI's, for the whole command) makes both signals raise in the main
thread: SIGINT `KeyboardInterrupt` as Python's own handler does, SIGTERM `Terminated`, a
`KeyboardInterrupt`, so every path that already ends cleanly on Ctrl-C (executors kill their
workers, nan-bisect keeps its JSONL and summary in step, reports are written atomically or not at
all) does the same on SIGTERM; the CLI then exits `EXIT_TERMINATED` (143) instead of 130. Without
it, SIGTERM's default action ends the process at once (status -15), with no word and no cleanup.

Two places where Python's own handling loses the interruption are kept out (issue 40, measured
under load: 1 run in 40 hung for good, 3 in 60 ended 0 as if no signal had come):

- importlib's module-lock bookkeeping (`_get_module_lock` and its weakref callback) takes the
  global import lock with no `try` around the instant after: an exception raised there leaves
  the import lock held by the main thread forever, and the next thread that imports (a session
  being built in the background imports onnxruntime) waits for it for good. The handler does not
  raise while the main thread runs importlib's core: the interruption is raised at the next call
  made from other code.
- an exception raised in a weakref callback or a `__del__` is printed as "Exception ignored" and
  dropped: the run went on to its end and exited 0. Such an interruption is raised again.

`deferred_interrupt` holds either signal back across statements that must happen together (a
record written to the JSONL log and added to the run's summary), so an interrupted run's summary
and log agree."""
from __future__ import annotations

import _thread
import signal
import sys
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Dict, Iterator, List, Optional


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where Ctrl-C's KeyboardInterrupt would be."""


_terminated = threading.Event()

IMPORT_LOCKING = ("importlib._bootstrap>", "importlib/_bootstrap.py")
"""How the file name of importlib's core ends (frozen, or its source with `-X frozen_modules=off`):
its module locks (`_get_module_lock`, its callback `cb`, `_ModuleLock`, `_lock_unlock_module`) take
a lock and release it with no `try` around the instants between: an exception raised there leaks
the lock."""

_deferred: List[int] = []
_previous_profile: List[Any] = []


_stop_now: List[Callable[[], None]] = []
_raised: List[bool] = []


def _interruption(signum: int) -> KeyboardInterrupt:
    """The exception to raise for `signum`; from now on a further signal stops at once (if asked)."""
    _raised[:] = [True]
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _unsafe(frame: Optional[FrameType]) -> bool:
    """Whether raising in `frame` could leak an import lock, or be dropped: importlib's core, or
    this module's hook (called where Python drops exceptions)."""
    return frame is not None and (frame.f_code.co_filename.endswith(IMPORT_LOCKING)
                                  or frame.f_code is _deliver_dropped_interrupt.__code__)


DEFERRED_PATIENCE = 1.0
"""Seconds a deferred interruption may wait for the main thread to leave importlib's core before a
caller that owns the process (`stop_now`) ends it. The main thread can sit there for as long as
another thread takes to import a module it also imports (a session build importing onnx at load 20:
one exit took 18.9 s of 400 under load, issue 40)."""


def _raise_interrupt(signum: int, frame: Optional[FrameType]) -> None:
    """The handler of SIGINT and SIGTERM inside `interrupt_handlers`."""
    held = _release_deferred()  # a further signal while the first is held back: decided here, not by the hook
    if signum == signal.SIGTERM or held == signal.SIGTERM:
        signum = signal.SIGTERM  # SIGTERM wins: the run is being terminated
        _terminated.set()  # said even when raised a moment later
    if (_raised or held is not None) and _stop_now:
        _stop_now[0]()  # asked again (the first raised, or still held back): the caller ends the process
    if _unsafe(frame):
        if held is None and _stop_now:
            _stop_if_still_deferred(DEFERRED_PATIENCE)
        _defer(signum)
        return
    raise _interruption(signum)


def _release_deferred() -> Optional[int]:
    """Take back the interruption held back, if any: its signal number, the profile hook restored."""
    if not _deferred:
        return None
    signum = _deferred.pop()
    sys.setprofile(_previous_profile.pop() if _previous_profile else None)
    return signum


def _stop_if_still_deferred(seconds: float) -> None:
    """End the process through `stop_now` if the interruption deferred now is still not raised after
    `seconds`: the main thread is waiting inside importlib's core (for a module lock another thread
    holds), where raising would leak the import lock. `stop_now` exits without finalising, which no
    thread inside onnxruntime can abort, with the code the signal names."""
    stop = _stop_now[0]

    def check() -> None:
        if _deferred and _stop_now and _stop_now[0] is stop:
            stop()

    timer = threading.Timer(seconds, check)
    timer.daemon = True
    timer.start()


def _defer(signum: int) -> None:
    """Raise `signum`'s interruption in the main thread at its next call made from safe code (a few
    bytecodes later: importlib's lock bookkeeping never waits long). Python's profile hook sees
    every call, with the frame it is made from, and may raise there."""
    if not _deferred:
        _previous_profile[:] = [sys.getprofile()]
    if signum == signal.SIGTERM or not _deferred:
        _deferred[:] = [signum]  # SIGTERM wins: the run is being terminated
    sys.setprofile(_raise_when_safe)


def _raise_when_safe(frame: FrameType, event: str, arg: Any) -> None:
    """The profile hook while an interruption is deferred: on a call into safe code ("call": the
    new frame) or from it ("c_call": the calling frame), raise it there."""
    if event not in ("call", "c_call") or _unsafe(frame) or frame.f_code in _HANDLER_CODE:
        return  # the handler of a further signal decides for itself
    signum = _release_deferred()
    if signum is not None:
        raise _interruption(signum)


_HANDLER_CODE = (_raise_interrupt.__code__, _release_deferred.__code__)
"""Where the hook never raises: a further signal's handler, which takes the held interruption back first."""


def _deliver_dropped_interrupt(unraisable: Any) -> None:
    """`sys.unraisablehook` inside `interrupt_handlers`: an interruption raised where Python drops
    exceptions (a weakref callback, `__del__`) is raised again at the main thread's next safe call
    instead of being lost; anything else goes to the previous hook."""
    error = unraisable.exc_value
    if not isinstance(error, KeyboardInterrupt):
        _previous_hook(unraisable)
        return
    signum = signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT
    if threading.current_thread() is threading.main_thread():
        _defer(signum)
    else:  # pragma: no cover - signals raise in the main thread only
        _thread.interrupt_main(signum)


_previous_hook = sys.unraisablehook


def signals_stop_now() -> None:
    """From now on a signal inside `interrupt_handlers` calls its `stop_now` (if given) instead of
    raising, as after a first interruption: the CLI's command has ended, nothing is left to unwind."""
    _raised[:] = [True]


def terminated() -> bool:
    """Whether SIGTERM arrived while `interrupt_handlers` is in force."""
    return _terminated.is_set()


@contextmanager
def interrupt_handlers(stop_now: Optional[Callable[[], None]] = None) -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt and SIGTERM `Terminated` inside the block (main thread; only
    over Python's default handling: a handler the caller installed, or an ignored signal, is left
    alone), never inside importlib's lock bookkeeping, and never dropped; restored afterwards.
    With `stop_now`, a signal once an interruption has been raised calls it instead (the CLI: a
    second Ctrl-C ends the process at once, wherever the first one's unwinding is), and the handlers
    stay after the block: the caller owns the process, which is ending (a signal while the
    interpreter waits for its threads at exit must not raise there)."""
    global _previous_hook
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _terminated.clear()
    _raised.clear()
    _stop_now[:] = [stop_now] if stop_now is not None else []
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    previous = {signum: signal.getsignal(signum) for signum in defaults}
    for signum, default in defaults.items():
        if previous[signum] is default:
            signal.signal(signum, _raise_interrupt)
    _previous_hook, sys.unraisablehook = sys.unraisablehook, _deliver_dropped_interrupt
    try:
        yield
    finally:
        if stop_now is None:
            _stop_now.clear()
            _terminated.clear()
            sys.unraisablehook = _previous_hook
            for signum, handler in previous.items():
                if signal.getsignal(signum) is _raise_interrupt:
                    signal.signal(signum, handler)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block to its end even if SIGINT (or SIGTERM under `interrupt_handlers`) arrives
    meanwhile; raise the interruption after it.

    Only where Python's default SIGINT handler (or ours) is in place in the main thread: an ignored
    signal, or one a caller handles itself, is left as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours = {signal.SIGINT: (signal.default_int_handler, _raise_interrupt), signal.SIGTERM: (_raise_interrupt,)}
    pending: List[int] = []
    previous: Dict[int, Any] = {}
    for signum, handlers in ours.items():
        if signal.getsignal(signum) in handlers:
            previous[signum] = signal.signal(signum, lambda number, frame: pending.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if pending:
        if signal.SIGTERM in pending:
            _terminated.set()
        if _raised and _stop_now:
            _stop_now[0]()  # a second signal, held back: stop now, as anywhere else
        raise _interruption(signal.SIGTERM if signal.SIGTERM in pending else signal.SIGINT)
