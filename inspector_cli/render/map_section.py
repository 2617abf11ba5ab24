"""Which map a result gets in its HTML section: its scope map, coloured by a per-node metric."""
from __future__ import annotations

from typing import Any, Optional

from markupsafe import Markup

from ..errors import UsageError
from .scope_map import map_html


def map_for(result: Any, metric: Optional[str] = None) -> Optional[Markup]:
    """The map of `result` (None when it has no scope map or no per-node values).

    `metric` picks one of `result.node_values()` by name (`mi report --map METRIC`); an unknown
    name is a usage error listing the available ones.
    """
    smap = getattr(result, "scope_map", None)
    if smap is None or not smap.scopes:
        if metric:
            raise UsageError(f"--map {metric}: this {result.kind} result has no scope map")
        return None
    values = [nv for nv in result.node_values() if nv.key == "node"]
    if not values:
        return None
    chosen = values[0]
    if metric:
        named = {nv.metric: nv for nv in values}
        if metric not in named:
            raise UsageError(f"--map {metric}: not a per-node metric of this {result.kind} result; "
                             f"choose one of {', '.join(sorted(named))}")
        chosen = named[metric]
    nodes = getattr(result, "nodes", ()) or ()
    other_map = getattr(result, "other_map", None)
    other = (other_map, getattr(result, "other_nodes", ())) if other_map is not None else None
    changes = {c.scope: c for c in getattr(result, "changes", ()) or () if c.scope or c.matched_by != "unmatched"}
    return map_html(smap, chosen, nodes, other=other, changes=changes or None)
