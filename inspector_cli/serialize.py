"""Versioned JSON for every result, strict (no NaN/Infinity tokens), written atomically.

Envelope (schema_version 1):
    {"schema_version": 1, "kind": "compare", "tool_version": "0.1.0", "created": "...Z", "fingerprint": {...},
     "models": [...], "config": {...}, "inputs": {...}, "verdict": {...}, "results": {...}}
"""
from __future__ import annotations

import datetime as _dt
import errno
import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

from .errors import ReportError, UsageError
from .results.base import Result, result_class
from .results.codec import to_jsonable
from .version import __version__

SCHEMA_VERSION = 1


def envelope(result: Result, *, created: Optional[str] = None) -> Dict[str, Any]:
    """The versioned JSON document of a result, keys in a stable order."""
    body = result.to_dict()
    models = body.pop("models", [])
    config = body.pop("config", {})
    inputs = body.pop("inputs", None)
    # a result read back from JSON keeps the environment that produced it; a fresh one records this one
    fingerprint = body.pop("fingerprint", None) or _fingerprint()
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": result.kind,
        "tool_version": __version__,
        "created": created or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fingerprint": fingerprint,
        "models": models,
        "config": config,
        "inputs": inputs,
        "verdict": {"passed": result.passed, "exit_code": result.exit_code, "summary": result.summary()},
        "results": body,
    }


@functools.lru_cache(maxsize=1)
def _cached_fingerprint() -> str:
    return json.dumps(_fresh_fingerprint())


def _fingerprint() -> Dict[str, Any]:
    """This process's environment, taken once (a suite writes many results)."""
    return json.loads(_cached_fingerprint())


def _fresh_fingerprint() -> Dict[str, Any]:
    from .remedy.fingerprint import run_fingerprint  # lazy: imports onnxruntime when installed

    return run_fingerprint()


def dumps(document: Any, *, indent: Optional[int] = 2) -> str:
    """Strict JSON: non-finite floats are already strings, anything else left over is a bug."""
    return json.dumps(to_jsonable(document), indent=indent, allow_nan=False, ensure_ascii=False)


def result_to_json(result: Result) -> str:
    return dumps(envelope(result))


def result_from_document(document: Dict[str, Any], source: str = "<json>") -> Result:
    """Rebuild a result from its envelope (the inverse of `envelope`)."""
    try:
        kind = document["kind"]
        version = document["schema_version"]
    except (KeyError, TypeError) as exc:
        raise ReportError(f"{source}: not an mi result (no 'kind'/'schema_version')") from exc
    if version != SCHEMA_VERSION:
        raise ReportError(f"{source}: schema_version {version} is not supported (this mi reads {SCHEMA_VERSION})")
    try:
        cls = result_class(kind)
    except KeyError as exc:
        raise ReportError(f"{source}: unknown result kind '{kind}'") from exc
    body = dict(document.get("results") or {})
    body["models"] = document.get("models", [])
    body["config"] = document.get("config", {})
    if document.get("inputs") is not None:
        body["inputs"] = document["inputs"]
    if isinstance(document.get("fingerprint"), dict):
        body["fingerprint"] = document["fingerprint"]
    try:
        return cls.from_dict(body)
    except (TypeError, ValueError, KeyError) as exc:
        raise ReportError(f"{source}: malformed '{kind}' result ({exc})") from exc


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
    if not parent.exists():
        raise UsageError(f"{label}{target}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{label}{target}: folder {parent} is not writable")


def write_atomic(path: Union[str, Path], text_or_writer: Union[str, bytes, Callable[[Any], None]]) -> None:
    """Write to a temporary file in the same folder and rename it over `path`.

    A run interrupted mid-write leaves the previous file (or none), never half a report.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    binary = isinstance(text_or_writer, bytes)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise ReportError(f"{target}: cannot write the report: {os_error_text(exc)}") from exc
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


def os_error_text(exc: OSError) -> str:
    """'no space left on device' rather than '[Errno 28] No space left on device: ...'."""
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return "no space left on device"
    return (exc.strerror or str(exc)).lower()


def write_result_json(result: Result, path: Union[str, Path]) -> None:
    write_atomic(path, result_to_json(result) + "\n")


__all__ = ["SCHEMA_VERSION", "envelope", "dumps", "result_to_json", "result_from_document", "read_result",
           "check_writable", "write_atomic", "write_result_json", "os_error_text"]
