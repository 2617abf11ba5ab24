"""The versioned envelope of a result and its inverse: result data, below serialize.py's file I/O.

Envelope (schema_version 1):
    {"schema_version": 1, "kind": "compare", "tool_version": "0.1.0", "created": "...Z", "fingerprint": {...},
     "models": [...], "config": {...}, "inputs": {...}, "verdict": {...}, "results": {...}}
"""
from __future__ import annotations

import datetime as _dt
import functools
import json
from typing import Any, Dict, Optional

from ..errors import ReportError
from ..version import __version__
from .base import Result, result_class

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
    from ..core.fingerprint import run_fingerprint  # lazy: imports onnxruntime when installed

    return run_fingerprint()


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
