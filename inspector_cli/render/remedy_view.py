"""Tables of the remedy section of a compare result: fallback plan steps, per-channel advice,
optimiser bisection, accuracy against labels (HTML and text draw the same View)."""
from __future__ import annotations

from typing import List, Optional

from ..results.remedy import RemedySection, metric_text
from .safe import visible
from .table import FAIL, OK, Cell, Table


def _num(value: Optional[float], digits: int = 6) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def remedy_tables(section: Optional[RemedySection]) -> List[Table]:
    """The remedy tables, in the order a user reads them: accuracy, optimiser pass, fallback plan."""
    if section is None:
        return []
    tables: List[Table] = []
    if section.quant_steps:
        worst = sorted(section.quant_steps, key=lambda r: -(r.max_steps or 0.0))
        shown = [r for r in worst if r.flagged] or worst[:5]
        table = Table(title="error in quantisation steps (|b - a| / scale)",
                      columns=["layer", "scale", "max steps", "mean steps", "own cosine"],
                      numeric=[False, True, True, True, True])
        for r in shown[:20]:
            table.add(visible(r.layer), f"{r.scale:.4g}", Cell(_num(r.max_steps, 4), FAIL if r.flagged else None),
                      _num(r.mean_steps, 4), _num(r.isolated_cosine))
        table.caption = (f"{len(section.quant_steps)} layer(s) paired through a quantiser (all in the JSON); "
                         "0.5 is rounding, 1 an off-by-one, tens a saturating or wrong scale")
        tables.append(table)
    if section.simulated:
        table = Table(title="simulated (QDQ arithmetic, opt level disable) vs deployed",
                      columns=["tensor", "cosine simulated", "cosine deployed", "max abs simulated", "max abs deployed"],
                      numeric=[False, True, True, True, True])
        for r in section.simulated[:20]:
            gap = (r.cosine_deployed is not None and r.cosine_simulated is not None
                   and 1 - r.cosine_deployed > 2 * (1 - r.cosine_simulated) + 1e-3)
            table.add(visible(r.layer), _num(r.cosine_simulated), Cell(_num(r.cosine_deployed), FAIL if gap else None),
                      _num(r.max_abs_simulated), _num(r.max_abs_deployed))
        tables.append(table)
    if section.accuracy:
        table = Table(title=f"accuracy against {visible(section.labels or 'labels')}",
                      columns=["output", "k", "samples", "A", "B", "drop", "drop 95% CI", "A right, B wrong",
                               "A wrong, B right"])
        for row in section.accuracy:
            flips = ", ".join(visible(s) for s in row.a_right_b_wrong[:5]) + (" ..." if len(row.a_right_b_wrong) > 5 else "")
            back = ", ".join(visible(s) for s in row.a_wrong_b_right[:5]) + (" ..." if len(row.a_wrong_b_right) > 5 else "")
            table.add(visible(row.output), f"top-{row.k}", row.samples, f"{row.accuracy_a:.2%}",
                      Cell(f"{row.accuracy_b:.2%}", FAIL if row.failed_gates else None),
                      Cell(f"{row.drop * 100:+.2f} pts", FAIL if row.failed_gates else None),
                      f"[{row.drop_ci95[0] * 100:+.2f}, {row.drop_ci95[1] * 100:+.2f}]",
                      f"{len(row.a_right_b_wrong)} {flips}".strip(), f"{len(row.a_wrong_b_right)} {back}".strip())
        if section.label_notes:
            table.caption = "; ".join(visible(n) for n in section.label_notes)
        tables.append(table)
    opt = section.optimizers
    if opt is not None:
        table = Table(title="optimiser bisection", columns=["transformer", "nodes rewritten"])
        for name, nodes in opt.rewritten_nodes.items():
            table.add(Cell(visible(name), FAIL), ", ".join(visible(n) for n in nodes[:12]) +
                      (f" (+{len(nodes) - 12})" if len(nodes) > 12 else ""))
        if not opt.rewritten_nodes:
            table.add(", ".join(opt.culprits) or "-", "")
        table.caption = (f"{opt.verdict}; max |diff| {_num(opt.max_abs_diff)}; {len(opt.applied)} transformer(s) "
                         f"applied; {opt.session_builds} session builds")
        tables.append(table)
    plan = section.fallback
    if plan is not None:
        kind = "fp32 block list (fp16)" if plan.mode == "fp16" else "fallback plan (nodes kept in float)"
        # fp16: the targets' metrics and the samples that still overflow; its steps start with the plain
        # conversion (the baseline row of a QDQ plan)
        fp16 = plan.mode == "fp16"
        metrics = [*plan.targets, *(["nonfinite_samples"] if fp16 else [])]
        table = Table(title=kind, columns=["step", "node", "float nodes", *plan.targets,
                                           *(["samples with NaN/Inf"] if fp16 else []), "meets", "latency ms"])
        if plan.baseline and not fp16:
            meets = plan.baseline_meets if plan.baseline_meets is not None else not plan.steps and plan.found
            table.add("baseline", "", 0, *[metric_text(plan.baseline.get(t)) for t in plan.targets],
                      Cell("yes" if meets else "no", OK if meets else None), "")
        for i, step in enumerate(plan.steps, start=1):
            table.add(f"{i} {step.action}", visible(step.node), len(step.float_nodes),
                      *[metric_text(step.metrics.get(t)) for t in metrics],
                      Cell("yes" if step.meets else "no", OK if step.meets else None),
                      f"{step.latency_ms:.2f}" if step.latency_ms else "")
        verdict = "found" if plan.found else "NOT found (best shown)"
        table.caption = (f"plan {verdict}: {', '.join(visible(n) for n in plan.fp32_nodes) or '(none)'}; "
                         f"{plan.runs} full-model runs, {plan.seconds:.1f} s")
        if plan.final_latency_ms:
            table.caption += f"; latency {plan.baseline_latency_ms:.2f} -> {plan.final_latency_ms:.2f} ms"
        if plan.written_model:
            state = "meets" if plan.recheck_meets else "MISSES"
            table.caption += (f"; wrote {visible(plan.written_model)} (re-checked: {state} the targets: "
                              + ", ".join(f"{k} {metric_text(v)}" for k, v in plan.recheck.items()) + ")")
        if plan.exclude_list:
            table.caption += f"; node list in {visible(plan.exclude_list)}"
        if plan.skipped:
            name, reason = next(iter(plan.skipped.items()))
            table.caption += (f"; {len(plan.skipped)} skipped (JSON 'skipped'), e.g. {visible(name)}: "
                              f"{visible(reason[:160])}")
        if plan.ranking == "isolated":
            table.caption += (f"; candidates ranked by their own (isolated) error and its growth: {plan.isolated_layers} "
                              f"layer(s) isolated in {plan.isolation_seconds:.1f} s")
        elif plan.ranking_note:
            table.caption += f"; {visible(plan.ranking_note)}"
        tables.append(table)
        advice = [a for a in plan.weight_advice if a.advise_per_channel or a.per_channel_enough is not None]
        if advice:
            table = Table(title="per-channel advice (weight SQNR dB)",
                          columns=["node", "weight", "deployed", "per-tensor", "per-channel", "per-channel enough"],
                          numeric=[False, False, True, True, True, False])
            for a in advice:
                enough = "n/a" if a.per_channel_enough is None else ("yes" if a.per_channel_enough else "no")
                table.add(visible(a.node), visible(a.weight), f"{a.sqnr_deployed:.1f}", f"{a.sqnr_per_tensor:.1f}",
                          Cell(f"{a.sqnr_per_channel:.1f}", OK if a.advise_per_channel else None), enough)
            tables.append(table)
    return tables
