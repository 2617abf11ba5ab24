"""Roll-ups by scope of the measuring commands' per-node rows, through `results.scopes.rollup`.

Each command's roll-up is a few lines: its rows (node, {metric: value}), the aggregate of each
metric, then any derived column. Profile's rows are kernels; compare's are the compared layers
(keyed by the node producing A's tensor), probe's the probed tensors and quantisers, nan-bisect's
the origin groups. Compare, probe and nan-bisect keep the rows' scopes in a `ScopeSection`, so a
saved result can be rolled up again at another depth without its model (`regroup`).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from ..core.graph import ModelGraph
from ..core.scope_blocks import TRANSPARENT
from ..core.scope_tree import build_scope_tree
from ..core.scopes import node_scopes
from ..results.scope_section import ScopeSection
from ..results.scopes import RollupRow, ScopeMap, rollup
from .build import node_briefs, scope_map
from .flags import FULL_SCOPES  # noqa: F401 (defined there: the CLI sets it without importing this module)

if TYPE_CHECKING:  # an annotation only: probe and compare --layers do not import the profile result (issue 16)
    from ..results.profile import ModelProfile

Rows = List[Tuple[str, Dict[str, Optional[float]]]]
DIFF_DEPTH = 3
"""How deep compare's A and B trees are aligned for the side-by-side drawings."""


def model_scope_map(graph: ModelGraph) -> ScopeMap:
    """The scope map of a loaded model (tree built once)."""
    return scope_map(graph, build_scope_tree(graph))


def profile_rollup(smap: ScopeMap, profile: ModelProfile, depth: Optional[int]) -> List[RollupRow]:
    """Per scope: summed kernel time per run, share of the kernel sum, kernel count, FLOPs and GFLOP/s.

    A kernel counts once, in the scope of the first original node it executes (a fused kernel
    spanning two scopes is thus not split); kernels the runtime added count at the model level.
    """
    rows = []
    for kernel in profile.kernels:
        node = kernel.original_nodes[0] if kernel.original_nodes else ""
        rows.append((node, {"time_us": kernel.per_run_us, "kernels": 1.0,
                            "flops": float(kernel.flops) if kernel.flops is not None else None}))
    order = [s.path for s in smap.scopes]
    rolled = rollup(smap.node_scope, rows, {"time_us": "sum", "kernels": "sum", "flops": "sum"},
                    depth=depth, order=order)
    total = profile.kernel_sum_us or sum(r.values["time_us"] or 0.0 for r in rolled)
    out: List[RollupRow] = []
    for row in rolled:
        values = dict(row.values)
        time_us = values.get("time_us") or 0.0
        values["share"] = time_us / total if total else None
        flops = values.get("flops")
        values["gflops_per_s"] = flops / (time_us * 1e3) if flops and time_us else None
        out.append(RollupRow(scope=row.scope, depth=row.depth, rows=row.rows, values=values))
    return sorted(out, key=lambda r: -(r.values.get("time_us") or 0.0))


# --- compare --layers, probe, nan-bisect ---------------------------------------------------------

COMPARE_AGGREGATES = {"cosine": "min", "sqnr": "min", "max_abs": "max", "diverged": "sum",
                      "first_divergence": "min", "own_share": "max", "own_layers": "sum"}
PROBE_AGGREGATES = {"tensors": "sum", "nonfinite": "sum", "dead_units": "sum", "zero_frac": "max",
                    "saturated": "sum", "quantised_values": "sum"}
NAN_AGGREGATES = {"origins": "sum", "origin_samples": "sum"}


def compare_rows(result: Any, tensor_node: Mapping[str, str]) -> Rows:
    """One row per compared layer, at the node producing A's tensor.

    `diverged` is 1 when a layer gate failed on it; `first_divergence` its index among the compared
    layers (the scope's minimum is its first divergence); `own_layers` 1 when isolation says the
    layer makes its own error.
    """
    rows: Rows = []
    for layer in result.layers.layers if result.layers else []:
        rows.append((tensor_node.get(layer.name, ""), {
            "cosine": layer.dataset.get("cosine"), "sqnr": layer.dataset.get("sqnr"),
            "max_abs": layer.dataset.get("max_abs"), "diverged": 1.0 if layer.failed_gates else 0.0,
            "first_divergence": float(layer.index) if layer.failed_gates else None,
            "own_share": layer.own_share, "own_layers": 1.0 if layer.error_source == "own" else 0.0}))
    return rows


def probe_rows(result: Any, tensor_node: Mapping[str, str]) -> Rows:
    """One row per probed tensor (non-finite values, dead channels, zero share) and per quantiser."""
    rows: Rows = []
    for t in result.tensors:
        dead = len(t.channels.dead) if t.channels is not None else 0
        rows.append((t.node or tensor_node.get(t.name, ""), {
            "tensors": 1.0, "nonfinite": float(t.nan + t.inf), "dead_units": float(dead),
            "zero_frac": t.zero_frac}))
    for q in result.quant:
        rows.append((q.node, {"saturated": float(q.saturated), "quantised_values": float(q.count)}))
    return rows


def nan_rows(result: Any, tensor_node: Mapping[str, str]) -> Rows:
    """One row per NaN/Inf origin (a node where it is born), with the samples it was born in."""
    return [(g.node, {"origins": 1.0, "origin_samples": float(g.samples)})
            for g in result.groups if g.kind == "origin"]


_KINDS = {"compare": (compare_rows, COMPARE_AGGREGATES), "probe": (probe_rows, PROBE_AGGREGATES),
          "nan-bisect": (nan_rows, NAN_AGGREGATES)}


