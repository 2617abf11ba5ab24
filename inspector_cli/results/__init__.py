"""Result types of every command (plain data; see base.py)."""
from __future__ import annotations

from .base import (RESULT_MODULES, Check, Finding, GateOutcome, ModelRef, NodeValues, Result, Severity, known_kinds,
                   load_all_kinds, result_class)

__all__ = ["Check", "NodeValues", "Finding", "GateOutcome", "ModelRef", "Result", "Severity", "known_kinds", "result_class",
           "load_all_kinds", "RESULT_MODULES"]
