"""Scopes in results: the tree as plain data, and the one roll-up of per-node rows by scope.

Any result that names nodes can carry a `ScopeMap` (each node's scope path and the tree's scopes);
`rollup` then aggregates its per-node rows (time, error, NaN origins...) per scope to a depth.
It lives in results/ (pure Python, no graph) so renderers can roll up a saved result again with
another metric (`mi report --map METRIC`) and every command wires it in a few lines.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

Aggregate = str
"""'sum', 'max', 'min', 'mean', 'count' (rows with a value) or 'first' (value of the first row in order)."""
AGGREGATES = ("sum", "max", "min", "mean", "count", "first")


@dataclass(frozen=True)
class ScopeInfo:
    """One scope of a model: its path ('' is the model), place in the tree and static facts."""

    path: str
    name: str
    depth: int
    kind: str
    """root, name (from node names or torch metadata), function (ONNX local function) or block (structure)."""
    nodes: int
    ops: Dict[str, int] = field(default_factory=dict)
    params: int = 0
    param_bytes: int = 0
    flops: Optional[int] = None
    activation_bytes: int = 0
    inputs: List[str] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    output_shapes: List[str] = field(default_factory=list)
    children: List[str] = field(default_factory=list)
    pattern: str = ""
    """Structural blocks: a letter shared by blocks with the same op sequence."""


@dataclass(frozen=True)
class ScopeMap:
    """Where every node lives: node name -> scope path, plus the scopes (parents before children)."""

    source: str
    """torch-metadata, names or structure."""
    node_scope: Dict[str, str]
    scopes: List[ScopeInfo] = field(default_factory=list)


@dataclass(frozen=True)
class RollupRow:
    """Per-scope aggregate of per-node rows."""

    scope: str
    depth: int
    rows: int
    """Per-node rows that fell in the scope."""
    values: Dict[str, Optional[float]]


def scope_at(path: str, depth: Optional[int]) -> str:
    """The ancestor of `path` at `depth` (the path itself when shallower; None means the leaf)."""
    if depth is None or not path:
        return path
    parts = path.split("/")
    return "/".join(parts[:depth])


def rollup(node_scope: Mapping[str, str], rows: Iterable[Tuple[str, Mapping[str, Optional[float]]]],
           aggregates: Mapping[str, Aggregate], *, depth: Optional[int] = 1,
           order: Optional[Sequence[str]] = None) -> List[RollupRow]:
    """Aggregate per-node rows by scope, at `depth` levels below the model (None: each node's own scope).

    `rows` are (node name, {metric: value}); nodes without a scope count at the model level ('').
    Values that are None are skipped. Scopes come back in order of their first row, or in
    `order` (scope paths) when given.
    """
    for metric, how in aggregates.items():
        if how not in AGGREGATES:
            raise ValueError(f"unknown aggregate {how!r} for {metric!r}")
    buckets: Dict[str, List[Mapping[str, Optional[float]]]] = {}
    for node, values in rows:
        buckets.setdefault(scope_at(node_scope.get(node, ""), depth), []).append(values)
    scopes = list(buckets)
    if order is not None:
        rank = {s: i for i, s in enumerate(order)}
        scopes.sort(key=lambda s: rank.get(s, len(rank)))
    result: List[RollupRow] = []
    for scope in scopes:
        members = buckets[scope]
        values: Dict[str, Optional[float]] = {}
        for metric, how in aggregates.items():
            present = [float(v[metric]) for v in members if v.get(metric) is not None]  # type: ignore[arg-type]
            values[metric] = _aggregate(how, present)
        result.append(RollupRow(scope=scope, depth=scope.count("/") + 1 if scope else 0, rows=len(members),
                                values=values))
    return result


_REDUCE: Dict[str, Callable[[List[float]], float]] = {
    "sum": lambda v: float(sum(v)), "max": max, "min": min, "mean": lambda v: sum(v) / len(v),
    "count": lambda v: float(len(v)), "first": lambda v: v[0],
}


def _aggregate(how: Aggregate, present: List[float]) -> Optional[float]:
    if how == "count":
        return float(len(present))
    if not present:
        return None
    return _REDUCE[how](present)


def scope_totals(node_scope: Mapping[str, str], values: Mapping[str, float], how: Aggregate = "sum"
                 ) -> Dict[str, Optional[float]]:
    """Every scope's aggregate of a per-node metric, at every level (for colouring the whole tree)."""
    per_scope: Dict[str, List[float]] = {}
    for node, value in values.items():
        path = node_scope.get(node, "")
        parts = path.split("/") if path else []
        for depth in range(len(parts) + 1):
            per_scope.setdefault("/".join(parts[:depth]), []).append(float(value))
    return {scope: _aggregate(how, vals) for scope, vals in per_scope.items()}
