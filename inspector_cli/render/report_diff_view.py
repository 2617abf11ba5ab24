"""Tables of a `mi report --diff` result."""
from __future__ import annotations

from ..results.report_diff import ReportDiffResult
from .safe import visible
from .table import FAIL, OK, Cell, Table, View, fmt_value


def _state(value: object) -> str:
    return "absent" if value is None else ("pass" if value else "FAIL")


def _change_text(old: float, change: float) -> str:
    if change != change:
        return "n/a"
    if old == 0 or abs(change) == float("inf"):
        return "from 0" if old == 0 else "inf"
    return f"{change:+.1%}" if abs(change) < 100 else f"{1 + change:.3g}x"


def _fact(value: object) -> str:
    text = "absent" if value is None else (", ".join(map(str, value)) if isinstance(value, list) else str(value))
    return visible(text)[:120]


def report_diff_view(result: ReportDiffResult) -> View:
    view = View(passed=result.passed, verdict=result.summary())
    if result.check_changes:
        table = Table(title="checks that changed", columns=["check", "old", "new", "detail"])
        for c in result.check_changes:
            table.add(c.name, _state(c.old), Cell(_state(c.new), FAIL if c.regression else OK), c.message)
        view.tables.append(table)
    for title, rows, status in (("values worse beyond tolerance", result.worse, FAIL),
                                ("values better beyond tolerance", result.better, OK)):
        if not rows:
            continue
        table = Table(title=f"{title} ({result.tolerance:g})", columns=["metric", "tensor / node", "old", "new", "change"],
                      numeric=[False, False, True, True, True])
        for v in rows[:50]:
            change = _change_text(v.old, v.change)
            table.add(v.metric, v.key, fmt_value(v.old, v.metric), fmt_value(v.new, v.metric), Cell(change, status))
        if len(rows) > 50:
            table.caption = f"{len(rows) - 50} more not shown (all are in the JSON)"
        view.tables.append(table)
    for title, rows in (("findings added", result.findings_added), ("findings removed", result.findings_removed)):
        if rows:
            table = Table(title=title, columns=["rule", "severity", "where", "message"])
            for f in rows:
                table.add(f.rule, Cell(f.severity, FAIL if f.severity == "error" and title.endswith("added") else None),
                          f.node or f.tensor or "", f.message)
            view.tables.append(table)
    if result.environment:
        # next to the metric changes: "the outputs moved after an upgrade" answers itself
        table = Table(title="environment changes", columns=["fact", "old", "new"])
        for e in result.environment:
            table.add(e.key, _fact(e.old), _fact(e.new))
        view.tables.append(table)
    if not view.tables:
        view.notes.append("no change beyond the tolerance")
    return view
