"""Error types and exit codes: the one vocabulary every layer uses to say what went wrong.

Imports nothing from the package, so every module can depend on it.
"""
from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_CANNOT_ANALYSE = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
"""SIGTERM (a cancelled CI job, `timeout`, `kill`): handled like Ctrl-C, reported as 128 + 15 as a shell does."""


class MiError(Exception):
    """Base of every error `mi` reports as one line; `exit_code` says which code the CLI returns."""

    exit_code = EXIT_CANNOT_ANALYSE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(MiError):
    """Bad flags, a bad option value or a path that does not exist (exit 2)."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """A run config that cannot be used: unknown key, wrong type, bad YAML (exit 2)."""


class SelectionError(UsageError):
    """A tensor pattern that names nothing in the model (exit 2)."""


class ModelLoadError(MiError):
    """The model cannot be loaded: not ONNX, truncated, unsafe external data (exit 3)."""


class InputDataError(MiError):
    """Input samples that cannot be read or do not fit the model (exit 3)."""


class InferenceError(MiError):
    """onnxruntime could not create a session or run a sample (exit 3)."""


class ReportError(MiError):
    """A report cannot be written or read (exit 3 when reading, 2 when the path is unusable)."""


class PluginError(MiError):
    """A plugin raised while processing a tensor or summarising (exit 3)."""


_DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def describe_error(exc: BaseException) -> "tuple[int, str]":
    """Exit code and one line for an exception that reaches a boundary (the CLI, a step of `mi run`).

    An `MiError` is the user's problem and says so in its own words; anything else is a bug in mi,
    named by its type and first line (the traceback only with --debug).
    """
    if isinstance(exc, MiError):
        return exc.exit_code, str(exc)
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        # A full disk is the machine's state, not a bug: whatever was being written (a JSONL log, a
        # dump) is named when the OS says which file it was.
        where = f"{exc.filename}: " if exc.filename else ""
        return EXIT_CANNOT_ANALYSE, f"{where}cannot write: no space left on device"
    detail = str(exc).splitlines()[0] if str(exc) else ""
    return EXIT_INTERNAL, (f"internal error: {type(exc).__name__}: {detail} (this is a bug in mi; "
                           f"rerun with --debug for the traceback)")
