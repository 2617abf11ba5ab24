"""`--break-on` conditions: stop at the first sample on which a tensor meets one.

Grammar: `nan`, `inf`, or `STAT OP NUMBER` (`absmax>1e4`, `zero_frac>=0.9`), optionally limited
to tensors by a glob prefix (`relu*:zero_frac>0.9`); terms joined with `&` (or ` and `) must all
hold on the same tensor and sample; several `--break-on` options trigger on any of them.
Statistics are per tensor and sample: min max mean std absmax zero_frac nan inf nan_frac inf_frac.
"""
from __future__ import annotations

import fnmatch
import operator
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from .tracker import SampleStats

STATS = ("min", "max", "mean", "std", "absmax", "zero_frac", "nan", "inf", "nan_frac", "inf_frac")
OPS: Dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_TERM = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|==|!=|>|<)\s*([-+0-9.eEinfa]+)\s*$")


@dataclass(frozen=True)
class Term:
    stat: str
    op: str
    threshold: float

    def holds(self, stats: SampleStats) -> bool:
        value = stats.value(self.stat)
        return value is not None and OPS[self.op](value, self.threshold)


@dataclass(frozen=True)
class Trigger:
    """One `--break-on` value: all terms on one tensor (matching `tensors`, a glob, when given)."""

    text: str
    terms: Tuple[Term, ...]
    tensors: Optional[str] = None

    def applies_to(self, tensor: str) -> bool:
        return self.tensors is None or fnmatch.fnmatchcase(tensor, self.tensors)

    def matches(self, stats: SampleStats) -> bool:
        return self.applies_to(stats.tensor) and all(t.holds(stats) for t in self.terms)

    def values(self, stats: SampleStats) -> Dict[str, Optional[float]]:
        return {t.stat: stats.value(t.stat) for t in self.terms}


def parse_trigger(text: str) -> Trigger:
    """Parse one `--break-on` value; raises UsageError naming the bad part."""
    body, tensors = text.strip(), None
    glob, sep, rest = body.rpartition(":")
    if sep and glob and not any(op in glob for op in OPS):
        body, tensors = rest, glob.strip()
    terms: List[Term] = []
    for part in re.split(r"\s*&\s*|\s+and\s+", body):
        word = part.strip().lower()
        if word in ("nan", "inf"):
            terms.append(Term(word, ">", 0.0))
            continue
        match = _TERM.match(word)
        if not match:
            raise UsageError(f"--break-on '{text}': cannot read '{part.strip()}'",
                             hint="use nan, inf or STAT>NUMBER, e.g. 'absmax>1e4' or 'zero_frac>0.9 & mean<0.1'")
        stat, op, number = match.groups()
        if stat not in STATS:
            raise UsageError(f"--break-on '{text}': unknown statistic '{stat}'", hint=f"one of: {', '.join(STATS)}")
        try:
            threshold = float(number)
        except ValueError:
            raise UsageError(f"--break-on '{text}': '{number}' is not a number") from None
        terms.append(Term(stat, op, threshold))
    return Trigger(text=text.strip(), terms=tuple(terms), tensors=tensors)


def parse_triggers(texts: Sequence[str]) -> List[Trigger]:
    return [parse_trigger(t) for t in texts if t.strip()]


def first_match(triggers: Sequence[Trigger], stats: SampleStats) -> Optional[Trigger]:
    for trigger in triggers:
        if trigger.matches(stats):
            return trigger
    return None
