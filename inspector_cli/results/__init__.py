"""Result types of every command (plain data; see base.py)."""
from __future__ import annotations

import importlib

from .base import Finding, GateOutcome, ModelRef, Result, Severity, known_kinds, result_class

# One module per result kind; each registers its class by defining `kind`.
RESULT_MODULES = ("compare", "nan_bisect")


def load_all_kinds() -> None:
    for name in RESULT_MODULES:
        importlib.import_module(f"{__name__}.{name}")


__all__ = ["Finding", "GateOutcome", "ModelRef", "Result", "Severity", "known_kinds", "result_class",
           "load_all_kinds"]
