"""Tables of the layer section of a `CompareResult`: the layer table, pairing, worst layers, structure."""
from __future__ import annotations

from collections import Counter
from typing import List, Optional

from ..results.layers import LayerDiff, LayerSection
from .table import FAIL, MUTED, OK, WARN, Cell, Table, fmt_value




def _shape(shape: List[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "?"


def _short(ops: str) -> str:
    """Op chains as people write them: Conv+BN+Relu."""
    return ops.replace("BatchNormalization", "BN").replace("GlobalAveragePool", "GlobalAvgPool")


def _share(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def layer_table(section: LayerSection) -> Table:
    isolated = any(r.isolated is not None for r in section.layers)
    noise = any(r.qdq_noise is not None for r in section.layers)
    columns = ["#", "tensor", "op", "shape", "cosine", "max abs", "mean abs", "max rel", "SQNR dB", "NaN/Inf",
               "paired"]
    if isolated:
        columns += ["isolated cos", "own share", "error"]
    if noise:
        columns += ["Q/DQ SQNR"]
    numeric = [True, False, False, False, True, True, True, True, True, True, False] + [True, True, False][: 3 * isolated]
    numeric += [True] * noise
    thresholds = ", ".join(f"{t.metric} {t.op} {t.threshold:g}" + (f" on {t.target}" if t.target else "")
                           for t in section.thresholds)
    source = section.thresholds[0].source if section.thresholds else "user"
    table = Table(title=f"layers in the reference's order ({len(section.layers)} compared; layer thresholds: "
                        f"{thresholds or 'none'}{' (default)' if source == 'default' else ''})",
                  columns=columns, numeric=numeric)
    for row in section.layers:
        table.rows.append(_row(row, section, isolated, noise))
    if section.first_divergence:
        table.caption = (f"first divergence: '{section.first_divergence}' "
                         f"({', '.join(section.first_divergence_metrics)} crosses its threshold)")
    return table


def _row(row: LayerDiff, section: LayerSection, isolated: bool, noise: bool) -> List[Cell]:
    failed = set(row.failed_gates)
    first = row.name == section.first_divergence

    def metric(name: str) -> Cell:
        status = FAIL if name in failed else None
        return Cell(fmt_value(row.dataset.get(name), name), status)

    name = row.name + ("  <- first divergence" if first else "")
    nonfinite = ", ".join(f"{k}={v}" for k, v in row.nonfinite.items()) or "0"
    paired = f"{row.method} {row.confidence:.2f}"
    cells = [Cell(str(row.index)), Cell(name, FAIL if first else None), Cell(_short(row.op_a)), Cell(_shape(row.shape_a)),
             metric("cosine"), metric("max_abs"), metric("mean_abs"), metric("max_rel"), metric("sqnr"),
             Cell(nonfinite, FAIL if row.nonfinite.get("mismatch") else None),
             Cell(paired, WARN if row.confidence < 0.9 else MUTED)]
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
    notes = [f"capture: {c.strategy} in {c.chunks} chunk(s), {c.runs} onnxruntime run(s); model A {c.capture_a}, "
             f"model B {c.capture_b}; about {c.estimated_bytes / 2**20:.1f} MiB per sample "
             f"(budget {c.budget_bytes / 2**20:.0f} MiB)"]
    if c.isolation_runs:
        notes.append(f"isolation: {c.isolation_runs} run(s); {len((section.isolation or {}).get('isolated', []))} "
                     "layer(s) isolated")
    for check in section.observer:
        state = "identical" if check.identical else f"max |diff| {check.max_abs:.3g}, cosine {check.cosine:.9f}"
        notes.append(f"observer check, model {check.model} ({check.capture}) output '{check.output}': {state}")
    return notes


def layer_tables(section: LayerSection) -> List[Table]:
    tables = [layer_table(section), pairing_table(section), worst_table(section)]
    structure = structure_table(section)
    if structure is not None:
        tables.append(structure)
    return tables



