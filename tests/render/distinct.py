"""Do two rows of a drawn table read the same while their full names differ? (issue 32)

Shared by tests/render/test_distinct_names.py (one cached ResNet) and the zoo sweep
(tests/zoo/test_sweep.py `test_distinct_row_names`, every model and variant): a saved JSON result is
rendered as the terminal draws it, at each width, and every name column of every table is checked.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Dict, List, Sequence, Set, Tuple
from unittest import mock

from inspector_cli.render import console
from inspector_cli.render.console import make_console, print_view
from inspector_cli.render.fit import Layout
from inspector_cli.render.names import ELLIPSIS
from inspector_cli.render.table import Table
from inspector_cli.render.views import view_for
from inspector_cli.serialize import read_result

WIDTHS = (80, 100, 120)
NAME_HEADERS = {"tensor", "kernel", "node", "producer", "name", "nodes"}


def drawn_tables(path: Path, width: int, layout: Layout = Layout()) -> List[Tuple[Table, Table]]:
    """(the table as built, the table as fitted to `width`) for every table the terminal draws of the
    result saved at `path` (console.fit_table is wrapped to see them)."""
    seen: List[Tuple[Table, Table]] = []
    real = console.fit_table

    def spy(table: Table, w: int, lay: Layout = Layout()) -> Table:
        fitted = real(table, w, lay)
        seen.append((table, fitted))
        return fitted

    with mock.patch.object(console, "fit_table", spy):
        print_view(view_for(read_result(path)), make_console(io.StringIO(), no_color=True, width=width), layout)
    return seen


def name_columns(table: Table) -> List[str]:
    """The columns of `table` that hold names: by header (tensor, kernel, node...) or marked for the
    fit to shorten (a fitted table's `elide`: probe's quantisers, plugin rows)."""
    return [c for i, c in enumerate(table.columns) if c.lower() in NAME_HEADERS or i in table.elide]


def column_clashes(built: Table, fitted: Table, column: str) -> Dict[str, Set[str]]:
    """Shown text -> the different full names shown as it, for the texts shared by two or more names."""
    src, dst = built.columns.index(column), fitted.columns.index(column)
    names: Dict[str, Set[str]] = {}
    for full, shown in zip((r[src].text for r in built.rows), (r[dst].text for r in fitted.rows)):
        if full:
            names.setdefault(shown, set()).add(full)
    return {shown: full for shown, full in names.items() if len(full) > 1}


def row_clashes(path: Path, widths: Sequence[int] = WIDTHS) -> Tuple[List[str], int]:
    """(one line per clash: width, table, column, the shown text and its names; how many distinct
    names were checked) over every drawn table of the result at `path` at each width."""
    problems: List[str] = []
    checked = 0
    for width in widths:
        for built, fitted in drawn_tables(path, width):
            for column in name_columns(fitted):
                # a view that cuts names itself hides them from --wide and from this check
                cut = sorted({r[built.columns.index(column)].text for r in built.rows} & _cut_texts(built, column))
                if cut:
                    problems.append(f"at {width}: {built.title!r} column {column!r}: cut before fitting: {cut[:2]}")
                for shown, full in column_clashes(built, fitted, column).items():
                    problems.append(f"at {width}: {built.title!r} column {column!r}: {shown!r} is "
                                    f"{sorted(full)[:3]}{' ...' if len(full) > 3 else ''}")
                checked += len({r[built.columns.index(column)].text for r in built.rows} - {""})
    return problems, checked


def _cut_texts(table: Table, column: str) -> Set[str]:
    """The cells of `column` that already hold an ellipsis in the table as built."""
    index = table.columns.index(column)
    return {r[index].text for r in table.rows if ELLIPSIS in r[index].text}
