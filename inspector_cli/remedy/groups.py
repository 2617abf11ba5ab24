"""Groups of candidates a search reverts together, and the bisection that keeps only the groups it needs.

When the error is spread over the model or its quantisation is catastrophic, no handful of candidates meets
the targets. The search then starts from the other end (NNCF's accuracy control reverts quantiser groups
until the drop is within `max_drop`): every candidate in float, which meets any agreement target, then
re-quantises groups by bisection (`bisect_accept`: a batch of groups at once; a batch that misses is split
in two, a single group that misses stays in float), then the candidates inside the groups left, so that an
answer exists whenever one does, even a near-float one.

Groups are the model's own structure: name scopes (`/model/layer1/...`, `encoder.layer.3.`), at the depth
that gives about sqrt(candidates) groups (stages, blocks); without scoped names, runs of consecutive
candidates in graph order of that size.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

_SPLIT = re.compile(r"[/.:]")


@dataclass(frozen=True)
class Group:
    """Candidates reverted together: a name (the scope, or the first and last candidate) and its units."""

    name: str
    units: Tuple[Tuple[str, ...], ...]

    @property
    def nodes(self) -> List[str]:
        return list(dict.fromkeys(n for unit in self.units for n in unit))


def _scope(name: str, depth: int) -> str:
    """The first `depth` segments of a node name (a shorter name: its own scope, every segment but the last;
    '' for a name without scope)."""
    parts = [p for p in _SPLIT.split(name) if p]
    return "/".join(parts[:min(depth, len(parts) - 1)])


def make_groups(units: Sequence[Tuple[str, ...]], wanted: Optional[int] = None) -> List[Group]:
    """`units` (in graph order) grouped by name scope at the depth giving about `wanted` groups (default
    sqrt of the units, at least 2), else in runs of consecutive units of that size."""
    if not units:
        return []
    wanted = wanted or max(2, round(math.sqrt(len(units))))
    best: Optional[List[Group]] = None
    for depth in range(1, 8):
        scopes: Dict[str, List[Tuple[str, ...]]] = {}
        for unit in units:
            scopes.setdefault(_scope(unit[0], depth), []).append(unit)
        if "" in scopes or len(scopes) < 2:
            continue  # a name without any scope: none of this kind of grouping
        groups = [Group(scope, tuple(members)) for scope, members in scopes.items()]
        if best is None or abs(len(groups) - wanted) < abs(len(best) - wanted):
            best = groups
        if len(groups) >= wanted:
            break
    if best is not None and 2 <= len(best) <= 4 * wanted:
        return best
    size = max(1, math.ceil(len(units) / wanted))
    return [Group(f"{units[k][0]} .. {units[min(k + size, len(units)) - 1][0]}", tuple(units[k:k + size]))
            for k in range(0, len(units), size)]


@dataclass
class Bisection:
    """The outcome of `bisect_accept`: items accepted (the change holds with them), rejected (a single item
    whose change misses the targets, with the metrics that trial read) and untried (the budget ran out)."""

    accepted: List[int]
    rejected: Dict[int, Mapping[str, Optional[float]]]
    untried: List[int]


def bisect_accept(count: int, accept: Callable[[List[int]], Tuple[bool, Mapping[str, Optional[float]]]],
                  budget: Callable[[], bool]) -> Bisection:
    """Apply a change to as many of `count` items (indexes, in the order they are best changed) as the
    targets allow: `accept(batch)` tries the change on the batch with every item accepted so far and says
    whether the targets hold; a batch that fails is split in two, a single item that fails is rejected.
    `budget()` False stops the trials (the rest is untried). About 2 k log2(count / k) trials for k rejects."""
    result = Bisection([], {}, [])
    stack: List[List[int]] = [list(range(count))] if count else []
    while stack:
        batch = stack.pop(0)
        if not budget():
            result.untried.extend(batch)
            continue
        holds, metrics = accept(batch)
        if holds:
            result.accepted.extend(batch)
        elif len(batch) == 1:
            result.rejected[batch[0]] = metrics
        else:
            half = len(batch) // 2
            stack[:0] = [batch[:half], batch[half:]]
    return result


def harm_order(units: Sequence[Tuple[str, ...]], scores: Optional[Mapping[str, float]]) -> List[int]:
    """Indexes of `units`, least harmful first (lowest own-error score of any node of the unit; units without
    a score in the middle, in graph order): the ones a bisection re-quantises first."""
    if not scores:
        return list(range(len(units)))
    known = [v for v in scores.values()]
    middle = sorted(known)[len(known) // 2] if known else 0.0
    harm = [max((scores.get(n, middle) for n in unit), default=middle) for unit in units]
    return sorted(range(len(units)), key=lambda k: (harm[k], k))
