"""The time-line of a sequence run: at most `capacity` points, each the worst of `bucket` steps."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..diff.metrics import METRICS
from ..results.sequence import Timeline

_HIGHER = {name: spec.higher_is_better for name, spec in METRICS.items()}


def worse(metric: str, value: float, than: float) -> bool:
    """True when `value` is worse than `than` for `metric` (NaN is worst)."""
    # x != x is NaN's test without a call: this runs for every step of the time-line
    if value != value:
        return than == than
    if than != than:
        return False
    return value < than if _HIGHER[metric] else value > than


class TimelineBuilder:
    """At most `capacity` points: when full, neighbours merge (worst kept) and each point covers twice the steps."""

    def __init__(self, metric: str, tensor: str, capacity: int = 512) -> None:
        self.metric, self.tensor = metric, tensor
        self.capacity = max(2, capacity - capacity % 2)
        self.bucket = 1
        self.steps: List[int] = []
        self.values: List[Optional[float]] = []
        self.drift: List[Optional[float]] = []

    def _pick(self, a: Optional[float], b: Optional[float], metric: str) -> Optional[float]:
        if a is None:
            return b
        if b is None:
            return a
        return b if worse(metric, b, a) else a

    def add(self, step: int, value: Optional[float], drift: Optional[float]) -> None:
        if self.steps and step < self.steps[-1] + self.bucket:
            self.values[-1] = self._pick(self.values[-1], value, self.metric)
            self.drift[-1] = self._pick(self.drift[-1], drift, "cosine")
            return
        if len(self.steps) == self.capacity:
            self.bucket *= 2
            self.steps = self.steps[::2]
            self.values = [self._pick(a, b, self.metric) for a, b in _pairs(self.values)]
            self.drift = [self._pick(a, b, "cosine") for a, b in _pairs(self.drift)]
            if step < self.steps[-1] + self.bucket:
                self.add(step, value, drift)
                return
        self.steps.append(step)
        self.values.append(value)
        self.drift.append(drift)

    def add_many(self, steps: Sequence[int], values: Sequence[Optional[float]], drift: Sequence[Optional[float]],
                 clean: bool = False) -> None:
        """`add` for each of consecutive steps in turn, the same points as one by one. `clean`: no
        value is None or NaN, so the worst of the steps sharing a point is a min/max over them.

        A time-line of 1,000 steps or more merges most steps into a point: one `add` per step was
        the largest Python cost of a block once its metrics were vectorised."""
        n = len(steps)
        if not clean or not n or steps[-1] - steps[0] != n - 1:
            for step, value, worst in zip(steps, values, drift):
                self.add(step, value, worst)
            return
        i = 0
        while i < n:
            if self.steps and steps[i] < self.steps[-1] + self.bucket:
                j = min(n, i + self.steps[-1] + self.bucket - steps[i])  # the steps the last point covers
                self.values[-1] = _worst(self.metric, [self.values[-1]] + list(values[i:j]))
                self.drift[-1] = _worst("cosine", [self.drift[-1]] + list(drift[i:j]))
                i = j
            elif len(self.steps) == self.capacity:
                self.add(steps[i], values[i], drift[i])  # full: the points merge pairwise first
                i += 1
            else:
                # new points of `bucket` steps each, as many as there is room for
                count = min(n - i, (self.capacity - len(self.steps)) * self.bucket)
                self.steps.extend(steps[i:i + count:self.bucket])
                self.values.extend(_worst_runs(self.metric, values[i:i + count], self.bucket))
                self.drift.extend(_worst_runs("cosine", drift[i:i + count], self.bucket))
                i += count

    def result(self, with_drift: bool) -> Timeline:
        return Timeline(self.metric, self.tensor, self.bucket, list(self.steps), list(self.values),
                        list(self.drift) if with_drift else [])


def _worst(metric: str, values: Sequence[Optional[float]]) -> Optional[float]:
    """The first worst of `values` as `_pick` folds them; after the first, none is None or NaN."""
    first = values[0]
    if first is not None and first != first:
        return first  # NaN stays worst
    rest = values[1:]
    if not rest:
        return first
    best = min(rest) if _HIGHER[metric] else max(rest)  # type: ignore[type-var]
    return best if first is None or worse(metric, best, first) else first


def _worst_runs(metric: str, values: Sequence[Optional[float]], size: int) -> List[Optional[float]]:
    """The worst of each run of `size` values (none None or NaN; the last run may be shorter)."""
    if size == 1:
        return list(values)
    array = np.asarray(values, dtype=np.float64)
    pick = np.minimum if _HIGHER[metric] else np.maximum
    return pick.reduceat(array, np.arange(0, len(array), size)).tolist()


def _pairs(values: List[Optional[float]]) -> List[Tuple[Optional[float], Optional[float]]]:
    padded = values + [None] if len(values) % 2 else values
    return list(zip(padded[::2], padded[1::2]))
