"""Tables of an `InspectResult`: the model, its scope tree to --depth, matches of --find/--node, the diff."""
from __future__ import annotations

from typing import List, Optional

from ..results.inspect import InspectResult, NodeFacts, ParamSummary, QuantFact
from ..results.scopes import ScopeInfo
from .numbers import fmt_bytes, fmt_count
from .table import FAIL, MUTED, OK, WARN, Cell, Table, View


def main_ops(ops: dict, limit: int = 3) -> str:
    """The most frequent ops of a scope: 'MatMul x4, Add x4, Softmax'."""
    items = list(ops.items())[:limit]
    text = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in items)
    return text + (f" (+{len(ops) - limit})" if len(ops) > limit else "")


SIBLINGS_SHOWN = 8


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def tree_rows(scopes: List[ScopeInfo], depth: int, limit: int = SIBLINGS_SHOWN) -> List[object]:
    """Scopes down to `depth`, in tree order; after `limit` siblings, one 'N more' line (an int)."""
    rows: List[object] = []
    shown: dict = {}
    hidden: dict = {}
    skipped: set = set()
    for scope in scopes:
        if scope.depth > depth or not scope.depth and rows:
            continue
        parent = _parent(scope.path) if scope.depth else None
        if parent in skipped:
            skipped.add(scope.path)
            continue
        if parent is not None:
            shown[parent] = shown.get(parent, 0) + 1
            if shown[parent] > limit:
                skipped.add(scope.path)
                hidden[parent] = hidden.get(parent, 0) + 1
                continue
        rows.append(scope)
    # each 'N more' line goes after the last shown row of its parent's subtree
    def inside(row: ScopeInfo, parent: str) -> bool:
        return not parent or row.path == parent or row.path.startswith(parent + "/")

    last = {parent: max(i for i, r in enumerate(rows) if inside(r, parent)) for parent in hidden}  # type: ignore[arg-type]
    out: List[object] = []
    for index, row in enumerate(rows):
        out.append(row)
        for parent in sorted((p for p, i in last.items() if i == index), key=lambda p: -p.count("/") - bool(p)):
            out.append((parent, hidden[parent]))
    return out


def scope_table(result: InspectResult) -> Table:
    table = Table(title=f"Scopes to depth {result.depth} (from {result.scope_map.source})",
                  columns=["scope", "nodes", "main ops", "params", "FLOPs", "activations", "outputs"],
                  numeric=[False, True, False, True, True, True, False])
    for scope in tree_rows(result.scope_map.scopes, result.depth):
        if isinstance(scope, tuple):
            parent, count = scope
            indent = "  " * (parent.count("/") + 1 if parent else 0)
            table.add(Cell(f"{indent}… {count} more scopes (see --json or --html)", MUTED), "", "", "", "", "", "")
            continue
        label = ("  " * (scope.depth - 1) + scope.name) if scope.depth else "(model)"
        if scope.pattern:
            label += f" [{scope.pattern}]"
        shapes = ", ".join(scope.output_shapes[:2]) + (" …" if len(scope.output_shapes) > 2 else "")
        table.add(label, scope.nodes, main_ops(scope.ops), fmt_count(scope.params),
                  fmt_count(scope.flops), fmt_bytes(scope.activation_bytes), shapes)
    return table


def model_table(result: InspectResult) -> Table:
    table = Table(title="Model", columns=["fact", "value"])
    ref = result.models[0]
    table.add("file", ref.path)
    table.add("producer / opsets", f"{ref.producer or '?'} / " +
              ", ".join(f"{d} {v}" for d, v in result.opsets.items()))
    table.add("size", fmt_bytes(ref.size_bytes))
    for tensor in result.model_inputs:
        table.add(f"input {tensor.name}", f"{tensor.dtype}{tensor.shape}")
    for tensor in result.model_outputs:
        table.add(f"output {tensor.name}", f"{tensor.dtype}{tensor.shape}")
    return table


