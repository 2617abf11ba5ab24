"""Tensor types computed in a forked child while the parent goes on loading (Linux).

ONNX's C++ shape inference holds the GIL for its whole call (~1 s at 50,000 nodes), so a thread
cannot overlap it with Python work; a child process can. `start(model)` forks right after the model
is parsed and its external data checked; the child runs the same code the parent would
(`protoutil.light_value_types`: inference on the same light copy, then the conversion of the value
infos)
and sends back one compact table (names, element types, shapes; `marshal`, which rebuilds the same
tuples of ints, strings and None); the parent meanwhile builds the topology, the index and the scope
paths, and adds the initializers' types itself (`protoutil.add_initializer_types`).

Nothing about the result depends on the child: whenever it cannot be used (not Linux, one CPU, other
threads in the process, a small model, the child failing, exiting early or being killed), `result()`
answers None and the caller computes the types in-process as before, so an error, a crash or a
message is exactly the in-process one. The CPU the child uses is still the process's (a shell's
`time`, `wait4`); what it saves is wall time on a machine with a second core.
"""
from __future__ import annotations

import atexit
import marshal
import os
import signal
import sys
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional

from .protoutil import tensor_infos
from .types import TensorInfo

FORK_MIN_NODES = 2000
"""Smaller models infer in a few dozen milliseconds: not worth a fork (~5-20 ms of page tables)."""

_WHILE_WAITING: List[Callable[[], None]] = []


@contextmanager
def while_waiting(task: Callable[[], None]) -> Iterator[None]:
    """Inside the block, run `task` (once, errors ignored) if the process waits for a types child: for
    work the caller does anyway after the block, such as importing its renderer (time the parent would
    spend idle while the child finishes)."""
    _WHILE_WAITING.append(task)
    try:
        yield
    finally:
        if task in _WHILE_WAITING:
            _WHILE_WAITING.remove(task)


class PendingTypes:
    """The child computing a model's value types: `result()` once, or `cancel()`."""

    __slots__ = ("_pid", "_fd", "_owner", "__weakref__")

    def __init__(self, pid: int, fd: int) -> None:
        self._pid, self._fd, self._owner = pid, fd, os.getpid()

    def __reduce__(self) -> tuple:
        # a copy (or a pickle sent to another process) must not read the pipe or signal the child: it
        # gets a spent handle, and its types are computed where it is used
        return (PendingTypes, (-1, -1))

    def __copy__(self) -> "PendingTypes":
        return PendingTypes(-1, -1)

    def __deepcopy__(self, memo: dict) -> "PendingTypes":
        return PendingTypes(-1, -1)

    def result(self) -> Optional[Dict[str, TensorInfo]]:
        """The child's value types (value infos, graph inputs and outputs, in the in-process order),
        or None when the child did not deliver them whole (the caller then computes them itself)."""
        if self._pid <= 0 or self._owner != os.getpid():
            return None
        while _WHILE_WAITING:
            task = _WHILE_WAITING.pop(0)
            try:
                task()
            except Exception:  # noqa: BLE001 - the caller does the same work later, where errors surface
                pass
        try:
            with os.fdopen(self._fd, "rb", closefd=True) as pipe:
                self._fd = -1
                data = pipe.read()
        except OSError:  # the pipe is gone: compute in-process
            self.cancel()
            return None
        except BaseException:  # Ctrl-C while waiting: the child (which ignores SIGINT) goes first
            self.cancel()
            raise
        if self._reap() != 0:
            return None
        try:
            names, types = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            return None
        return tensor_infos(zip(names, types))

    def cancel(self) -> None:
        """Stop the child (its types are not needed, or the load failed)."""
        if self._owner != os.getpid():
            return  # a forked copy of the parent (executor workers): the child is not this process's
        if self._pid > 0:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except OSError:
                pass
            self._reap()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _reap(self) -> int:
        pid, self._pid = self._pid, -1
        atexit.unregister(self.cancel)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return -1
        return status


def can_fork(nodes: int) -> bool:
    """Whether a child can take the inference: Linux, two CPUs for this process, no other thread (a
    lock another thread holds at the fork would stay locked in the child), a model large enough."""
    if nodes < FORK_MIN_NODES or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        if len(os.sched_getaffinity(0)) < 2:
            return False
        return len(os.listdir("/proc/self/task")) == 1  # native threads too (onnxruntime's, BLAS')
    except OSError:
        return False


def start(model: "object", nodes: int) -> Optional[PendingTypes]:
    """Fork a child computing `protoutil.light_value_types(model)`; None when `can_fork` says no or the
    fork fails. `model`: the parsed ModelProto, whose external data has been checked already."""
    if not can_fork(nodes):
        return None
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: never returns
        _child(model, read_fd, write_fd)
    os.close(write_fd)
    pending = PendingTypes(pid, read_fd)
    atexit.register(pending.cancel)  # a run that fails before asking for the types leaves no child
    return pending


def _child(model: "object", read_fd: int, write_fd: int) -> None:
    """Compute, send, `os._exit`: no atexit handler, no flush of the parent's buffered output, no
    `finally` of the parent's stack runs here. Any failure exits 1 and the parent computes in-process."""
    code = 1
    try:
        os.close(read_fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills us
        from .protoutil import light_value_types

        table = light_value_types(model)  # type: ignore[arg-type]
        # the (element type, shape) tuples are shared between the tensors of one type: marshal writes
        # each once and refers to it after (a few dozen types among 50,000 tensors)
        payload = marshal.dumps((list(table), list(table.values())))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
        code = 0
    except BaseException:  # noqa: BLE001 - reported by the exit status; the parent redoes the work
        code = 1
    finally:
        os._exit(code)
