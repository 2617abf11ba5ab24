"""Named points where a test makes this process receive a signal, so the tests of Ctrl-C, SIGTERM and
kills (tests/hostile/test_signals.py, tests/nanbisect/test_nan_bisect_kill.py) interrupt session
creation, capture or a batch at a known place instead of racing a timer against a run.

`MI_FAILPOINT=NAME[@N]:SIGNAL[,...]` (e.g. `session:SIGTERM`, `capture:SIGINT`, `batch:SIGTERM`,
`batch@3:SIGSTOP,batch@12:SIGKILL`): the first time the run reaches point NAME (for `batch`, the
N-th record written; 2 when no @N is given), the signal is sent to this process from a helper thread,
so it lands while the main thread goes on into the native call that follows (a session build, a run).
Python handles it when that call returns: the point only fixes *where*, the handling is the real
one. Each entry fires once. Unset (always, outside those tests), `hit` tests one empty tuple.

`session:SLOW=S` keeps the first session build to reach the point inside onnxruntime for S seconds
before it builds: runs of a one-node model, each a native call that releases the GIL and takes it
back, as the real build does at its end. The point's signal, if one is configured, is then sent
by that build halfway through: it lands while the build is at work and will be for S/2 seconds
more, whatever the main thread has reached by then (waiting for the build, typically). A run whose
exit let the interpreter finalise under such a thread aborted (issue 40); only the timing of the
work depends on the machine, never an assertion."""
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


def _parse_slow(spec: str) -> Dict[str, float]:
    """point -> seconds, from the `point:SLOW=S` entries of `spec`."""
    slow: Dict[str, float] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        point, _, action = entry.partition(":")
        seconds = action[len("SLOW="):]
        if action.startswith("SLOW=") and seconds.replace(".", "", 1).isdigit():
            slow[point] = float(seconds)
    return slow


_ENTRIES = _parse(os.environ.get("MI_FAILPOINT", ""))
_SLOW = _parse_slow(os.environ.get("MI_FAILPOINT", ""))
_SLOW_POINTS = frozenset(_SLOW)
"""Read once: the tests set it in the environment of the process they start; `hit` runs on every
capture run, so it only tests this tuple."""
_fired: List[bool] = [False] * len(_ENTRIES)
_lock = threading.Lock()


def hit(name: str, count: Optional[int] = None) -> None:
    """Deliver the configured signal if `name` (at `count`, for counted points) is a configured point
    not fired yet (a point with `SLOW=S` fires from inside its slow work instead: see `slow`)."""
    if not _ENTRIES or name in _SLOW_POINTS:
        return
    _fire(name, count)


def _fire(name: str, count: Optional[int] = None) -> None:
    for index, (point, at, signum) in enumerate(_ENTRIES):
        if point != name or (count is not None and count != at):
            continue
        with _lock:
            if _fired[index]:
                continue
            _fired[index] = True
        threading.Thread(target=os.kill, args=(os.getpid(), signum), name="mi-failpoint", daemon=True).start()


def slow(name: str) -> None:
    """At point `name` configured `name:SLOW=S` (the first time it is reached): S seconds of runs of a
    one-node onnxruntime model on this thread (see the module)."""
    if not _SLOW:
        return
    with _lock:
        seconds = _SLOW.pop(name, 0.0)
    if not seconds:
        return
    import time

    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "slow", value[:1],
                                                value[1:]), opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {"x": np.zeros(1, np.float32)}
    start = time.monotonic()
    signalled = False
    while time.monotonic() < start + seconds:
        session.run(None, feeds)
        if not signalled and time.monotonic() >= start + seconds / 2:
            signalled = True
            _fire(name)
