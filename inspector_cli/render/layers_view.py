"""Tables of the layer section of a `CompareResult`: the layer table, pairing, worst layers, structure."""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional, Sequence

from ..results.layers import LayerDiff, LayerSection
from ..results.remedy import QuantStepRow
from .table import FAIL, MUTED, OK, WARN, Cell, Table, fmt_value


def _shape(shape: List[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "?"


def _short(ops: str) -> str:
    """Op chains as people write them: Conv+BN+Relu."""
    return ops.replace("BatchNormalization", "BN").replace("GlobalAveragePool", "GlobalAvgPool")


def _share(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


# (header, numeric, extra): extra columns show in the terminal only with --wide or --columns.
LAYER_COLUMNS = [("#", True, False), ("tensor", False, False), ("op", False, False), ("shape", False, True),
                 ("cosine", True, False), ("SQNR dB", True, False), ("max abs", True, False),
                 ("mean abs", True, True), ("max rel", True, True), ("max rel sig", True, True),
                 ("NaN/Inf", True, True),
                 ("paired", False, False), ("note", False, False)]
ISOLATED_COLUMNS = [("isolated cos", True, True), ("own share", True, True), ("error", False, True)]
NOISE_COLUMNS = [("Q/DQ SQNR", True, True)]
STEP_COLUMNS = [("q steps max/mean", True, True)]  # error in units of the quantisation scale (issue 18)
WORST_MARKED = 3  # "worst N" marks the N worst layers by cosine


def layer_table(section: LayerSection, steps: Sequence[QuantStepRow] = ()) -> Table:
    """The layer table: by default #, tensor, op, cosine, SQNR, max abs, paired and a note column;
    `steps` (a layer's error in quantisation steps) adds the column `q steps max/mean`."""
    isolated = any(r.isolated is not None for r in section.layers)
    noise = any(r.qdq_noise is not None for r in section.layers)
    by_layer: Dict[str, QuantStepRow] = {s.layer: s for s in steps}
    spec = LAYER_COLUMNS + ISOLATED_COLUMNS * isolated + NOISE_COLUMNS * noise + STEP_COLUMNS * bool(by_layer)
    thresholds = ", ".join(f"{t.metric} {t.op} {t.threshold:g}" + (f" on {t.target}" if t.target else "")
                           for t in section.thresholds)
    source = section.thresholds[0].source if section.thresholds else "user"
    table = Table(title=f"layers in the reference's order ({len(section.layers)} compared; layer thresholds: "
                        f"{thresholds or 'none'}{' (default)' if source == 'default' else ''})",
                  columns=[c[0] for c in spec], numeric=[c[1] for c in spec], extra=[c[2] for c in spec],
                  elide=[1, 2])
    for row in section.layers:
        cells = _row(row, section, isolated, noise)
        if by_layer:
            cells.append(_steps_cell(by_layer.get(row.name)))
        table.rows.append(cells)
    notes = []
    if section.first_divergence:
        notes.append(f"first divergence: '{section.first_divergence}' "
                     f"({', '.join(section.first_divergence_metrics)} crosses its threshold)")
    notes.append("note: first = first divergence, worst N = Nth worst cosine; own / inherited / mixed = "
                 "the layer's error is its own / comes from upstream / both (--isolate)")
    excused = sum(1 for r in section.layers if r.excused_gates)
    if excused:
        notes.append(f"negligible = {excused} layer(s) crossing a threshold with max |b - a| <= {section.atol:g} "
                     "(--layer-atol): rounding noise of tensors near zero, not divergence")
    recomputed = sum(1 for r in section.layers if r.recomputed)
    if recomputed:
        notes.append(f"recomputed A/B = {recomputed} layer(s) fused away in that model's deployed graph (onnxruntime "
                     "kernels such as Gelu, SkipLayerNormalization): read from the original ops rerun unfused on "
                     "the deployed graph's tensors, so those ops' numbers are reference arithmetic")
    moved = sum(1 for r in section.layers if r.moved)
    if moved:
        notes.append(f"moved A/B = {moved} layer(s) whose node ran on another execution provider with tensors "
                     "exposed than in the plain session (see the partition line below)")
    table.caption = "; ".join(notes)
    return table


def _steps_cell(step: Optional[QuantStepRow]) -> Cell:
    if step is None or step.max_steps is None:
        return Cell("")
    mean = "?" if step.mean_steps is None else f"{step.mean_steps:.2f}"
    return Cell(f"{step.max_steps:.2f}/{mean}", FAIL if step.flagged else WARN if step.max_steps > 4 else None)


def _marks(row: LayerDiff, section: LayerSection) -> List[str]:
    marks = []
    if row.name == section.first_divergence:
        marks.append("first")
    if row.excused_gates:  # a low cosine that is rounding noise: say why it is not red
        marks.append("negligible")
    worst = section.worst.get("cosine", [])[:WORST_MARKED]
    if row.name in worst:
        marks.append(f"worst {worst.index(row.name) + 1}")
    if row.error_source:
        marks.append(row.error_source)
    recomputed = [m for m, c in (("A", row.capture_a), ("B", row.capture_b)) if c == "recomputed"]
    if recomputed:
        marks.append(f"recomputed {'+'.join(recomputed)}")
    if row.moved:  # its node ran on another provider with tensors exposed than as deployed
        marks.append(f"moved {'+'.join(row.moved)}")
    return marks


def _row(row: LayerDiff, section: LayerSection, isolated: bool, noise: bool) -> List[Cell]:
    failed = set(row.failed_gates)
    first = row.name == section.first_divergence

    def metric(name: str) -> Cell:
        # a negligible layer's scale-free metrics compare noise with noise: shown, but muted
        status = FAIL if name in failed else MUTED if row.excused_gates and name not in ("max_abs", "mean_abs") else None
        return Cell(fmt_value(row.dataset.get(name), name), status)

    nonfinite = ", ".join(f"{k}={v}" for k, v in row.nonfinite.items()) or "0"
    # The confidence only when it is not certain: the column stays narrow on the usual rows.
    paired = row.method if row.confidence >= 0.995 else f"{row.method} {row.confidence:.2f}"
    marks = _marks(row, section)
    mark_status = FAIL if first or row.error_source == "own" else MUTED if marks == ["negligible"] else \
        WARN if marks else None
    cells = [Cell(str(row.index)), Cell(row.name, FAIL if first else None), Cell(_short(row.op_a)),
             Cell(_shape(row.shape_a)), metric("cosine"), metric("sqnr"), metric("max_abs"), metric("mean_abs"),
             metric("max_rel"), metric("max_rel_sig"), Cell(nonfinite, FAIL if row.nonfinite.get("mismatch") else None),
             Cell(paired, WARN if row.confidence < 0.9 else MUTED), Cell(",".join(marks), mark_status)]
    if isolated:
        iso = row.isolated or {}
        status = {"own": FAIL, "inherited": OK, "mixed": WARN}.get(row.error_source or "", MUTED)
        cells += [Cell(fmt_value(iso.get("cosine"), "cosine") if row.isolated else ""), Cell(_share(row.own_share)),
                  Cell(row.error_source or "", status)]
    if noise:
        cells.append(Cell(fmt_value(row.qdq_noise.get("sqnr"), "sqnr") if row.qdq_noise else ""))
    return cells


def pairing_table(section: LayerSection) -> Table:
    table = Table(title="pairing of the two graphs", columns=["what", "count", "detail"], numeric=[False, True, False])
    for method, count in sorted(section.pairing.items(), key=lambda kv: -kv[1]):
        table.add(f"paired by {method}", count, "")
    for reason, count in section.skipped.items():
        table.add("not compared", count, reason)
    for side, items in (("reference", section.unpaired_a), ("candidate", section.unpaired_b)):
        # Tensors inside a chain the other side fused are expected: one row for all of them.
        fused = [u for u in items if u.reason.startswith("fused into")]
        if fused:
            chains = len({u.reason.split(":")[0] for u in fused})
            table.add(Cell(f"inside fused chains ({side})", MUTED), len(fused),
                      f"{chains} chain(s) fused on the other side, e.g. {fused[0].reason}")
        reasons = Counter(u.reason for u in items if not u.reason.startswith("fused into"))
        for reason, count in reasons.most_common():
            examples = [u.tensor for u in items if u.reason == reason][:2]
            table.add(Cell(f"unpaired in {side}", WARN), count, f"{reason}: {', '.join(examples)}")
    return table


def worst_table(section: LayerSection) -> Table:
    table = Table(title="worst layers per metric", columns=["metric", "layers, worst first"], numeric=[False, False])
    # Names joined with ", " wrap between names, never inside one.
    for metric, names in section.worst.items():
        if names:
            table.add(metric, ", ".join(names))
    return table


def structure_table(section: LayerSection) -> Optional[Table]:
    s = section.structure
    if s is None:
        return None
    table = Table(title="structure (A vs B)", columns=["", "A", "B"], numeric=[False, True, True])
    table.add("nodes", s.nodes[0], s.nodes[1])
    table.add("Q/DQ pairs", s.qdq_pairs[0], s.qdq_pairs[1])
    table.add("QOperator ops", s.quantized_ops[0], s.quantized_ops[1])
    table.add("stored tensor bytes", s.initializer_bytes[0], s.initializer_bytes[1])
    for op, (na, nb) in s.op_counts.items():
        if na != nb and op not in ("QuantizeLinear", "DequantizeLinear"):
            table.add(Cell(f"op {op}", WARN if not (na and nb) else None), na, nb)
    for sig in s.signature:
        table.add(Cell(f"{sig['kind']} {sig['name']}", WARN), sig["a"], sig["b"])
    return table


def capture_notes(section: LayerSection) -> List[str]:
    c = section.capture
    recomputed = {m: sum(1 for r in section.layers if getattr(r, f"capture_{m}") == "recomputed") for m in "ab"}
    mode = {m: f"{getattr(c, f'capture_{m}')}{f' ({recomputed[m]} recomputed)' if recomputed[m] else ''}" for m in "ab"}
    notes = [f"capture: {c.strategy} in {c.chunks} chunk(s), {c.runs} onnxruntime run(s); model A {mode['a']}, "
             f"model B {mode['b']}; about {c.estimated_bytes / 2**20:.1f} MiB per sample "
             f"(budget {c.budget_bytes / 2**20:.0f} MiB)"]
    notes += [f"warning: {n}" for n in c.notes if n.startswith("memory budget")]  # core.capture.budget_note
    if c.isolation_runs:
        notes.append(f"isolation: {c.isolation_runs} run(s); {len((section.isolation or {}).get('isolated', []))} "
                     "layer(s) isolated")
    skipped = (section.isolation or {}).get("skipped", {})
    for reason in sorted(set(skipped.values())):
        names = [name for name, why in skipped.items() if why == reason]
        notes.append(f"warning: not isolated ({reason}): {', '.join(names)}")
    for check in section.observer:
        state = "identical" if check.identical else f"max |diff| {check.max_abs:.3g}, cosine {check.cosine:.9f}"
        notes.append(f"observer check, model {check.model} ({check.capture}) output '{check.output}': {state}")
    return notes


def layer_tables(section: LayerSection, steps: Sequence[QuantStepRow] = ()) -> List[Table]:
    tables = [layer_table(section, steps), pairing_table(section), worst_table(section)]
    structure = structure_table(section)
    if structure is not None:
        tables.append(structure)
    return tables



