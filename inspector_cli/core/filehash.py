"""sha256 of model files, started in the background as soon as a model is loaded.

Results name each model by its sha256 (`ModelRef`). Hashing ResNet-50 (100 MB) takes 0.2-0.7 s
of one core, which used to run after the last sample, on the critical path. hashlib releases the
GIL on large updates, so the hash is started on a daemon thread when the model is loaded and is
ready (or nearly) when the result is built: it uses the core that imports, parsing and session
creation (all single-threaded) leave idle. The value is the same sha256 of the same bytes.

Background hashing is started only in the main process (not in executor workers, which never
build results), for files of at least `BACKGROUND_MIN_BYTES`. A finished hash is remembered per
(path, size, mtime, inode), so a file hashed twice in one run is read once.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import Dict, Optional, Tuple

CHUNK = 1 << 22
BACKGROUND_MIN_BYTES = 1 << 22
"""Smaller files hash in milliseconds: not worth a thread."""

_Key = Tuple[str, int, int, int]


class _Hash:
    """One file's hash, set once by whoever computes it (a background thread or the first caller).
    A two-method stand-in for concurrent.futures.Future, whose import (with logging) costs every
    run more than the small files it would wait for (issue 16)."""

    __slots__ = ("_done", "_value", "_error")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value = ""
        self._error: Optional[BaseException] = None

    def set_result(self, value: str) -> None:
        self._value = value
        self._done.set()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def result(self) -> str:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


_LOCK = threading.Lock()
_HASHES: Dict[_Key, _Hash] = {}


def _key(path: Path) -> _Key:
    stat = path.stat()
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(path: Path, future: _Hash) -> None:
    try:
        future.set_result(_digest(path))
    except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the hash
        future.set_exception(exc)


def prefetch(path: "str | os.PathLike[str]") -> None:
    """Start hashing `path` on a daemon thread (main process, large files only; errors are kept for
    `sha256`, which raises them as a synchronous hash would)."""
    mp = sys.modules.get("multiprocessing")  # not imported for this: a worker has it already
    if mp is not None and mp.parent_process() is not None:
        return  # an executor worker: its results carry sums, not model references
    try:
        file = Path(path)
        if file.stat().st_size < BACKGROUND_MIN_BYTES:
            return
        key = _key(file)
    except OSError:
        return  # the loader reports a missing or unreadable file itself
    with _LOCK:
        if key in _HASHES:
            return
        future = _Hash()
        _HASHES[key] = future
    threading.Thread(target=_run, args=(file, future), name="mi-sha256", daemon=True).start()


def sha256(path: "str | os.PathLike[str]") -> str:
    """The file's sha256 (hex): the background hash when one was started, else computed now."""
    file = Path(path)
    key = _key(file)
    with _LOCK:
        future = _HASHES.get(key)
        if future is None:
            future = _Hash()
            _HASHES[key] = future
            mine = True
        else:
            mine = False
    if mine:
        _run(file, future)
    return future.result()
