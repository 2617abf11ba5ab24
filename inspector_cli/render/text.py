"""Plain-text renderings of a `View` with tabulate: markdown (for pull requests) and CSV."""
from __future__ import annotations

import csv
import io

from tabulate import tabulate

from .table import View


def view_to_markdown(view: View) -> str:
    parts = []
    for table in view.tables:
        parts.append(f"**{table.title}**\n")
        parts.append(tabulate(table.plain_rows(), headers=table.columns, tablefmt="github",
                              colalign=["right" if n else "left" for n in table.numeric] or None,
                              disable_numparse=True))
        if table.caption:
            parts.append(f"\n_{table.caption}_")
        parts.append("")
    for note in view.notes:
        parts.append(f"- {note}")
    if view.verdict:
        parts.append(f"\n**{view.verdict}**")
    return "\n".join(parts).rstrip() + "\n"


def view_to_csv(view: View) -> str:
    """One CSV: a 'table' column first, so several tables stay one machine-readable stream."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    last_columns = None
    for table in view.tables:
        if table.columns != last_columns:
            writer.writerow(["table", *table.columns])
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
    parts.extend(view.notes)
    if view.verdict:
        parts.append(view.verdict)
    return "\n".join(parts).rstrip() + "\n"
