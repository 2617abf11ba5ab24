"""Drawing a `View` in the terminal with rich (colours only where the terminal allows)."""
from __future__ import annotations

import os
import sys
from typing import IO, Optional

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from .safe import visible
from .table import FAIL, MUTED, OK, WARN, Table, View

STYLES = {OK: "green", FAIL: "bold red", WARN: "yellow", MUTED: "dim"}


def make_console(file: Optional[IO[str]] = None, *, no_color: bool = False, stderr: bool = False) -> Console:
    """A console honouring --no-color and NO_COLOR; never wraps to a too-narrow width in CI logs."""
    no_color = no_color or bool(os.environ.get("NO_COLOR"))
    target = file if file is not None else (sys.stderr if stderr else sys.stdout)
    width = None if target.isatty() else 160
    return Console(file=target, no_color=no_color, highlight=False, soft_wrap=False, width=width,
                   color_system=None if no_color else "auto")


def rich_table(table: Table) -> RichTable:
    # Text, not str: a str title is parsed as rich markup, and a model name like "[/x]" would raise.
    rt = RichTable(title=Text(table.title), title_justify="left",
                   caption=Text(table.caption) if table.caption else None, caption_justify="left",
                   header_style="bold", show_lines=False)
    for i, column in enumerate(table.columns):
        numeric = table.numeric[i] if i < len(table.numeric) else False
        rt.add_column(Text(visible(column)), justify="right" if numeric else "left", overflow="fold")
    for row in table.rows:
        rt.add_row(*[Text(c.text, style=STYLES.get(c.status or "", "")) for c in row])
    return rt


def print_view(view: View, console: Console) -> None:
    for table in view.tables:
        console.print(rich_table(table))
    for note in view.safe_notes():
        style = "red" if note.startswith("error") else "yellow" if note.startswith("warning") else ""
        console.print(Text(note, style=style))
    if view.verdict:
        style = "bold green" if view.passed else "bold red" if view.passed is False else "bold"
        console.print(Text(view.safe_verdict() or "", style=style))
