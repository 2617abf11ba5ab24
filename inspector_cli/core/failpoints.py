"""Named points where a test makes this process receive a signal, so the tests of Ctrl-C and SIGTERM
(tests/hostile/test_signals.py) interrupt session creation, capture or a batch at a known place
instead of racing a timer against a run.

`MI_FAILPOINT=NAME:SIGNAL` (e.g. `session:SIGTERM`, `capture:SIGINT`, `batch:SIGTERM`): the first
time the run reaches point NAME, the signal is sent to this process from a helper thread, so it
lands while the main thread goes on into the native call that follows (a session build, a run).
Python handles it when that call returns: the point only fixes *where*, the handling is the real
one. Unset (always, outside those tests), `hit` tests one empty string."""
from __future__ import annotations

import os
import signal
import threading

_fired = threading.Event()
_SPEC = os.environ.get("MI_FAILPOINT", "")
"""Read once: the tests set it in the environment of the process they start; `hit` runs on every
capture run, so it only tests this string."""


def hit(name: str) -> None:
    """Deliver the configured signal if `name` is the configured point (once per process)."""
    if not _SPEC or _fired.is_set():
        return
    point, _, signame = _SPEC.partition(":")
    if point != name or not signame.startswith("SIG") or not hasattr(signal, signame):
        return
    _fired.set()
    pid, signum = os.getpid(), getattr(signal, signame)
    threading.Thread(target=os.kill, args=(pid, signum), name="mi-failpoint", daemon=True).start()
