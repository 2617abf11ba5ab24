"""Drawing a `View` in the terminal with rich (colours only where the terminal allows), fitted to its width."""
from __future__ import annotations

import os
import sys
from typing import IO, List, Optional

from rich import box
from rich.console import Console
from rich.cells import cell_len
from rich.table import Table as RichTable
from rich.text import Text

from .safe import visible
from .fit import PAD, Layout, fit_table, is_nowrap, natural_width, shorten_verdict
from .table import FAIL, MUTED, OK, WARN, Table, View

STYLES = {OK: "green", FAIL: "bold red", WARN: "yellow", MUTED: "dim"}
CI_WIDTH = 120  # width when stdout is not a terminal (CI logs, pipes), unless COLUMNS says otherwise
PLAIN_ROWS = 200
"""Tables of more rows are drawn without rich when they need no colour and fit (`plain_lines`): rich
lays out every cell of a table, 0.3-1 ms a row, so `probe --list` of a 50,000-node model spent its
time drawing."""


def make_console(file: Optional[IO[str]] = None, *, no_color: bool = False, stderr: bool = False,
                 width: Optional[int] = None) -> Console:
    """A console honouring --no-color and NO_COLOR; the terminal's width, or COLUMNS / 120 off a terminal."""
    no_color = no_color or bool(os.environ.get("NO_COLOR"))
    target = file if file is not None else (sys.stderr if stderr else sys.stdout)
    if width is None and not target.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) >= 40 else CI_WIDTH
    return Console(file=target, no_color=no_color, highlight=False, soft_wrap=False, width=width,
                   color_system=None if no_color else "auto")


def rich_table(table: Table) -> RichTable:
    """A compact rich table (no vertical borders): columns that must not break do not wrap."""
    # The title and caption are printed as lines of their own by print_view: inside the table rich
    # wraps them to the table's width, which splits a one-line title of a narrow table mid-word.
    rt = RichTable(header_style="bold", show_lines=False, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                   padding=(0, 0, 0, 1))
    for i, column in enumerate(table.columns):
        numeric = table.numeric[i] if i < len(table.numeric) else False
        nowrap = is_nowrap(table, i)
        rt.add_column(Text(visible(column)), justify="right" if numeric else "left", no_wrap=nowrap,
                      overflow="ellipsis" if nowrap else "fold",
                      min_width=max((len(r[i].text) for r in table.rows if i < len(r)), default=1) if nowrap else None)
    for row in table.rows:
        rt.add_row(*[Text(c.text, style=STYLES.get(c.status or "", "")) for c in row])
    return rt


def plain_lines(table: Table, width: int) -> Optional[List[str]]:
    """The lines rich draws for `table` (as `rich_table`, no colour), when that needs no wrapping:
    every cell one terminal cell per character, no column empty, the table within `width`; else None."""
    blanks = [""] * len(table.columns)
    texts = [[visible(c) for c in table.columns]] + [[c.text for c in row] + blanks[len(row):] for row in table.rows]
    for line in texts:
        for text in line:
            if (not text.isascii() and cell_len(text) != len(text)) or text[-1:].isspace():
                return None  # wide characters, or trailing blanks (rich drops them in places)
    widths = [max(len(line[i]) for line in texts) for i in range(len(table.columns))]
    if not all(widths) or sum(widths) + PAD * (len(widths) - 1) > width:  # (rich sizes an empty column its own way)
        return None
    right = [i < len(table.numeric) and table.numeric[i] for i in range(len(widths))]
    sep = " " * PAD

    def draw(line: List[str]) -> str:
        return sep.join(t.rjust(w) if r else t.ljust(w) for t, w, r in zip(line, widths, right))

    rule = "\u2500" * (sum(widths) + PAD * (len(widths) - 1))
    return [draw(texts[0]), rule, *(draw(line) for line in texts[1:])]


def print_view(view: View, console: Console, layout: Layout = Layout()) -> None:
    """Tables fitted to the console's width, then notes, then the verdict as the last line."""
    for table in view.tables:
        fitted = fit_table(table, console.width, layout)
        if fitted.title:  # Text, not str: a str is parsed as rich markup, and a name like "[/x]" would raise
            console.print(Text(visible(fitted.title), style="italic"))
        lines = None
        if len(fitted.rows) > PLAIN_ROWS and console.color_system is None and fitted.columns:
            lines = plain_lines(fitted, natural_width(fitted) if layout.wide else console.width)
        if lines is not None:
            console.file.write("\n".join(lines) + "\n")
            console.file.flush()
        elif layout.wide:  # every column, as wide as they need: the table may be wider than the terminal
            rt = rich_table(fitted)
            width = console.width  # print(width=...) is capped at the console's width: widen it for this table
            console.width = max(width, natural_width(fitted))
            console.print(rt, crop=False)
            console.width = width
        else:
            console.print(rich_table(fitted))
        if fitted.caption:
            console.print(Text(visible(fitted.caption), style="dim"))
    for note in view.safe_notes():
        style = "red" if note.startswith("error") else "yellow" if note.startswith("warning") else ""
        console.print(Text(note, style=style))
    if view.verdict:
        style = "bold green" if view.passed else "bold red" if view.passed is False else "bold"
        before, line = shorten_verdict(view.safe_verdict() or "", console.width)
        for text in before:
            console.print(Text(text, style="dim"))
        console.print(Text(line, style=style), no_wrap=True, overflow="ellipsis")