def result_rollup(result: Any, section: ScopeSection, depth: Optional[int]) -> List[RollupRow]:
    """`result`'s per-layer rows rolled up by scope at `depth`, scopes in the model's order."""
    make_rows, aggregates = _KINDS[result.kind]
    rows = make_rows(result, section.tensor_node())
    order = [s.path for s in section.map.scopes] if section.map.scopes else None
    return _rolled(result, rows, aggregates, section.map.node_scope, depth, order)


def _rolled(result: Any, rows: Rows, aggregates: Mapping[str, str], node_scope: Mapping[str, str],
            depth: Optional[int], order: Optional[List[str]]) -> List[RollupRow]:
    rolled = rollup(node_scope, rows, aggregates, depth=depth, order=order)
    if result.kind == "probe":
        rolled = [_with_share(r) for r in rolled]
    elif result.kind == "compare":
        names = {float(layer.index): layer.name for layer in result.layers.layers} if result.layers else {}
        rolled = [dataclasses.replace(r, labels={"first_divergence": names[r.values["first_divergence"]]})
                  if r.values.get("first_divergence") is not None else r for r in rolled]
    return rolled


def _with_share(row: RollupRow) -> RollupRow:
    values = dict(row.values)
    count = values.get("quantised_values") or 0.0
    values["saturation_share"] = (values.get("saturated") or 0.0) / count if count else None
    return dataclasses.replace(row, values=values)



def attach_scopes(result: Any, graph: ModelGraph, other: Optional[ModelGraph] = None,
                  full: Optional[bool] = None) -> Any:
    """`result` with its scope section: the depth-1 roll-up, and with `full` (default: `FULL_SCOPES`)
    `graph`'s whole scope map (compare: B aligned) for the HTML map and other depths.

    Without `full` the section holds the roll-up, the scope source and the scope of each node that
    has a row, and no scope facts: the same roll-up rows for a fraction of the cost (the full map
    built every node's FLOPs and shapes, 1-2 s at 20,000 nodes). The roll-up is an extra: if the
    scopes cannot be derived, the measured result is kept with a warning rather than lost after a
    long run.
    """
    try:
        if full if full is not None else FULL_SCOPES.get():
            return _attach(result, graph, other)
        return _attach_light(result, graph)
    except Exception as exc:  # noqa: BLE001 - never lose the measurements over their roll-up
        return dataclasses.replace(result, warnings=[*result.warnings, f"no roll-up by scope: {exc}"])


def _attach_light(result: Any, graph: ModelGraph) -> Any:
    """The depth-1 roll-up from node scope paths alone (no scope tree, no per-node facts)."""
    paths, _kinds, source = node_scopes(graph)
    make_rows, aggregates = _KINDS[result.kind]
    rows = make_rows(result, _TensorNode(graph))
    node_scope = {node: "/".join(paths[node]) for node, _ in rows if node in paths}
    section = ScopeSection(map=ScopeMap(source=source, node_scope=node_scope), nodes=[])
    return dataclasses.replace(result, scopes=dataclasses.replace(
        section, rollup=_rolled(result, rows, aggregates, node_scope, 1, _top_order(graph, paths))))


class _TensorNode(Mapping[str, str]):
    """Tensor -> producing node, read from the graph as `ScopeSection.tensor_node` reads the briefs."""

    def __init__(self, graph: ModelGraph) -> None:
        self._producer = graph.producer

    def __getitem__(self, tensor: str) -> str:
        return self._producer[tensor].name

    def __iter__(self) -> Iterator[str]:
        return iter(self._producer)

    def __len__(self) -> int:
        return len(self._producer)


def _top_order(graph: ModelGraph, paths: Mapping[str, Tuple[str, ...]]) -> List[str]:
    """The model and its depth-1 scopes in the order of the full map (`ScopeTree.walk`): siblings by
    their first node that is not Q/DQ or Constant, ties (and scopes of only such nodes) by creation."""
    created: Dict[str, int] = {}
    first: Dict[str, int] = {}
    for node in graph.nodes:
        path = paths[node.name]
        if not path:
            continue
        top = path[0]
        created.setdefault(top, len(created))
        if top not in first and node.op_type not in TRANSPARENT:
            first[top] = node.order
    return [""] + sorted(created, key=lambda top: first.get(top, -1))


def _attach(result: Any, graph: ModelGraph, other: Optional[ModelGraph]) -> Any:
    tree = build_scope_tree(graph)
    section = ScopeSection(map=scope_map(graph, tree), nodes=node_briefs(graph, tree))
    if other is not None:
        from .diff import diff_trees

        other_tree = build_scope_tree(other)
        section = dataclasses.replace(section, other_map=scope_map(other, other_tree),
                                      other_nodes=node_briefs(other, other_tree),
                                      changes=diff_trees(graph, tree, other, other_tree, DIFF_DEPTH))
    section = dataclasses.replace(section, rollup=result_rollup(result, section, 1))
    return dataclasses.replace(result, scopes=section)


def regroup(result: Any, depth: Optional[int], group_by: bool = True) -> Any:
    """`result` rolled up again at `depth` (from its own scope section; no model needed)."""
    section: Optional[ScopeSection] = getattr(result, "scopes", None)
    if section is None:
        return result
    section = dataclasses.replace(section, depth=depth, group_by=group_by)
    return dataclasses.replace(result, scopes=dataclasses.replace(section, rollup=result_rollup(result, section, depth)))

