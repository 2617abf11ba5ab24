"""Result types of every command (plain data; see base.py)."""
from __future__ import annotations

import importlib

from .base import Check, Finding, GateOutcome, ModelRef, NodeValues, Result, Severity, known_kinds, result_class

# One module per result kind; each registers its class by defining `kind`.
RESULT_MODULES = ("compare", "report_diff", "suite", "inputs", "profile", "probe", "validate", "nan_bisect",
                  "inspect")


def load_all_kinds() -> None:
    for name in RESULT_MODULES:
        importlib.import_module(f"{__name__}.{name}")


__all__ = ["Check", "NodeValues", "Finding", "GateOutcome", "ModelRef", "Result", "Severity", "known_kinds", "result_class",
           "load_all_kinds"]
