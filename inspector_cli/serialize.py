"""Versioned JSON for every result, strict (no NaN/Infinity tokens), written atomically.

Envelope (schema_version 1):
    {"schema_version": 1, "kind": "compare", "tool_version": "0.1.0", "created": "...Z", "fingerprint": {...},
     "models": [...], "config": {...}, "inputs": {...}, "verdict": {...}, "results": {...}}
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any, Callable, Optional, Union

from .errors import ReportError, UsageError
from .results.base import Result
from .results.codec import to_jsonable
# the envelope is result data (results/document.py); here: strict JSON text and atomic files
from .results.document import SCHEMA_VERSION, envelope, result_from_document  # noqa: F401 (re-exported)


def dumps(document: Any, *, indent: Optional[int] = 2) -> str:
    """Strict JSON: non-finite floats are already strings, anything else left over is a bug."""
    return json.dumps(to_jsonable(document), indent=indent, allow_nan=False, ensure_ascii=False)


COMPACT_NODES = 5000
"""Results describing more nodes than this are written without indentation: the indenting encoder
is pure Python and doubled the time of `mi inspect` on a 50,000-node model."""


def result_to_json(result: Result) -> str:
    document = envelope(result)  # already plain JSON values: no second to_jsonable pass
    indent = None if _nodes(result) > COMPACT_NODES else 2
    return json.dumps(document, indent=indent, allow_nan=False, ensure_ascii=False)


def _nodes(result: Result) -> int:
    section = getattr(result, "scopes", None)
    smap = section.map if section is not None else getattr(result, "scope_map", None)
    return len(smap.node_scope) if smap is not None else 0


def read_result(path: Union[str, Path]) -> Result:
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: not valid JSON ({exc})") from exc
    return result_from_document(document, str(path))


# ---- atomic writes --------------------------------------------------------------------------------
def check_writable(path: Union[str, Path], flag: str = "") -> None:
    """Fail early (before any work) when a report could not be written to `path`."""
    if str(path) == "-":
        return
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    label = f"{flag} " if flag else ""
    if target.is_dir():
        raise UsageError(f"{label}{target}: is a directory", hint="give a file path")
    blocking = next((p for p in [parent, *parent.parents] if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise UsageError(f"{label}{target}: {blocking} is a file, not a folder", hint="give a path in a folder")
    if not parent.exists():
        raise UsageError(f"{label}{target}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{label}{target}: folder {parent} is not writable")


def write_atomic(path: Union[str, Path], text_or_writer: Union[str, bytes, Callable[[Any], None]]) -> None:
    """Write to a temporary file in the same folder and rename it over `path`.

    A run interrupted mid-write leaves the previous file (or none), never half a report: the
    temporary file is removed here, or by the atexit handler when a second Ctrl-C ends the process
    at once (`cli.exit_without_finalising` runs atexit handlers, never `finally` blocks).
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    binary = isinstance(text_or_writer, bytes)
    try:
        fd, tmp = _mkstemp(parent, f".{target.name}.", ".tmp")
    except OSError as exc:
        raise ReportError(f"{target}: cannot write the report: {os_error_text(exc)}") from exc
    _being_written(tmp)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            if callable(text_or_writer):
                text_or_writer(handle)
            else:
                handle.write(text_or_writer)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            # A full disk or a folder gone read-only mid-run: the result could not be kept (exit 3),
            # named with its path; the previous file, if any, is untouched.
            raise ReportError(f"{target}: cannot write the report: {os_error_text(exc)}") from exc
        raise
    finally:
        _IN_FLIGHT.discard(tmp)


_IN_FLIGHT: "set[str]" = set()
"""Temporary files of reports being written, for `_remove_partial_reports` at exit."""


def _being_written(tmp: str) -> None:
    if not _REMOVER:  # registered once, on the first report
        import atexit

        atexit.register(_remove_partial_reports)
        _REMOVER.append(True)
    _IN_FLIGHT.add(tmp)


_REMOVER: "list[bool]" = []


def _remove_partial_reports() -> None:
    for tmp in list(_IN_FLIGHT):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def os_error_text(exc: OSError) -> str:
    """'no space left on device' rather than '[Errno 28] No space left on device: ...'."""
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return "no space left on device"
    return (exc.strerror or str(exc)).lower()


def write_result_json(result: Result, path: Union[str, Path]) -> None:
    write_atomic(path, result_to_json(result) + "\n")


__all__ = ["SCHEMA_VERSION", "envelope", "dumps", "result_to_json", "result_from_document", "read_result",
           "check_writable", "write_atomic", "write_result_json", "os_error_text"]


def _mkstemp(folder: Path, prefix: str, suffix: str) -> "tuple[int, str]":
    """A new file of ours in `folder`, opened for writing, as `tempfile.mkstemp` makes it (O_EXCL,
    mode 0600, a random name); without importing tempfile, shutil and random on every run that
    writes a report (issue 16)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(folder))
