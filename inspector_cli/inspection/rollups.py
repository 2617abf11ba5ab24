"""Roll-ups by scope of the measuring commands' per-node rows, through `results.scopes.rollup`.

Each command's roll-up is a few lines: its rows (node, {metric: value}), the aggregate of each
metric, then any derived column. Compare, probe and nan-bisect roll-ups join here (phase 2).
"""
from __future__ import annotations

from typing import List, Optional

from ..core.graph import ModelGraph
from ..core.scope_tree import build_scope_tree
from ..results.profile import ModelProfile
from ..results.scopes import RollupRow, ScopeMap, rollup
from .build import scope_map


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
