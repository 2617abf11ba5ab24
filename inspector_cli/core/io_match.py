"""Pairing the inputs or outputs of two models: user map, exact name, then position if safe.

Position is used only for the names left over when their counts, element types and shapes agree,
and every such pair is reported as a warning; nothing is ever paired silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from .types import TensorInfo, format_shape


@dataclass(frozen=True)
class NamePair:
    a: str
    b: str
    method: str
    """'map', 'name' or 'position'."""


@dataclass(frozen=True)
class NameMatching:
    pairs: List[NamePair]
    unmatched_a: List[str]
    unmatched_b: List[str]
    warnings: List[str]


def parse_name_map(entries: Sequence[str]) -> List[Tuple[str, str]]:
    """['a=b', ...] -> [(a, b), ...]."""
    pairs: List[Tuple[str, str]] = []
    for entry in entries:
        a, sep, b = str(entry).partition("=")
        if not sep or not a.strip() or not b.strip():
            raise UsageError(f"--map '{entry}': expected A_NAME=B_NAME")
        pairs.append((a.strip(), b.strip()))
    return pairs


def _shapes_agree(x: TensorInfo, y: TensorInfo) -> bool:
    if x.shape is None or y.shape is None:
        return True
    if len(x.shape) != len(y.shape):
        return False
    return all(not (isinstance(p, int) and isinstance(q, int)) or p == q for p, q in zip(x.shape, y.shape))


def match_names(side_a: Sequence[TensorInfo], side_b: Sequence[TensorInfo],
                user_map: Sequence[Tuple[str, str]] = (), *, what: str = "output",
                allow_map_unknown: bool = False) -> NameMatching:
    """Pair `side_a` with `side_b` (see module doc). `user_map` entries must name real tensors."""
    names_a = [t.name for t in side_a]
    names_b = [t.name for t in side_b]
    info_b: Dict[str, TensorInfo] = {t.name: t for t in side_b}
    pairs: Dict[str, NamePair] = {}
    used_b: set[str] = set()
    for a, b in user_map:
        if a not in names_a or b not in names_b:
            if allow_map_unknown:
                continue
            bad = a if a not in names_a else b
            side = "first" if a not in names_a else "second"
            pool = names_a if side == "first" else names_b
            raise UsageError(f"--map {a}={b}: the {side} model has no {what} '{bad}'",
                             hint=f"its {what}s: {', '.join(pool)}")
        pairs[a] = NamePair(a, b, "map")
        used_b.add(b)
    for name in names_a:
        if name not in pairs and name in info_b and name not in used_b:
            pairs[name] = NamePair(name, name, "name")
            used_b.add(name)
    rest_a = [t for t in side_a if t.name not in pairs]
    rest_b = [t for t in side_b if t.name not in used_b]
    warnings: List[str] = []
    if rest_a and len(rest_a) == len(rest_b) and all(
        (x.elem_type == y.elem_type or not x.elem_type or not y.elem_type) and _shapes_agree(x, y)
        for x, y in zip(rest_a, rest_b)
    ):
        for x, y in zip(rest_a, rest_b):
            pairs[x.name] = NamePair(x.name, y.name, "position")
            warnings.append(f"{what} names differ: paired '{x.name}' with '{y.name}' by position "
                            f"({x.dtype_name} {format_shape(x.shape)}); use --map to pair them explicitly")
        rest_a, rest_b = [], []
    ordered = [pairs[n] for n in names_a if n in pairs]
    return NameMatching(ordered, [t.name for t in rest_a], [t.name for t in rest_b], warnings)


def rename_feeds(feeds: Dict[str, object], pairs: Sequence[NamePair]) -> Dict[str, object]:
    """Feeds keyed by A's input names -> keyed by B's."""
    mapping: Dict[str, Optional[str]] = {p.a: p.b for p in pairs}
    return {mapping[k]: v for k, v in feeds.items() if mapping.get(k)}  # type: ignore[misc]
