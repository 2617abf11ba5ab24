"""Tables of a `ProfileResult`: latency summary, top kernels, op types, critical path, memory, hints,
and with `--against` both models side by side."""
from __future__ import annotations

from typing import List, Optional, Sequence

from ..results.base import Severity
from ..results.profile import KernelStat, ModelProfile, ProfileComparison, ProfileResult
from .grouping import first_names, group_by
from .numbers import fmt_bytes, fmt_count, fmt_num, fmt_us  # noqa: F401 (re-exported)
from .placement_view import placement_table
from .table import FAIL, MUTED, OK, WARN, Cell, Table, View


def _names(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit})" if len(names) > limit else "")


def summary_rows(p: ModelProfile) -> List[List[str]]:
    """(measure, value) rows of one model's summary; the same labels for both models of a comparison."""
    e, c, m = p.e2e, p.critical_path, p.memory
    fused = sum(1 for g in p.groups if g.kind == "fused")
    folded = sum(len(g.original_nodes) for g in p.groups if g.kind == "folded")
    return [
        ["end-to-end p50 / p90 / p99", f"{fmt_us(e.p50_us)} / {fmt_us(e.p90_us)} / {fmt_us(e.p99_us)}"],
        ["end-to-end mean ± std (min)", f"{fmt_us(e.mean_us)} ± {fmt_us(e.std_us)} ({fmt_us(e.min_us)})"],
        ["profiled run p50 (profiler overhead)", f"{fmt_us(p.profiled.p50_us)} ({p.overhead:+.0%})"],
        ["summed kernel time per run", fmt_us(p.kernel_sum_us)],
        ["critical path (share of sum)",
         f"{fmt_us(c.length_us)} ({c.length_us / c.sum_us:.0%}) over {len(c.steps)} nodes" if c.sum_us else "n/a"],
        ["parallelism bound (sum / path)", f"{c.parallelism:.2f}x"],
        ["FLOPs per run (achieved at p50)",
         f"{fmt_count(p.flops)} ({fmt_count(p.flops / (e.p50_us * 1e-6)) if p.flops and e.p50_us else 'n/a'}FLOP/s)"],
        ["nodes: original / kernels run", f"{p.original_nodes} / {len(p.kernels)} ({fused} fused groups, "
                                         f"{folded} nodes folded away)"],
        ["peak live activations", f"{fmt_bytes(m.peak_bytes)} at '{m.peak_node}'"],
        ["onnxruntime arena peak", fmt_bytes(m.arena_peak_bytes)],
        ["parameters", f"{fmt_count(m.parameter_count)} ({fmt_bytes(m.parameter_bytes)})"],
    ]


def kernel_table(p: ModelProfile, top: int, title: str) -> Table:
    """The `top` kernels by share of the run, with the original nodes they execute."""
    table = Table(title=title, columns=["#", "kernel", "op", "provider", "mean", "p50", "p90", "min", "share",
                                        "GFLOP/s", "FLOP/B", "original nodes"],
                  numeric=[True, False, False, False, True, True, True, True, True, True, True, False],
                  extra=[False] * 6 + [True, True, False, False, True, True])  # p90, min, FLOP/B, nodes: --wide
    kinds = {g.id: g for g in p.groups}
    for rank, k in enumerate(p.kernels[:top], start=1):
        table.add(str(rank), k.name, k.op_type, k.provider.replace("ExecutionProvider", ""), fmt_us(k.mean_us),
                  fmt_us(k.p50_us), fmt_us(k.p90_us), fmt_us(k.min_us), f"{k.share:.1%}",
                  Cell(fmt_num(k.gflops_per_s), WARN if k.slow_ratio else None), fmt_num(k.intensity, 1),
                  _origin(k, kinds))
    table.caption = f"{len(p.kernels)} kernels; times per run over {p.e2e.runs} profiled runs"
    return table


def _origin(k: KernelStat, groups: dict) -> Cell:
    group = groups.get(k.group)
    if group is None:
        return Cell("")
    if group.kind == "fused":
        if k.original_nodes:
            return Cell(f"fused: {_names(k.original_nodes)}")
        return Cell(f"helper of {_names(group.original_nodes, 2)}", MUTED)
    if group.kind == "replaced":
        return Cell(f"was {group.original_ops[0]} '{group.original_nodes[0]}'")
    return Cell(group.kind, MUTED)


