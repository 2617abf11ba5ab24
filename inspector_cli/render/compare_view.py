"""Tables of a `CompareResult`: one per output, rows = metrics, with gates and failing counts."""
from __future__ import annotations

from typing import Dict, List

from ..diff.metrics import METRICS
from ..results.base import GateOutcome, Severity
from ..results.compare import CompareResult, OutputDiff
from .grouping import group_messages
from .table import FAIL, MUTED, OK, Cell, Table, View, fmt_value

METRIC_ORDER = ["cosine", "max_abs", "mean_abs", "rmse", "max_rel_sig", "mean_rel_sig", "max_rel", "mean_rel", "sqnr",
                "kl", "top1", "top5"]
GATED_ONLY = {"max_rel", "mean_rel"}
"""Shown only when gated (--max-rel): elements whose reference is ~0 make them 1e+12 and unreadable;
the significant relative error (max_rel_sig, mean_rel_sig) is shown instead. Both are in the JSON."""


def output_table(out: OutputDiff, gates: List[GateOutcome]) -> Table:
    by_metric: Dict[str, GateOutcome] = {g.metric: g for g in gates if g.tensor == out.name and g.scope == "output"}
    pairing = "" if out.matched_by == "name" else f" vs '{out.name_b}' (paired by {out.matched_by})"
    table = Table(
        title=f"output '{out.name}'{pairing}  {out.dtype_a} {out.shape_a}  ({out.samples} sample{'s' if out.samples != 1 else ''})",
        columns=["metric", "data set", "worst", "mean", "gate", "failed"],
        numeric=[False, True, True, True, False, True],
    )
    metrics = [m for m in METRIC_ORDER if m in out.dataset] + [m for m in out.dataset if m not in METRIC_ORDER]
    for metric in metrics:
        if (out.dataset.get(metric) is None or metric in GATED_ONLY) and metric not in by_metric:
            continue
        label = METRICS[metric].label if metric in METRICS else metric
        if metric == "kl" and out.kl_mode:
            label += f" ({out.kl_mode})"
        gate = by_metric.get(metric)
        if gate is None:
            gate_cell, failed_cell = Cell("", MUTED), Cell("", MUTED)
        elif not gate.applicable:
            gate_cell, failed_cell = Cell(f"{gate.op} {gate.threshold:g}", MUTED), Cell("n/a", MUTED)
        else:
            status = OK if gate.passed else FAIL
            gate_cell = Cell(f"{gate.op} {gate.threshold:g}", status)
            failed_cell = Cell(f"{gate.failed_samples}/{gate.total_samples}", status)
        worst_status = None if gate is None or not gate.applicable else (OK if gate.passed else FAIL)
        table.add(label, fmt_value(out.dataset.get(metric), metric),
                  Cell(fmt_value(out.worst.get(metric), metric), worst_status),
                  fmt_value(out.mean.get(metric), metric), gate_cell, failed_cell)
    eq = out.equality
    if eq is not None:  # strings, labels, map keys: compared for equality (no metric applies)
        status = OK if eq.unequal == 0 else FAIL
        table.add("values equal", Cell(f"{eq.items - eq.unequal}/{eq.items}", status), "", "", Cell("==", MUTED),
                  Cell(f"{eq.unequal_samples}/{out.samples}", status))
    nonfinite = {k: v for k, v in out.nonfinite.items() if v}
    if nonfinite:
        table.caption = "non-finite values: " + ", ".join(f"{k}={v}" for k, v in nonfinite.items())
    if eq is not None and eq.unequal:
        first = f"first difference: sample {eq.first_sample} at {eq.first_at}: {eq.first_a} vs {eq.first_b}"
        table.caption = f"{table.caption}; {first}" if table.caption else first
    return table


def compare_view(result: CompareResult) -> View:
    view = View(passed=result.passed, verdict=result.summary())
    if result.layers is not None:
        from .layers_view import capture_notes, layer_tables

        steps = result.remedy.quant_steps if result.remedy is not None else []
        view.tables.extend(layer_tables(result.layers, steps))
        view.notes.extend(capture_notes(result.layers))
    for out in result.outputs:
        view.tables.append(output_table(out, result.gates))
    if result.placement:
        from .placement_view import partition_notes, placement_tables

        view.tables.extend(placement_tables(result.placement, result.config.get("require_provider")))
        view.notes.extend(partition_notes(result.partition))
    if result.remedy is not None:
        from .remedy_view import remedy_tables

        view.tables.extend(remedy_tables(result.remedy))
    for finding in result.findings:
        prefix = "error" if finding.severity == Severity.ERROR else finding.severity.value
        view.notes.append(f"{prefix}: {finding.message}" + (f" ({finding.hint})" if finding.hint else ""))
    view.notes.extend(f"warning: {w}" for w in group_messages(result.warnings))  # alike ones: one line
    return view
