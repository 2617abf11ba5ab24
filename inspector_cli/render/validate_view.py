"""Tables of a `ValidateResult` (findings grouped by severity, --against structure and weights) and of the rules."""
from __future__ import annotations

import math
from typing import List

from ..results.base import Severity
from ..results.validate import SEVERITY_ORDER, AgainstSection, RuleInfo, ValidateResult
from .table import FAIL, MUTED, OK, WARN, Cell, Table, View

STATUS = {Severity.ERROR: FAIL, Severity.WARNING: WARN, Severity.INFO: MUTED}
TITLES = {Severity.ERROR: "errors", Severity.WARNING: "warnings", Severity.INFO: "info"}
MAX_WEIGHT_ROWS = 20


def validate_view(result: ValidateResult) -> View:
    """Findings by severity (rule, node, tensor, message, hint), then the --against tables, notes, verdict."""
    view = View(passed=result.passed, verdict=result.summary())
    model = result.models[0].path if result.models else "model"
    for severity in SEVERITY_ORDER:
        findings = [f for f in result.findings if f.severity == severity]
        if not findings:
            continue
        table = Table(title=f"{model}: {TITLES[severity]} ({len(findings)})",
                      columns=["rule", "node", "tensor", "message", "hint"])
        for f in findings:
            table.add(Cell(f.rule, STATUS[severity]), f.node or "", f.tensor or "", f.message, f.hint or "")
        view.tables.append(table)
    if not result.findings:
        view.notes.append(f"{model}: no findings ({', '.join(result.checked)} checked)")
    if result.against is not None:
        view.tables.append(structure_table(result.against))
        if result.against.weights:
            view.tables.append(weights_table(result.against))
    view.notes.extend(result.notes)
    view.notes.extend(f"skipped {family}: {why}" for family, why in result.skipped.items())
    return view


def structure_table(section: AgainstSection) -> Table:
    table = Table(title=f"structure against {section.model}", columns=["", "reference", "this model", ""],
                  numeric=[False, True, True, False])
    for op, (ref, mine) in section.op_counts.items():
        mark = Cell("", None) if ref == mine else Cell("removed" if not mine else "added" if not ref else "changed",
                                                       WARN if not mine else MUTED)
        table.add(op, ref, mine, mark)
    table.add(Cell("nodes", MUTED), *section.nodes, "")
    table.add(Cell("Q->DQ pairs", MUTED), *section.qdq_pairs, "")
    table.add(Cell("QOperator ops", MUTED), *section.quantized_ops, "")
    table.add(Cell("weights (MB)", MUTED), *(f"{b / 1e6:.2f}" for b in section.initializer_bytes), "")
    return table


def weights_table(section: AgainstSection) -> Table:
    rows = sorted(section.weights, key=lambda w: w.sqnr_db)
    table = Table(title=f"dequantised weights against {section.model} (worst first)",
                  columns=["tensor", "node", "reference", "SQNR dB", "max |diff|", "elements"],
                  numeric=[False, False, False, True, True, True])
    for w in rows[:MAX_WEIGHT_ROWS]:
        status = FAIL if w.sqnr_db < 10 else OK
        db = "inf" if math.isinf(w.sqnr_db) and w.sqnr_db > 0 else f"{w.sqnr_db:.2f}"
        reference = w.reference + (f" (+{w.folded} folded)" if w.folded else "")
        table.add(w.tensor, w.node, reference, Cell(db, status), f"{w.max_abs:.4g}", w.elements)
    if len(rows) > MAX_WEIGHT_ROWS:
        table.caption = f"{len(rows) - MAX_WEIGHT_ROWS} more in the JSON result"
    return table


def rules_view(rules: List[RuleInfo], *, verbose: bool = False) -> View:
    """`mi validate --list-rules`: one row per rule; with -v the help text too."""
    columns = ["rule", "severity", "family", "name", "title"] + (["help"] if verbose else [])
    table = Table(title=f"mi validate rules ({len(rules)})", columns=columns)
    for r in rules:
        cells: List[object] = [r.id, Cell(r.severity.value, STATUS[r.severity]), r.family, r.name, r.title]
        table.add(*cells, *([r.help] if verbose else []))
    return View(tables=[table])
