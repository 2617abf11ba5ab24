"""Tables of a `NanBisectResult`: the scan, weights holding NaN/Inf, origins grouped over samples,
and the root cause of the first origin (its input statistics)."""
from __future__ import annotations

from typing import List, Optional

from ..results.base import Severity
from ..results.nan_bisect import Group, NanBisectResult, Origin, SampleRecord
from .fit import elide_middle
from .numbers import fmt_bytes
from .safe import visible
from .table import FAIL, MUTED, OK, WARN, Cell, Table, View, fmt_value

KIND_LABEL = {"origin": "origin", "masked": "masked (--deep)", "fp16-overflow": "fp16 overflow",
              "fp16-underflow": "fp16 underflow", "error": "error"}


def _size(value: Optional[int]) -> str:
    return fmt_bytes(value, digits=1)


def scan_table(result: NanBisectResult) -> Table:
    table = Table(title="nan-bisect", columns=["", "value"], numeric=[False, True])
    table.add("samples", f"{result.scanned + result.resumed}/{result.samples_total}"
              + (f" ({result.resumed} from the log)" if result.resumed else ""))
    table.add("with NaN/Inf outputs", Cell(str(result.nonfinite), FAIL if result.nonfinite else OK))
    if result.config.get("deep"):
        table.add("with masked NaN/Inf", Cell(str(result.masked), WARN if result.masked else OK))
    if result.config.get("simulate") == "fp16":
        table.add("leaving the fp16 range", Cell(str(result.fp16), FAIL if result.fp16 else OK))
    if result.errors:
        table.add("errors", Cell(str(result.errors), FAIL))
    plan = result.plan
    strategy = str(plan.get("strategy", ""))
    if plan.get("checkpoints") is not None:
        strategy += f", {plan['checkpoints']} checkpoints ({plan.get('single_tensor_cuts', 0)} single-tensor cuts)"
    if plan.get("chunks"):
        strategy += f", {plan['chunks']} run(s) per sample"
    table.add("strategy", strategy)
    table.add("memory budget", f"{_size(plan.get('budget_bytes'))} (all tensors: {_size(plan.get('all_exposed_bytes'))})")
    table.add("inference runs", str(result.runs))
    if result.interrupted:
        table.add("interrupted", Cell("yes: the JSONL and this summary cover the samples done", WARN))
    return table


def static_table(result: NanBisectResult) -> Table:
    table = Table(title="weights holding NaN/Inf (static pass)", columns=["tensor", "NaN", "Inf", "size", "read by"],
                  numeric=[False, True, True, True, False])
    for issue in result.static:
        table.add(issue.tensor, Cell(str(issue.nan), FAIL if issue.nan else None),
                  Cell(str(issue.inf), FAIL if issue.inf else None), str(issue.size), ", ".join(issue.consumers[:4]))
    return table


def groups_table(groups: List[Group]) -> Table:
    table = Table(title="where NaN/Inf is born", columns=["node", "op", "kind", "samples", "e.g.", "hint"],
                  numeric=[False, False, False, True, False, False])
    for g in groups:
        status = WARN if g.kind == "masked" else FAIL
        table.add(Cell(g.node, status), g.op_type, KIND_LABEL.get(g.kind, g.kind), str(g.samples),
                  ", ".join(g.examples[:3]), g.hint or "")
    return table


def origin_table(record: SampleRecord, origin: Origin) -> Table:
    # The title is one line CI greps: a long (or hostile) node name is shortened in the middle; the
    # full name is in the table below and in JSON/HTML.
    title = f"root cause: {elide_middle(visible(origin.node), 48)} ({origin.op_type}) on sample {record.sample}"
    if origin.op_type == "(input)":  # fed in by the sample, not born in the model
        title = (f"root cause: input '{elide_middle(visible(origin.node), 48)}' already holds NaN/Inf "
                 f"on sample {record.sample}")
    table = Table(title=title, columns=["tensor", "role", "dtype", "shape", "min", "max", "zeros", "negatives",
                                        "NaN", "Inf"],
                  numeric=[False, False, False, False, True, True, True, True, True, True])
    for role, stats in [("input", s) for s in origin.inputs] + [("output", s) for s in origin.outputs]:
        label = role if stats.source == "computed" else f"{role} ({stats.source})"
        table.add(stats.name, label, stats.dtype, str(stats.shape), fmt_value(stats.min), fmt_value(stats.max),
                  str(stats.zeros), str(stats.negatives), Cell(str(stats.nan), FAIL if stats.nan else MUTED),
                  Cell(str(stats.inf), FAIL if stats.inf else MUTED))
    if origin.attributes:
        table.caption = "attributes: " + ", ".join(f"{k}={v}" for k, v in origin.attributes.items())
    return table


def nan_bisect_view(result: NanBisectResult) -> View:
    view = View(passed=result.passed, verdict=result.summary())
    view.tables.append(scan_table(result))
    if result.static:
        view.tables.append(static_table(result))
    if result.groups:
        view.tables.append(groups_table(result.groups))
    if result.remedy is not None:
        from .remedy_view import remedy_tables

        view.tables.extend(remedy_tables(result.remedy))
    first = next((r for r in result.records if r.origin is not None), None)
    if first is not None and first.origin is not None:
        view.tables.append(origin_table(first, first.origin))
        origin = first.origin
        for hint in origin.hints:
            view.notes.append(f"hint ({hint.rule}): {hint.message}")
        if origin.nested is not None:
            where = f" at node '{origin.nested.node}' ({origin.nested.op_type})" if origin.nested.node else ""
            when = f", iteration {origin.nested.iteration}" if origin.nested.iteration is not None else ""
            view.notes.append(f"inside {origin.op_type} '{origin.node}': born in its {origin.nested.attribute}"
                              f"{where}{when}" + (f" ({origin.nested.note})" if origin.nested.note else ""))
        if origin.nan_birth is not None:
            how = f": {origin.nan_birth.hints[0].message}" if origin.nan_birth.hints else ""
            view.notes.append(f"the Inf became NaN at {origin.nan_birth.node} ({origin.nan_birth.op_type}){how}")
        if len(first.origins) > 1:
            view.notes.append(f"{len(first.origins)} origins on {first.sample}: "
                              + ", ".join(o.label for o in first.origins))
    for node, path in (result.plan.get("repro") or {}).items():
        view.notes.append(f"repro bundle for {node}: {path} (see README.txt there)")
    masks = [f for f in result.findings if f.rule == "MI907"]
    if masks:  # one line, however many layers: each mask is in the JSON
        more = f" (+{len(masks) - 1} more, MI907 in the JSON)" if len(masks) > 1 else ""
        view.notes.append(f"note: {len(masks)} attention mask(s) recognised, their -Inf intended: "
                          f"{masks[0].message.split(':')[0]}{more}")
    for finding in result.findings:
        if finding.rule == "MI906":
            view.notes.append(f"error: {finding.message}")
        elif finding.severity == Severity.ERROR and finding.rule in ("MI901", "MI871"):
            view.notes.append(f"error: {finding.message}")
        elif finding.rule == "MI872":  # a provider asked for took no node (docs/providers.md)
            view.notes.append(f"warning: {finding.message}")
    if result.placement is not None:
        from .placement_view import partition_notes, placement_tables

        view.tables.extend(placement_tables([result.placement], result.config.get("require_provider")))
        view.notes.extend(partition_notes([result.partition] if result.partition else [],
                                          "fewer checkpoints per scan (--checkpoints N)"))
    view.notes.extend(f"warning: {w}" for w in result.warnings)
    if result.jsonl:
        view.notes.append(f"per-sample records: {result.jsonl}")
    return view
