"""onnxruntime's log severity for sessions created from now on, set by the CLI (imports nothing, so
`mi --help` stays light). 0 verbose ... 3 errors (the library default) ... 4 fatal only."""
from __future__ import annotations

_SEVERITY = {"level": 3}


def set_log_severity(level: int) -> None:
    """Severity for sessions created from now on (and onnxruntime's default logger)."""
    _SEVERITY["level"] = level


def log_severity() -> int:
    return _SEVERITY["level"]
