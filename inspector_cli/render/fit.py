"""Fitting a `Table` into a terminal width: which columns show, how wide each may be, shortened names.

Rules (issue 20): numbers and shapes are never broken (their columns do not wrap); long names are
shortened in the middle with an ellipsis (the full name stays in JSON/HTML); free-text columns wrap
at spaces; columns marked `extra` show only with --wide or when named in --columns.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence

from .names import compact_column, elide_distinct, elide_middle
from .table import Cell, Table


PAD = 2            # between columns: a blank separator and one space of left padding (no vertical borders)
MIN_ELIDED = 12    # a shortened name keeps at least this many characters
MIN_STUB = 6       # ... and only this many when the numbers would not fit otherwise
MIN_TEXT = 16      # a wrapping text column keeps at least this width
ELIDE_HEADERS = {"tensor", "kernel", "node", "producer", "original node(s)", "sample"}
NOWRAP_HEADERS = {"shape", "shape a", "shape b", "dtype", "op", "paired", "note", "gate", "failed"}
_NUMBER_OR_SHAPE = re.compile(r"^[-+]?(\d[\d.,x?e+\-%]*|inf|nan|n/a)( ?(dB|ms|MiB|%|s))?$")


@dataclass(frozen=True)
class Layout:
    """The user's choice of columns: the defaults, everything (--wide), or the defaults plus named ones."""

    wide: bool = False
    columns: Sequence[str] = ()


def column_key(header: str) -> str:
    """'max rel' and 'max_rel' and 'Max-Rel' name the same column."""
    return re.sub(r"[\s_\-]+", "_", header.strip().lower())


def is_nowrap(table: Table, index: int) -> bool:
    """Numeric columns, shapes, ops and other short tokens never wrap; free text does."""
    if index < len(table.numeric) and table.numeric[index]:
        return True
    if index in table.elide or column_key(table.columns[index]).replace("_", " ") in NOWRAP_HEADERS:
        return True
    texts = [row[index].text for row in table.rows if index < len(row) and row[index].text]
    return bool(texts) and all(_NUMBER_OR_SHAPE.match(t) for t in texts)


def visible_columns(table: Table, layout: Layout) -> List[int]:
    """Indexes of the columns to draw: all but `extra` ones, unless --wide or named in --columns."""
    wanted = {column_key(c) for c in layout.columns}
    return [i for i, header in enumerate(table.columns)
            if layout.wide or not (i < len(table.extra) and table.extra[i]) or column_key(header) in wanted]


def fit_table(table: Table, width: int, layout: Layout = Layout()) -> Table:
    """A copy of `table` with only the visible columns and names shortened so the rows fit `width`.

    Widths: every non-wrapping column keeps its widest cell; wrapping text columns get a fair share
    of what is left (at least MIN_TEXT); the elided name columns absorb the rest. When even the
    shortest names leave too little room, columns are hidden from the right (named in the caption:
    --wide or --columns shows them); with --wide nothing is hidden and the table may be wider.
    """
    keep = visible_columns(table, layout)
    elide_all = table.elide or [i for i, h in enumerate(table.columns) if h.lower() in ELIDE_HEADERS]
    hidden: List[str] = []
    while True:
        # --wide keeps names whole (the table may be wider than the terminal)
        sub, need = _fit(table, keep, [i for i in elide_all if i in keep], 10**9 if layout.wide else width, MIN_ELIDED)
        if need <= width or layout.wide:
            break
        if len(keep) <= 2:  # nothing left to hide: the names give way further, down to a stub
            sub, need = _fit(table, keep, [i for i in elide_all if i in keep], width, MIN_STUB)
            break
        hidden.insert(0, table.columns[keep.pop()])
    if hidden:
        note = f"hidden at {width} columns: {', '.join(hidden)} (--wide or --columns shows them)"
        sub = replace(sub, caption=f"{sub.caption}; {note}" if sub.caption else note)
    return sub


