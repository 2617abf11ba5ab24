"""One row per repeated message: hints and warnings that say the same thing for many nodes (issue 32).

An EfficientNet's profile found 18 Identity nodes and listed 18 rows reading the same; a person
needs one row with the count, the time they share and the first few names (the JSON keeps each).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Generic, Hashable, List, Sequence, TypeVar

T = TypeVar("T")
FIRST_NAMES = 3
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


@dataclass
class Group(Generic[T]):
    """Items that share one key, in their original order."""

    key: Hashable
    items: List[T] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.items)


def group_by(items: Sequence[T], key: Callable[[T], Hashable]) -> List[Group[T]]:
    """Groups in the order of their first item (a sorted list stays sorted by its first of each)."""
    groups: Dict[Hashable, Group[T]] = {}
    for item in items:
        k = key(item)
        groups.setdefault(k, Group(k)).items.append(item)
    return list(groups.values())


def first_names(names: Sequence[str], total: int | None = None, limit: int = FIRST_NAMES) -> str:
    """'a, b, c (+15 more)': the first `limit` names and how many more there are."""
    total = len(names) if total is None else total
    shown = ", ".join(names[:limit])
    return shown + (f" (+{total - min(limit, len(names))} more)" if total > limit else "")


def template(message: str, *names: str) -> str:
    """`message` with the node/tensor names (and any quoted name) replaced by '…': the pattern it repeats."""
    for name in sorted((n for n in names if n), key=len, reverse=True):
        message = message.replace(name, "…")
    return _QUOTED.sub("'…'", message)


def group_messages(messages: Sequence[str], min_count: int = 2) -> List[str]:
    """Messages differing only in the names they quote become one: 'N×: pattern (e.g. 'a', 'b', 'c')'."""
    groups = group_by(list(messages), template)
    out: List[str] = []
    for g in groups:
        if g.count < min_count:
            out.extend(g.items)
            continue
        quoted: List[str] = []
        for m in g.items:
            quoted.extend(q for q in _QUOTED.findall(m) if q not in quoted)
        example = f" (e.g. {first_names(quoted, limit=FIRST_NAMES)})" if quoted else ""
        out.append(f"{g.count}×: {g.key}{example}")
    return out

