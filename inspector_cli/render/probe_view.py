"""Tables of `mi probe` results: ranges with sparklines, health, quantisers, plugins, history."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from ..results.base import Severity
from ..results.probe import HistoryListResult, ProbeResult, TensorListResult, TensorStats
from .table import FAIL, MUTED, OK, WARN, Cell, Table, View, fmt_value

SPARK = " ▁▂▃▄▅▆▇█"
SINCE_STATS = ("min", "max", "mean", "std", "p1", "p99", "zero_frac", "outlier_ratio")


def sparkline(counts: Sequence[int], width: int = 16) -> str:
    """Counts drawn as block characters, on a log scale so that thin tails stay visible."""
    if not counts or not any(counts):
        return ""
    step = max(1, math.ceil(len(counts) / width))
    merged = [sum(counts[i:i + step]) for i in range(0, len(counts), step)]
    top = math.log1p(max(merged))
    return "".join(SPARK[0] if c == 0 else SPARK[max(1, round(math.log1p(c) / top * (len(SPARK) - 1)))]
                   for c in merged)


def pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.1%}" if value >= 0.001 or value == 0 else f"{value:.2e}"


def ranges_table(result: ProbeResult) -> Table:
    table = Table(title=f"ranges over {result.samples} sample(s) (percentiles within 0.4%)",
                  columns=["tensor", "op", "shape", "min", "p0.1", "p1", "p50", "p99", "p99.9", "max", "histogram"],
                  numeric=[False, False, False, True, True, True, True, True, True, True, False])
    for t in result.tensors:
        p = t.percentiles
        # moved: its node ran on another provider while exposed than as deployed (docs/providers.md)
        table.add(Cell(t.name + " [moved]", WARN) if t.moved else t.name, t.op_type, "x".join(map(str, t.shape)) or "scalar", fmt_value(t.min),
                  *[fmt_value(p.get(k)) for k in ("p0.1", "p1", "p50", "p99", "p99.9")], fmt_value(t.max),
                  sparkline(t.histogram))
    return table


def health_table(result: ProbeResult) -> Table:
    table = Table(title="health", columns=["tensor", "mean", "std", "abs max", "zero", "outliers >3σ", "NaN", "Inf",
                                           "dead channels", "all-zero samples"],
                  numeric=[False, True, True, True, True, True, True, True, True, True])
    for t in result.tensors:
        dead = "n/a" if t.channels is None else f"{len(t.channels.dead)}/{t.channels.channels}"
        table.add(t.name, fmt_value(t.mean), fmt_value(t.std), fmt_value(t.absmax), pct(t.zero_frac),
                  pct(t.outlier_ratio), Cell(str(t.nan), FAIL if t.nan else None),
                  Cell(str(t.inf), FAIL if t.inf else None),
                  Cell(dead, WARN if t.channels and t.channels.dead else None),
                  Cell(f"{t.zero_samples}/{t.samples}", WARN if t.zero_samples else None))
    return table


def quant_table(result: ProbeResult) -> Table:
    with_ref = any(q.reference for q in result.quant)
    columns = ["quantiser", "kind", "scale", "zp", "representable", "observed", "saturated",
               "int range used"] + (["reference observed", "reference saturated"] if with_ref else [])
    table = Table(title="quantisation ranges (saturated: values rounding outside the integer range)", columns=columns,
                  numeric=[False, False, True, True, False, False, True, True] + [False, True] * with_ref,
                  elide=[0])  # the quantiser's name: shortened by the fit, in full with --wide
    kinds = {"activation": "act", "weight": "weight", "qlinear-output": "qlinear out"}
    for q in result.quant:
        status = FAIL if q.flagged else OK
        kind = f"{kinds.get(q.source, q.source)} {q.qtype}" + (" relu" if q.clipped_low else "")
        row: List[Any] = [q.node, kind, f"{q.scale:.4g}", str(q.zero_point),
                          f"[{q.representable[0]:.4g}, {q.representable[1]:.4g}]",
                          f"[{q.observed[0]:.4g}, {q.observed[1]:.4g}]", Cell(pct(q.saturated_share), status),
                          pct(q.used_share)]
        if with_ref:
            ref = q.reference or {}
            observed = ref.get("observed")
            row += [f"[{observed[0]:.4g}, {observed[1]:.4g}]" if observed else "n/a",
                    Cell(pct(ref.get("saturated_share")), FAIL if ref.get("flagged") else MUTED if not ref else OK)]
        table.add(*row)
    return table


def plugin_tables(result: ProbeResult) -> List[Table]:
    tables = []
    for plugin in result.plugins:
        columns: List[str] = []
        for values in plugin.rows.values():
            columns.extend(c for c in values if c not in columns)
        table = Table(title=f"plugin {plugin.name}" + (f": {plugin.description}" if plugin.description else ""),
                      columns=["row", *columns], numeric=[False] + [True] * len(columns), elide=[0])
        for label, values in plugin.rows.items():
            table.add(label, *[_cell(values.get(c)) for c in columns])
        tables.append(table)
    return tables


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return fmt_value(value)
    return "" if value is None else str(value)


def per_sample_table(result: ProbeResult) -> Table:
    table = Table(title="per sample", columns=["sample", "tensor", "min", "max", "mean", "std", "abs max", "zero",
                                                "NaN", "Inf"], numeric=[False, False] + [True] * 8)
    for r in result.per_sample:
        table.add(r.sample, r.tensor, fmt_value(r.min), fmt_value(r.max), fmt_value(r.mean),
                  fmt_value(r.std), fmt_value(r.absmax), pct(r.zero_frac), str(r.nan), str(r.inf))
    return table


def since_table(result: ProbeResult) -> Optional[Table]:
    history = result.history
    if history is None or history.since is None:
        return None
    changes: Dict[str, Dict[str, Any]] = {}
    for change in history.changes:
        changes.setdefault(change.tensor, {})[change.stat] = change
    table = Table(title=f"change since run {history.since} ({history.since_created or '?'}): now (change)",
                  columns=["tensor", *SINCE_STATS], numeric=[False] + [True] * len(SINCE_STATS))
    for tensor, stats in changes.items():
        cells: List[Any] = [tensor]
        for stat in SINCE_STATS:
            c = stats.get(stat)
            if c is None:
                cells.append("n/a")
                continue
            text = fmt_value(c.now)
            if c.rel_change is not None and c.change:
                text += f" ({c.rel_change:+.1%})"
            elif c.change:
                text += f" ({c.change:+.3g})"
            big = c.rel_change is not None and abs(c.rel_change) >= 0.1
            cells.append(Cell(text, WARN if big else None))
        table.add(*cells)
    return table


def probe_view(result: ProbeResult) -> View:
    view = View(passed=result.passed, verdict=result.summary())
    if result.tensors:
        view.tables += [ranges_table(result), health_table(result)]
    if result.quant:
        view.tables.append(quant_table(result))
    view.tables += plugin_tables(result)
    if result.per_sample:
        view.tables.append(per_sample_table(result))
    since = since_table(result)
    if since is not None:
        view.tables.append(since)
    if result.placement is not None:
        from .placement_view import partition_notes, placement_tables

        view.tables.extend(placement_tables([result.placement], result.config.get("require_provider")))
        view.notes.extend(partition_notes([result.partition] if result.partition else [],
                                          "fewer tensors per run (--select PATTERN, --capture-budget SIZE)"))
    if result.trigger and result.trigger.dump:
        dump = result.trigger.dump
        skipped = f"; {len(dump.skipped)} left out by the {dump.max_bytes} byte cap" if dump.skipped else ""
        view.notes.append(f"dumped {len(dump.written)} tensor(s) to {dump.tensors_path}{skipped}"
                          + (f"; inputs in {dump.inputs_path}" if dump.inputs_path else ""))
    for finding in result.findings:
        prefix = {Severity.ERROR: "error", Severity.WARNING: "warning"}.get(finding.severity, "note")
        view.notes.append(f"{prefix}: {finding.message}" + (f" ({finding.hint})" if finding.hint else ""))
    view.notes.extend(f"warning: {w}" for w in result.warnings)
    if result.history and result.history.saved:
        view.notes.append(f"run {result.history.run_id} saved to history" + (
            f" ({result.history.pruned} older run(s) pruned)" if result.history.pruned else ""))
    return view


def tensor_list_view(result: TensorListResult) -> View:
    table = Table(title=f"{len(result.tensors)} selectable tensor(s)", columns=["tensor", "op", "node", "dtype", "shape"])
    for entry in result.tensors:
        table.add(entry.name, entry.op_type, entry.node, entry.dtype, entry.shape)
    return View(tables=[table])


def history_list_view(result: HistoryListResult) -> View:
    table = Table(title=f"probe runs in {result.directory}",
                  columns=["run", "date", "model", "sha256", "selection", "inputs", "samples", "tensors"],
                  numeric=[False] * 6 + [True, True])
    for run in result.runs:
        table.add(run.run_id, run.created, run.model, (run.model_sha256 or "")[:12], " ".join(run.selection),
                  run.inputs, str(run.samples), str(run.tensors))
    return View(tables=[table], notes=[] if result.runs else ["no stored runs"])


def stats_cells(t: TensorStats) -> Dict[str, str]:
    """The main statistics of a tensor as display strings (for other renderers, e.g. HTML)."""
    return {"min": fmt_value(t.min), "max": fmt_value(t.max), "mean": fmt_value(t.mean), "std": fmt_value(t.std),
            **{k: fmt_value(v) for k, v in t.percentiles.items()}, "histogram": sparkline(t.histogram)}
