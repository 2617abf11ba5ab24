"""The scope section of a measuring result (compare --layers, probe, nan-bisect): its map and roll-up.

Kept apart from `results/scopes.py` (which `results/inspect.py` imports) because it holds the
inspect result's `NodeBrief`/`ScopeChange`. Everything a renderer needs to roll the result up
again at another depth or draw its map (`mi report --map METRIC`) is here: no graph is needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .inspect import NodeBrief, ScopeChange
from .scopes import RollupRow, ScopeMap


@dataclass(frozen=True)
class ScopeSection:
    """Scopes of the measured model (A for compare) and the result's per-layer rows rolled up by scope."""

    map: ScopeMap
    nodes: List[NodeBrief]
    """Every node of the model with its scope and edges (for drawings and tensor -> node lookups)."""
    rollup: List[RollupRow] = field(default_factory=list)
    depth: Optional[int] = 1
    """Depth of `rollup` below the model (None: each node's own scope)."""
    group_by: bool = False
    """--group-by scope was given: the terminal shows the roll-up first."""
    other_map: Optional[ScopeMap] = None
    """compare: the candidate's scopes, drawn beside A's per aligned scope in the HTML map."""
    other_nodes: List[NodeBrief] = field(default_factory=list)
    changes: List[ScopeChange] = field(default_factory=list)
    """compare: A's scopes aligned with B's (as `mi inspect --diff`)."""

    def tensor_node(self) -> Dict[str, str]:
        """Output tensor name -> producing node name (model inputs have none)."""
        return {t: n.name for n in self.nodes for t in n.outputs}
