"""Tables of `mi fix`: the plan (each candidate's remedy), its cost, the search's steps, the groups reverted,
accuracy against the labels, and where the exports went (terminal and HTML draw the same View)."""
from __future__ import annotations

from typing import Any, List

from ..results.base import Severity
from ..results.fix import FixResult
from ..results.remedy import metric_text
from .numbers import fmt_bytes
from .safe import visible
from .table import FAIL, OK, Cell, Table, View

STEPS_SHOWN = 40


def fix_view(result: FixResult) -> View:
    view = View(passed=result.passed, verdict=result.summary())
    if result.mode == "fp16" and result.fp16 is not None:
        from ..results.remedy import RemedySection
        from .remedy_view import remedy_tables

        view.tables.extend(remedy_tables(RemedySection(fallback=result.fp16)))
    else:
        view.tables.extend(_plan_tables(result))
    for finding in result.findings:
        if finding.severity != Severity.INFO:
            view.notes.append(f"{finding.severity.value}: {finding.message}" + (
                f" ({finding.hint})" if finding.hint else ""))
    view.notes.extend(f"warning: {w}" for w in result.warnings)
    return view


def _plan_tables(result: FixResult) -> List[Table]:
    tables: List[Table] = []
    plan = Table(title="remedy plan (cheapest remedy per node)", columns=["node", "op", "remedy", "nodes"])
    for choice in result.choices:
        plan.add(visible(choice.fp32_node), visible(choice.op_type),
                 Cell(choice.remedy, FAIL if choice.remedy == "float" else OK), len(choice.nodes))
    cost = result.cost
    added = "n/a" if cost.added_bytes is None else fmt_bytes(cost.added_bytes)
    plan.caption = (f"cost: {cost.float_nodes} of {cost.quantised_nodes} quantised node(s) in float "
                    f"({cost.float_share:.0%}{', near-float' if cost.near_float else ''}), {cost.tensors_16bit} "
                    f"tensor(s) at 16 bits, {cost.per_channel_weights} weight(s) per channel, "
                    f"{cost.recalibrated_tensors} tensor(s) re-calibrated, {added} added; remedies allowed: "
                    f"{', '.join(result.remedies)}")
    if not result.choices:
        plan.add("(none)", "", "", 0)
    tables.append(plan)
    tables.append(_targets_table(result))
    if result.groups:
        groups = Table(title="groups reverted (top-down search)", columns=["group", "nodes", "kept in float",
                                                                          *[f"re-quantised: {t}" for t in result.targets]])
        for row in result.groups:
            kept = "untried" if row.untried else ("yes" if row.kept_float else "no")
            groups.add(visible(row.name), row.nodes, Cell(kept, FAIL if row.kept_float else None),
                       *[metric_text(row.requantised.get(t)) if row.requantised else "" for t in result.targets])
        groups.caption = "a group kept in float read the re-quantised figures without it: what keeping it bought"
        tables.append(groups)
    if result.steps:
        steps = Table(title="search steps", columns=["step", "action", "node", "float nodes", "remedies",
                                                     *result.targets, "meets"])
        for i, step in enumerate(result.steps[:STEPS_SHOWN], start=1):
            mix = ", ".join(f"{k} {v}" for k, v in sorted(step.remedies.items()))
            steps.add(i, step.action, visible(step.node[:60]), step.float_nodes, mix,
                      *[metric_text(step.metrics.get(t)) for t in result.targets],
                      Cell("yes" if step.meets else (f"no (after {step.partial})" if step.partial else "no"),
                           OK if step.meets else None))
        more = f" (first {STEPS_SHOWN} of {len(result.steps)}; all in the JSON)" if len(result.steps) > STEPS_SHOWN else ""
        steps.caption = ("'no (after k)': stopped after k samples, the target out of reach; "
                         f"{result.runs} full-model runs ({result.replayed} replayed from the journal), "
                         f"{result.seconds:.1f} s; strategy: {result.strategy}; ranking: {result.ranking}{more}")
        tables.append(steps)
    if result.accuracy:
        accuracy = Table(title=f"accuracy against {visible(result.labels or 'labels')} (fp32 vs written model)",
                         columns=["output", "k", "samples", "fp32", "plan", "drop"])
        for row in result.accuracy:
            accuracy.add(visible(row.output), f"top-{row.k}", row.samples, f"{row.accuracy_a:.2%}",
                         f"{row.accuracy_b:.2%}", f"{row.drop * 100:+.2f} pts")
        tables.append(accuracy)
    return tables


def _targets_table(result: FixResult) -> Table:
    table = Table(title="targets", columns=["target", "quantised", "plan", "written model, re-checked"])
    for target in result.targets:
        table.add(visible(target), Cell(metric_text(result.baseline.get(target)), OK if result.baseline_meets else None),
                  Cell(metric_text(result.final.get(target)), OK if result.found else FAIL),
                  metric_text(result.recheck.get(target)) if result.recheck else "")
    where = []
    if result.written_model:
        where.append(f"model {visible(result.written_model)}")
    if result.export_file:
        where.append(f"exports (onnxruntime, NNCF, ModelOpt) {visible(result.export_file)}")
    notes = [*result.label_notes, *([_polish_line(result.polish)] if result.polish else [])]
    table.caption = "; ".join([*notes, *(["wrote " + ", ".join(where)] if where else [])]) or None
    return table


def _polish_line(polish: Any) -> str:
    """--polish: what the runs past the targets bought (the plan column includes it)."""
    moved = ", ".join(f"{visible(k)} {metric_text(polish.before.get(k))} -> {metric_text(v)}" for k, v in polish.after.items())
    if not polish.nodes:
        return f"polish ({polish.runs} runs): nothing kept, {polish.note or 'no node improved the metrics'}"
    ideal = ", the reference's own value" if polish.ideal else ""
    given = ", ".join(f"{count} at {remedy}" for remedy, count in sorted(polish.remedies.items()))
    return f"polish ({polish.runs} runs): {given} of {polish.candidates} node(s) offered: {moved}{ideal}"