def op_type_table(p: ModelProfile) -> Table:
    """Time by op type (and providers in the caption when not only the CPU)."""
    table = Table(title="time by op type", columns=["op type", "kernels", "total", "share", "mean per kernel",
                                                    "GFLOP/s"], numeric=[False, True, True, True, True, True])
    for row in p.op_types:
        table.add(row.op_type, str(row.count), fmt_us(row.total_us), f"{row.share:.1%}", fmt_us(row.mean_us),
                  fmt_num(row.gflops_per_s))
    if len(p.providers) > 1 or (p.providers and p.providers[0].provider != "CPUExecutionProvider"):
        table.caption = "providers: " + ", ".join(f"{r.provider} {r.share:.1%} ({r.count})" for r in p.providers)
    return table


def groups_table(p: ModelProfile, top: int) -> Optional[Table]:
    """The most expensive fused or replaced groups: original nodes -> kernels."""
    shown = sorted((g for g in p.groups if g.kind in ("fused", "replaced")), key=lambda g: -g.per_run_us)[:top]
    if not shown:
        return None
    table = Table(title="fused groups (original nodes -> kernels onnxruntime ran)",
                  columns=["time", "original", "ops", "kernels"], numeric=[True, True, False, False])
    for g in shown:
        ops = sorted(set(g.original_ops), key=g.original_ops.index)
        table.add(fmt_us(g.per_run_us), str(len(g.original_nodes)), _names(ops, 6), _names(g.kernels, 3))
    return table


def critical_table(p: ModelProfile, top: int) -> Table:
    """The heaviest steps of the critical path, its length against the sum and the end-to-end p50."""
    c = p.critical_path
    table = Table(title="critical path: heaviest steps", columns=["node", "op", "time", "kernel"],
                  numeric=[False, False, True, False])
    for step in sorted(c.steps, key=lambda s: -s.weight_us)[:top]:
        table.add(step.node, step.op_type, fmt_us(step.weight_us), step.kernel or "")
    table.caption = (f"path {fmt_us(c.length_us)} over {len(c.steps)} nodes; all nodes {fmt_us(c.sum_us)} (profiled); "
                     f"end-to-end p50 {fmt_us(c.e2e_p50_us)} without the profiler")
    return table


def memory_tables(p: ModelProfile, top: int) -> List[Table]:
    """Tensors live at the activation peak, and onnxruntime's per-node memory when collected."""
    m = p.memory
    live = Table(title=f"live at the activation peak ({fmt_bytes(m.peak_bytes)} after '{m.peak_node}')",
                 columns=["tensor", "size", "shape", "producer"], numeric=[False, True, False, False])
    for t in m.live_at_peak[:top]:
        live.add(t.name, fmt_bytes(t.bytes), t.shape, t.producer)
    live.caption = (f"all activations {fmt_bytes(m.activation_bytes)} without reuse"
                    + (f"; {m.unknown_tensors} tensors of unknown size" if m.unknown_tensors else ""))
    tables = [live]
    if m.node_stats:
        ort = Table(title="onnxruntime node memory (one run)", columns=["node", "outputs", "temp", "inputs"],
                    numeric=[False, True, True, True])
        for row in m.node_stats[:top]:
            ort.add(row.node, fmt_bytes(row.dynamic_output_bytes), fmt_bytes(row.temp_bytes), fmt_bytes(row.input_bytes))
        tables.append(ort)
    return tables


def hints_table(p: ModelProfile, title: str = "hints") -> Optional[Table]:
    """Performance patterns with the time of the kernels doing their nodes: one row per pattern.

    Matches of one pattern that runtime handles alike (18 Identity nodes) are one row with their
    count, the time and share they add up to, and the first few nodes (the JSON lists each match).
    """
    if not p.hints:
        return None
    table = Table(title=title, columns=["pattern", "count", "time", "share", "fused by ORT", "nodes"],
                  numeric=[False, True, True, True, False, False])
    groups = group_by(p.hints, lambda h: (h.pattern, h.fused_by_runtime))
    groups.sort(key=lambda g: (-sum(h.time_us for h in g.items), str(g.key)))
    for g in groups:
        first = g.items[0]
        nodes = [h.nodes[0] if len(g.items) > 1 and h.nodes else _names(h.nodes) for h in g.items]
        table.add(first.pattern, g.count, fmt_us(sum(h.time_us for h in g.items)),
                  f"{sum(h.share for h in g.items):.1%}",
                  Cell("yes", OK) if first.fused_by_runtime else Cell("no", WARN), first_names(nodes))
    return table


