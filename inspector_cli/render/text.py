"""Plain-text renderings of a `View` with tabulate: markdown (for pull requests) and CSV."""
from __future__ import annotations

import csv
import io

from tabulate import tabulate

from .safe import markdown_text, visible
from .table import View


def view_to_markdown(view: View) -> str:
    """GitHub-flavoured Markdown; every text escaped (`markdown_text`): a name holding `<script>`,
    `|` or a newline stays inert text in its own cell."""
    parts = []
    for table in view.tables:
        parts.append(f"**{markdown_text(table.title)}**\n")
        rows = [[markdown_text(cell) for cell in row] for row in table.plain_rows()]
        parts.append(tabulate(rows, headers=[markdown_text(c) for c in table.columns], tablefmt="github",
                              colalign=["right" if n else "left" for n in table.numeric] or None,
                              disable_numparse=True))
        if table.caption:
            parts.append(f"\n_{markdown_text(table.caption)}_")
        parts.append("")
    for note in view.notes:
        parts.append(f"- {markdown_text(note)}")
    if view.verdict:
        parts.append(f"\n**{markdown_text(view.verdict)}**")
    return "\n".join(parts).rstrip() + "\n"


def view_to_csv(view: View) -> str:
    """One CSV: a 'table' column first, so several tables stay one machine-readable stream."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    last_columns = None
    for table in view.tables:
        if table.columns != last_columns:
            writer.writerow(["table", *[visible(c) for c in table.columns]])
            last_columns = table.columns
        for row in table.plain_rows():
            writer.writerow([table.title, *row])
    return buffer.getvalue()


def view_to_plain(view: View) -> str:
    parts = []
    for table in view.tables:
        parts.append(table.title)
        parts.append(tabulate(table.plain_rows(), headers=table.columns, tablefmt="simple", disable_numparse=True))
        parts.append("")
    parts.extend(view.safe_notes())
    if view.verdict:
        parts.append(view.safe_verdict() or "")
    return "\n".join(parts).rstrip() + "\n"
