"""Result of `mi inputs show` / `mi inputs make`: per-input statistics over a data folder."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .base import ModelRef, Result


@dataclass(frozen=True)
class InputStats:
    """One input over every sample: what it holds and what its values look like."""

    name: str
    dtypes: List[str]
    shapes: List[str]
    """Distinct shapes seen (at most 5 listed)."""
    samples: int
    elements: int
    min: Optional[float] = None
    max: Optional[float] = None
    mean: Optional[float] = None
    std: Optional[float] = None
    """Over the finite values of every sample taken together."""
    nan: int = 0
    inf: int = 0
    integer_valued: bool = False
    looks_like: str = ""
    """A reading of the range: 'pixels [0, 255]', '[0, 1]', '[-1, 1]', 'normalised', or ''."""


@dataclass(frozen=True)
class InputsResult(Result):
    """Statistics of a data set; `passed` is False when it holds NaN or Inf values."""

    kind: ClassVar[str] = "inputs"

    action: str
    """'show' or 'make'."""
    models: List[ModelRef]
    config: Dict[str, Any]
    inputs: Dict[str, Any]
    stats: List[InputStats]
    samples: int
    written: List[str] = field(default_factory=list)
    out: Optional[str] = None
    warnings: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(s.nan or s.inf for s in self.stats)

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        what = f"wrote {len(self.written)} sample(s) to {self.out}" if self.action == "make" \
            else f"{self.samples} sample(s)"
        parts = []
        for s in self.stats:
            low = "n/a" if s.min is None else f"{s.min:.4g}"
            high = "n/a" if s.max is None else f"{s.max:.4g}"
            bad = f", {s.nan} NaN, {s.inf} Inf" if (s.nan or s.inf) else ""
            parts.append(f"'{s.name}' {'/'.join(s.dtypes)} in [{low}, {high}]{bad}")
        return f"{verdict}: {what}; " + "; ".join(parts)
