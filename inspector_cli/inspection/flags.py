"""Settings of the roll-up engine that the CLI sets before a command runs, in a module that imports
nothing heavy: setting one must not import the engine (and onnx) for runs that never roll up."""
from __future__ import annotations

from contextvars import ContextVar

FULL_SCOPES: ContextVar[bool] = ContextVar("FULL_SCOPES", default=True)
"""Whether `attach_scopes` builds the whole scope map (every scope's facts, every node, B aligned):
the CLI sets it only when --html or --group-by will use it (`commands/_scope_options.py`)."""