def comparison_tables(c: ProfileComparison, top: int) -> List[Table]:
    """`--against`: op types by base op with speed-ups, then units that got slower and faster in B."""
    ops = Table(title="op types (base op: QLinearConv counts as Conv)", columns=["op type", "A", "B", "speed-up",
                                                                                  "kernels A/B"],
                numeric=[False, True, True, True, True])
    for d in c.op_types[:top * 2]:
        status = None if d.speedup is None else (FAIL if d.speedup < 0.9 else OK if d.speedup > 1.1 else None)
        ops.add(d.op_type, fmt_us(d.a_us), fmt_us(d.b_us), Cell(f"{d.speedup:.2f}x" if d.speedup else "-", status),
                f"{d.a_count}/{d.b_count}")
    tables = [ops]
    for rows, title, status in ((c.slower, "slower in B", FAIL), (c.faster, "faster in B", OK)):
        if not rows:
            continue
        t = Table(title=title, columns=["original node(s)", "A p50", "B p50", "speed-up", "B kernels"],
                  numeric=[False, True, True, True, False])
        for d in rows[:top]:
            t.add(d.label, fmt_us(d.a_us), fmt_us(d.b_us), Cell(f"{d.speedup:.2f}x", status), _names(d.b_kernels, 2))
        tables.append(t)
    tables[-1].caption = (f"{c.matched_units} units matched by original node names; unmatched A {fmt_us(c.unmatched_a_us)}, "
                          f"B {fmt_us(c.unmatched_b_us)}")
    return tables


def rollup_table(p: ModelProfile, top: int, title: str) -> Table:
    """Kernel time by scope, largest first (the `--group-by scope` table)."""
    depth = "leaf scopes" if p.group_depth is None else f"depth {p.group_depth}"
    table = Table(title=f"{title} ({depth})", columns=["scope", "time/run", "share", "kernels", "FLOPs", "GFLOP/s"],
                  numeric=[False, True, True, True, True, True])
    for row in p.scope_rollup[:top]:
        v = row.values
        share = v.get("share")
        table.add(row.scope or "(model)", fmt_us(v.get("time_us")), "n/a" if share is None else f"{share:.1%}",
                  fmt_count(v.get("kernels")), fmt_count(v.get("flops")), fmt_num(v.get("gflops_per_s")))
    if len(p.scope_rollup) > top:
        table.caption = f"{len(p.scope_rollup) - top} more scopes in the JSON"
    return table


def profile_view(result: ProfileResult, top: int = 15) -> View:
    """Everything `mi profile` prints: one model's tables, or two models side by side."""
    view = View(passed=result.passed, verdict=result.summary())
    profiles = result.profiles
    if result.group_by:
        for p in profiles:
            view.tables.append(rollup_table(p, top, f"time by scope of {p.model}"))
    if len(profiles) == 1:
        p = profiles[0]
        summary = Table(title=f"profile of {p.model}", columns=["measure", "value"], numeric=[False, False])
        for row in summary_rows(p):
            summary.add(*row)
        view.tables.extend([summary, kernel_table(p, top, "top kernels"), op_type_table(p)])
        extra = [placement_table(p.placement), groups_table(p, top), critical_table(p, top), *memory_tables(p, top),
                 hints_table(p)]
        view.tables.extend(t for t in extra if t is not None)
    else:
        a, b = profiles[0], profiles[1]
        summary = Table(title="A vs B", columns=["measure", "A", "B"], numeric=[False, True, True])
        for (label, va), (_, vb) in zip(summary_rows(a), summary_rows(b)):
            summary.add(label, va, vb)
        c = result.comparison
        if c is not None:
            summary.caption = (f"end-to-end speed-up p50 {c.e2e_speedup:.2f}x (95% CI {c.ci_low:.2f}-{c.ci_high:.2f}), "
                               f"mean {c.mean_speedup:.2f}x; A = {a.model}, B = {b.model}")
        view.tables.append(summary)
        if c is not None:
            view.tables.extend(comparison_tables(c, top))
        view.tables.extend([kernel_table(a, top, "top kernels of A"), kernel_table(b, top, "top kernels of B")])
        view.tables.extend(t for t in (placement_table(a.placement, "placement of A"),
                                       placement_table(b.placement, "placement of B")) if t is not None)
        for p, label in ((a, "A"), (b, "B")):
            hints = hints_table(p, f"hints for {label}")
            if hints is not None:
                view.tables.append(hints)
    for gate in result.gates:
        view.notes.append(("" if gate.passed else "error: ") + gate.message())
    for finding in result.findings:
        prefix = "error" if finding.severity == Severity.ERROR else finding.severity.value
        view.notes.append(f"{prefix}: {finding.message}")
    for i, p in enumerate(profiles):
        label = "" if len(profiles) == 1 else ("A: " if i == 0 else "B: ")
        view.notes.extend(f"note: {label}{n}" for n in p.notes)
    view.notes.extend(f"warning: {w}" for w in result.warnings)
    return view
