"""`InspectConfig`: the resolved options of `mi inspect` (kept beside its engine)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class InspectConfig:
    depth: int = 2
    find: Optional[str] = None
    node: Optional[str] = None
    diff: Optional[str] = None
    """Path of the other model for --diff."""
