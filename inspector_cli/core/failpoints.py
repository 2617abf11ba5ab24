"""Named points where a test makes this process receive a signal, so the tests of Ctrl-C, SIGTERM and
kills (tests/hostile/test_signals.py, tests/nanbisect/test_nan_bisect_kill.py) interrupt session
creation, capture or a batch at a known place instead of racing a timer against a run.

`MI_FAILPOINT=NAME[@N]:SIGNAL[,...]` (e.g. `session:SIGTERM`, `capture:SIGINT`, `batch:SIGTERM`,
`batch@3:SIGSTOP,batch@12:SIGKILL`): the first time the run reaches point NAME (for `batch`, the
N-th record written; 2 when no @N is given), the signal is sent to this process from a helper thread,
so it lands while the main thread goes on into the native call that follows (a session build, a run).
Python handles it when that call returns: the point only fixes *where*, the handling is the real
one. Each entry fires once. Unset (always, outside those tests), `hit` tests one empty tuple.

`session:SLOWxN` makes every session build slow as on a busy machine, the native way: the same
session is first built N more times (inside onnxruntime, GIL released, as the real build), so a
signal meets builds still running and the exit path's handling of them is what the test sees."""
from __future__ import annotations

import os
import signal
import threading
from typing import Dict, List, Optional, Tuple

DEFAULT_COUNT = 2
"""The record after which `batch` fires when the entry gives no @N (the signal tests' point)."""


def _parse(spec: str) -> Tuple[Tuple[str, int, int], ...]:
    """(point, count, signal number) of each well-formed entry of `spec`; malformed ones are ignored."""
    entries: List[Tuple[str, int, int]] = []
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        where, _, signame = entry.partition(":")
        point, _, count = where.partition("@")
        if signame.startswith("SIG") and hasattr(signal, signame) and (not count or count.isdigit()):
            entries.append((point, int(count) if count else DEFAULT_COUNT, getattr(signal, signame)))
    return tuple(entries)


def _parse_slow(spec: str) -> Dict[str, int]:
    """point -> extra repetitions, from the `point:SLOWxN` entries of `spec`."""
    slow: Dict[str, int] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        point, _, action = entry.partition(":")
        times = action[len("SLOWx"):]
        if action.startswith("SLOWx") and times.isdigit():
            slow[point] = slow.get(point, 0) + int(times)
    return slow


_ENTRIES = _parse(os.environ.get("MI_FAILPOINT", ""))
_SLOW = _parse_slow(os.environ.get("MI_FAILPOINT", ""))
"""Read once: the tests set it in the environment of the process they start; `hit` runs on every
capture run, so it only tests this tuple."""
_fired: List[bool] = [False] * len(_ENTRIES)
_lock = threading.Lock()


def hit(name: str, count: Optional[int] = None) -> None:
    """Deliver the configured signal if `name` (at `count`, for counted points) is a configured point
    not fired yet."""
    if not _ENTRIES:
        return
    for index, (point, at, signum) in enumerate(_ENTRIES):
        if point != name or (count is not None and count != at):
            continue
        with _lock:
            if _fired[index]:
                continue
            _fired[index] = True
        threading.Thread(target=os.kill, args=(os.getpid(), signum), name="mi-failpoint", daemon=True).start()


def repeats(name: str) -> int:
    """How many extra times the work at point `name` is to be done (`name:SLOWxN`); 0 outside tests."""
    return _SLOW.get(name, 0) if _SLOW else 0