def _param(p: Optional[ParamSummary]) -> str:
    if p is None:
        return "-"
    if p.count == 0:
        return f"{p.tensor} (not constant)"
    if p.count == 1:
        return f"{p.min:.6g}"
    return f"{p.count} ch, min {p.min:.6g}, max {p.max:.6g}"


def quant_text(quant: List[QuantFact]) -> str:
    """'output: scale 0.0235 zp 0; weight: scale 16 ch, min .. max ..'."""
    return "; ".join(f"{q.role}: scale {_param(q.scale)}, zp {_param(q.zero_point)}"
                     + (f", axis {q.axis}" if q.axis is not None else "") for q in quant)


def matches_table(result: InspectResult) -> Table:
    table = Table(title=f"Nodes matching '{result.pattern}' ({len(result.matches)})",
                  columns=["node", "scope", "op", "inputs", "outputs", "attributes / quantisation"])
    for m in result.matches:
        extra = quant_text(m.quant) or ", ".join(f"{k}={v}" for k, v in list(m.attributes.items())[:4])
        table.add(m.name, m.scope or "(model)", m.op_type,
                  ", ".join(f"{t.dtype}{t.shape}" for t in m.inputs if t.kind != "weight"),
                  ", ".join(f"{t.dtype}{t.shape}" for t in m.outputs), extra)
    return table


def node_tables(facts: NodeFacts) -> List[Table]:
    head = Table(title=f"Node {facts.name}", columns=["fact", "value"])
    head.add("op", f"{facts.domain + '.' if facts.domain else ''}{facts.op_type}")
    head.add("scope", facts.scope or "(model)")
    head.add("position", facts.order)
    head.add("parameters", fmt_count(facts.params))
    head.add("FLOPs", fmt_count(facts.flops))
    for key, value in facts.attributes.items():
        head.add(f"attribute {key}", value)
    if facts.quant:
        head.add("quantisation", quant_text(facts.quant))
    head.add("producers", ", ".join(facts.producers) or "(model inputs)")
    head.add("consumers", ", ".join(facts.consumers) or "(model outputs)")
    tensors = Table(title="Tensors", columns=["side", "tensor", "kind", "dtype", "shape"])
    for side, items in (("in", facts.inputs), ("out", facts.outputs)):
        for t in items:
            tensors.add(side, t.name, t.kind, t.dtype, t.shape)
    return [head, tensors]


def diff_table(result: InspectResult) -> Table:
    table = Table(title=f"Scopes of A vs B (to depth {result.depth}; differing first)",
                  columns=["scope A", "scope B", "matched", "nodes A/B", "change"])
    for c in result.changes:
        status = FAIL if c.matched_by == "unmatched" else (WARN if c.changed else MUTED)
        table.add(c.scope or ("(model)" if c.other == "" and c.matched_by != "unmatched" else "-"),
                  c.other or ("(model)" if c.scope == "" and c.matched_by != "unmatched" else "-"),
                  c.matched_by, f"{c.nodes_a}/{c.nodes_b}", Cell(c.summary, status))
    return table


def inspect_view(result: InspectResult) -> View:
    """The tables `mi inspect` prints for its mode."""
    view = View(passed=True, verdict=result.summary())
    if result.mode == "find":
        view.tables.append(matches_table(result))
    elif result.mode == "node":
        view.tables.extend(node_tables(result.matches[0]))
    elif result.mode == "diff":
        view.tables.append(diff_table(result))
        view.notes.append(f"A: {result.models[0].path}; B: {result.models[1].path}")
    else:
        view.tables.extend([model_table(result), scope_table(result)])
    view.notes.extend(result.notes)
    if result.mode != "tree" and not result.matches and result.mode != "diff":
        view.tables[0].rows.append([Cell("no node matches", OK)] + [Cell("")] * (len(view.tables[0].columns) - 1))
    return view