def _fit(table: Table, keep: List[int], elide_src: List[int], width: int, floor: int) -> tuple[Table, int]:
    """(the table cut to `keep` with names shortened, the width it needs)."""
    columns = [table.columns[i] for i in keep]
    numeric = [table.numeric[i] if i < len(table.numeric) else False for i in keep]
    elide = [keep.index(i) for i in elide_src]
    rows = [[row[i] if i < len(row) else Cell("") for i in keep] for row in table.rows]
    sub = replace(table, columns=columns, numeric=numeric, rows=rows, extra=[], elide=elide)
    nowrap = [is_nowrap(sub, i) for i in range(len(columns))]
    # A column that does not wrap does not wrap its header either.
    natural = [max([len(h) if nowrap[i] else _header_width(h)] + [len(r[i].text) for r in rows])
               for i, h in enumerate(columns)]
    fixed = sum(w for i, w in enumerate(natural) if nowrap[i] and i not in elide)
    wrapping = [i for i in range(len(columns)) if not nowrap[i] and i not in elide]
    budget = width - PAD * (len(columns) - 1) - fixed
    text_need = sum(min(natural[i], MIN_TEXT) for i in wrapping)
    elided_budget = budget - text_need
    widths = {i: natural[i] for i in elide}
    if elide and elided_budget < sum(widths.values()):
        # What every row repeats goes first (issue 32), then the cut, where the rows differ.
        notes = []
        for i in elide:
            texts, note = compact_column([r[i].text for r in rows])
            if note:
                for row, text in zip(rows, texts):
                    row[i] = Cell(text, row[i].status)
                natural[i] = max([len(columns[i])] + [len(t) for t in texts])
                widths[i] = natural[i]
                notes.append(f"{columns[i]}: without the {note} every row shares")
        if notes:
            note = "; ".join(notes) + " (--wide shows full names)"
            sub = replace(sub, caption=f"{sub.caption}; {note}" if sub.caption else note)
    if elide and elided_budget < sum(widths.values()):
        # The first elided column absorbs the squeeze; the others keep MIN_ELIDED.
        widths = {i: min(natural[i], MIN_ELIDED) for i in elide[1:]}
        widths[elide[0]] = max(MIN_ELIDED, elided_budget - sum(widths.values()))
        overflow = sum(widths.values()) - elided_budget
        for i in elide[::-1]:  # still too wide: the names give way further, down to `floor`
            give = min(max(0, overflow), widths[i] - min(floor, widths[i]))
            widths[i] -= give
            overflow -= give
        for i, limit in widths.items():
            for row, text in zip(rows, elide_distinct([row[i].text for row in rows], limit)):
                row[i] = Cell(text, row[i].status)
    need = width - budget + text_need + sum(widths.values())
    return sub, need


def natural_width(table: Table) -> int:
    """The width `table` needs with no cell or header wrapped."""
    widths = [max([len(h)] + [len(r[i].text) for r in table.rows if i < len(r)]) for i, h in enumerate(table.columns)]
    return sum(widths) + PAD * max(len(widths) - 1, 0)


def _header_width(header: str) -> int:
    """Headers may wrap at spaces ('max abs' over two lines) but never inside a word."""
    return max((len(word) for word in header.split()), default=0)


def shorten_verdict(verdict: str, width: int) -> tuple[List[str], str]:
    """(lines to print before, the one-line verdict) so the verdict's line fits `width`.

    The verdict's clauses ('; '-separated) that do not fit move to lines above it, so nothing is lost
    and the verdict stays the last line.
    """
    if len(verdict) <= width:
        return [], verdict
    clauses = verdict.split("; ")
    last = clauses[0]
    moved = clauses[1:]
    while moved and len(last) + 2 + len(moved[0]) <= width:
        last = f"{last}; {moved.pop(0)}"
    if len(last) > width:
        last = elide_middle(last, width)
    return [f"  {c}" for c in moved], last


def fits(lines: Sequence[str], width: int) -> Optional[str]:
    """The first line longer than `width` (for tests and self-checks), or None."""
    return next((line for line in lines if len(line.rstrip()) > width), None)
