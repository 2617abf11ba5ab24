"""A neutral table model: built once from a result, shown by rich or tabulate alike."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Optional

from .safe import visible

OK, FAIL, WARN, MUTED = "ok", "fail", "warn", "muted"


@dataclass(frozen=True)
class Cell:
    text: str
    status: Optional[str] = None
    """ok / fail / warn / muted: drawn as colours by rich, ignored by plain formats."""

    def __post_init__(self) -> None:
        # Cells hold model-supplied names: control characters become visible escapes here, once,
        # so every format (terminal, Markdown, CSV, HTML) shows them and none obeys them.
        object.__setattr__(self, "text", visible(self.text))


@dataclass
class Table:
    title: str
    columns: List[str]
    rows: List[List[Cell]] = field(default_factory=list)
    caption: Optional[str] = None
    numeric: List[bool] = field(default_factory=list)
    extra: List[bool] = field(default_factory=list)
    """Columns the terminal shows only with --wide or --columns (markdown, CSV and HTML show all)."""
    elide: List[int] = field(default_factory=list)
    """Columns of names the terminal may shorten in the middle with an ellipsis to fit its width."""

    def __post_init__(self) -> None:
        self.title = visible(self.title)
        self.caption = visible(self.caption) if self.caption is not None else None

    def add(self, *cells: Any) -> None:
        self.rows.append([c if isinstance(c, Cell) else Cell(str(c)) for c in cells])

    def plain_rows(self) -> List[List[str]]:
        return [[c.text for c in row] for row in self.rows]


@dataclass
class View:
    """Everything a command prints: tables, then notes and a one-line verdict."""

    tables: List[Table] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    verdict: Optional[str] = None
    passed: Optional[bool] = None

    def safe_notes(self) -> List[str]:
        """Notes with control characters visible (notes are appended after construction)."""
        return [visible(note) for note in self.notes]

    def safe_verdict(self) -> Optional[str]:
        """The verdict on one line whatever the names in it hold (CI greps `FAIL:` / `FOUND:`)."""
        return visible(self.verdict) if self.verdict is not None else None


def fmt_value(value: Optional[float], metric: str = "") -> str:
    """Numbers as people read them: cosine to 6 places, dB to 2, errors to 4 significant digits."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    if metric == "cosine":
        return f"{value:.6f}"
    if metric == "sqnr":
        return f"{value:.2f}"
    if metric.startswith("top"):
        return f"{value:.4f}"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"
