"""Which map a result gets in its HTML section: its scope map, coloured by a per-node metric."""
from __future__ import annotations

from typing import Any, Dict, Optional

from markupsafe import Markup

from ..errors import UsageError
from ..results.base import NodeValues
from .scope_map import map_html


def _by_node(nv: NodeValues, tensor_node: Dict[str, str], higher_is_better: bool) -> NodeValues:
    """Tensor-keyed values moved to the node producing each tensor (a node's worst output when it has several)."""
    values: Dict[str, float] = {}
    pick = min if higher_is_better else max
    for tensor, value in nv.values.items():
        node = tensor_node.get(tensor, tensor)
        values[node] = pick(values[node], value) if node in values else value
    return NodeValues(metric=nv.metric, higher_is_better=nv.higher_is_better, values=values, key="node",
                      unit=nv.unit, thresholds=nv.thresholds)


def map_for(result: Any, metric: Optional[str] = None) -> Optional[Markup]:
    """The map of `result` (None when it has no scope map or no per-node values).

    `metric` picks one of `result.node_values()` by name (`mi report --map METRIC`); an unknown
    name is a usage error listing the available ones. Results with a scope section (compare
    --layers, probe, nan-bisect) key their tensor values by the producing node.
    """
    section = getattr(result, "scopes", None)
    smap = section.map if section is not None else getattr(result, "scope_map", None)
    if smap is None or not smap.scopes:
        if metric:
            raise UsageError(f"--map {metric}: this {result.kind} result has no scope map",
                             hint="its run saved only the depth-1 roll-up: run it again with --html or "
                                  "--group-by scope to keep the whole map in the JSON")
        return None
    if section is not None:
        tensor_node = section.tensor_node()
        values = [nv if nv.key == "node" else _by_node(nv, tensor_node, nv.higher_is_better)
                  for nv in result.node_values()]
    else:
        values = [nv for nv in result.node_values() if nv.key == "node"]
    values = [nv for nv in values if nv.values]
    if not values:
        if metric:
            raise UsageError(f"--map {metric}: this {result.kind} result has no per-node values")
        return None
    chosen = values[0]
    if metric:
        named = {nv.metric: nv for nv in values}
        if metric not in named:
            raise UsageError(f"--map {metric}: not a per-node metric of this {result.kind} result; "
                             f"choose one of {', '.join(sorted(named))}")
        chosen = named[metric]
    if section is not None:
        nodes: Any = section.nodes
        other = (section.other_map, section.other_nodes) if section.other_map is not None else None
        change_list: Any = section.changes
    else:
        nodes = getattr(result, "nodes", ()) or ()
        other_map = getattr(result, "other_map", None)
        other = (other_map, getattr(result, "other_nodes", ())) if other_map is not None else None
        change_list = getattr(result, "changes", ()) or ()
    changes = {c.scope: c for c in change_list if c.scope or c.matched_by != "unmatched"}
    return map_html(smap, chosen, nodes, other=other, changes=changes or None)
