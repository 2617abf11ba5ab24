"""Workflows: one orchestrator module per command, returning a result; no printing, no exiting.

The engines live in top-level packages (compare/, nan_bisect/, probe/, profile/, validate/).
"""
from __future__ import annotations

from ..progress import Progress, no_progress

__all__ = ["Progress", "no_progress"]
