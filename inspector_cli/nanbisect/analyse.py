"""From the status of every tensor of a span to its origins, and which of them reach the targets.

An origin is a node whose *computed* inputs (outputs of other nodes) are all good and one of whose
outputs is bad. Graph inputs and weights are given, not computed: a node fed a NaN weight is an
origin, with the corrupted weight as its root cause. Each bad tensor is attributed to the set of
origins it descends from along bad tensors, so an origin reaches the targets exactly when a chain
of bad tensors leads from it to a bad target; the others are masked (`--deep`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Sequence, Set

from .regions import Topology


@dataclass
class OriginScan:
    origins: List[int] = field(default_factory=list)
    """Positions of every origin in the span, in topological order."""
    reaching: List[int] = field(default_factory=list)
    masked: List[int] = field(default_factory=list)
    incoming: Set[str] = field(default_factory=set)
    """Bad tensors fed into the span whose values reach the targets."""
    first_bad: int = -1
    """Position of the first node with a bad output (the fallback answer)."""


def find_origins(topo: Topology, positions: Sequence[int], bad: Set[str], targets: Sequence[str],
                 incoming: Sequence[str] = ()) -> OriginScan:
    """Origins among `positions` given the bad tensors, split by whether they reach `targets`.

    `incoming` are bad tensors fed into the span from outside (captured upstream): nodes reading
    them propagate, and the scan says which of them reach the targets.
    """
    scan = OriginScan()
    labels = {name: -1 - i for i, name in enumerate(incoming)}
    causes: Dict[str, FrozenSet[int]] = {name: frozenset({label}) for name, label in labels.items()}
    for pos in positions:
        node = topo.nodes[pos]
        bad_outputs = [o for o in node.outputs if o and o in bad]
        if not bad_outputs:
            continue
        if scan.first_bad < 0:
            scan.first_bad = pos
        bad_inputs = [t for t in node.all_inputs if t in bad and (topo.is_computed(t) or t in causes)]
        if bad_inputs:
            cause: FrozenSet[int] = frozenset().union(*(causes.get(t, frozenset()) for t in bad_inputs))
        else:
            cause = frozenset({pos})
            scan.origins.append(pos)
        for out in bad_outputs:
            causes[out] = cause
    reach: Set[int] = set()
    for target in targets:
        reach.update(causes.get(target, frozenset()))
    scan.reaching = [p for p in scan.origins if p in reach]
    scan.masked = [p for p in scan.origins if p not in reach]
    scan.incoming = {name for name, label in labels.items() if label in reach}
    return scan


def first_nan_birth(topo: Topology, positions: Sequence[int], nan: Set[str], targets: Sequence[str]) -> int:
    """First node (reaching a NaN target) whose computed inputs hold no NaN but an output does."""
    scan = find_origins(topo, positions, nan, targets)
    if scan.reaching:
        return scan.reaching[0]
    return scan.origins[0] if scan.origins else -1
