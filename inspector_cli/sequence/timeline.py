"""The time-line of a sequence run: at most `capacity` points, each the worst of `bucket` steps."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

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
        value is None or NaN, so the worst of a run of steps merged into one point is min/max.

        A time-line of 1,000 steps or more merges most steps into a point: one `add` per step was
        the largest Python cost of a block once its metrics were vectorised."""
        n = len(steps)
        if not n or steps[-1] - steps[0] != n - 1:
            for step, value, worst in zip(steps, values, drift):
                self.add(step, value, worst)
            return
        i = 0
        while i < n:
            if self.bucket == 1 and len(self.steps) + n - i <= self.capacity and (not self.steps or steps[i] > self.steps[-1]):
                self.steps.extend(steps[i:])  # one step per point, room left: append them all
                self.values.extend(values[i:])
                self.drift.extend(drift[i:])
                return
            if self.steps and steps[i] < self.steps[-1] + self.bucket:
                j = min(n, i + self.steps[-1] + self.bucket - steps[i])  # the steps this last point covers
                if clean:
                    self.values[-1] = _worst(self.metric, self.values[-1], values[i:j])
                    self.drift[-1] = _worst("cosine", self.drift[-1], drift[i:j])
                else:
                    for k in range(i, j):
                        self.add(steps[k], values[k], drift[k])
                i = j
                continue
            self.add(steps[i], values[i], drift[i])  # a new point (merging the old ones when full)
            i += 1

    def result(self, with_drift: bool) -> Timeline:
        return Timeline(self.metric, self.tensor, self.bucket, list(self.steps), list(self.values),
                        list(self.drift) if with_drift else [])


def _worst(metric: str, current: Optional[float], values: Sequence[Optional[float]]) -> Optional[float]:
    """`current` and then each of `values` (neither None nor NaN) picked as TimelineBuilder._pick does."""
    if current is None or current != current:
        return current if current is not None else _worst(metric, values[0], values[1:]) if values else None
    if not values:
        return current
    best = min(values) if _HIGHER[metric] else max(values)
    return best if worse(metric, best, current) else current  # type: ignore[arg-type]


def _pairs(values: List[Optional[float]]) -> List[Tuple[Optional[float], Optional[float]]]:
    padded = values + [None] if len(values) % 2 else values
    return list(zip(padded[::2], padded[1::2]))
