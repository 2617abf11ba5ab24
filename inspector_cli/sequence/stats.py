"""Running summaries over steps, rebuilt from per-step records alone (so a resumed run is exact).

A step record is the JSONL line of one step: `{"step": k, "outputs": {name: metrics},
"states": {name: metrics}, "decision": [a, b] or null, "nonfinite": {...}}`. `SequenceStats.fold`
updates worst/mean/last per tensor, gate tallies, the first failing step, decision agreement and
a bounded time-line; nothing grows with the number of steps except the time-line's fixed budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..diff.gates import Gate, gates_for
from ..diff.metrics import METRICS
from ..results.base import GateOutcome
from ..results.sequence import StepSummary, Timeline

MAX_EXAMPLES = 5


def worse(metric: str, value: float, than: float) -> bool:
    """True when `value` is worse than `than` for `metric` (NaN is worst)."""
    if math.isnan(value):
        return not math.isnan(than)
    if math.isnan(than):
        return False
    return value < than if METRICS[metric].higher_is_better else value > than


@dataclass
class _TensorRun:
    tensor: str
    role: str
    worst: Dict[str, float] = field(default_factory=dict)
    worst_step: Dict[str, int] = field(default_factory=dict)
    total: Dict[str, float] = field(default_factory=dict)
    count: Dict[str, int] = field(default_factory=dict)
    last: Dict[str, Optional[float]] = field(default_factory=dict)

    def add_many(self, steps: Sequence[int], rows: Sequence[Dict[str, Any]]) -> None:
        """Fold several steps' metrics: the same worst (first occurrence) and the same sequential sums
        as one step at a time, so results do not depend on how steps were grouped."""
        if not rows:
            return
        self.last = dict(rows[-1])
        keys = set().union(*rows)  # only the metrics some row has (a row holds 6 of METRICS' names)
        for name in METRICS:
            if name not in keys:
                continue
            column = [row.get(name) for row in rows]
            if None in column:
                index = [i for i, value in enumerate(column) if value is not None]
                values = np.array([float(column[i]) for i in index])
            else:  # the usual block: every step has the metric, one column, one conversion
                index = range(len(rows))
                values = np.array(column, dtype=np.float64)
            if not len(index):
                continue
            j = _worst_index(name, values)
            previous = self.worst.get(name)
            if previous is None or worse(name, float(values[j]), previous):
                self.worst[name], self.worst_step[name] = float(values[j]), int(steps[index[j]])
            finite = values[np.isfinite(values)]
            if finite.size:
                self.total[name] = _sequential_sum(self.total.get(name, 0.0), finite)
                self.count[name] = self.count.get(name, 0) + int(finite.size)

    def summary(self) -> StepSummary:
        mean = {k: self.total[k] / self.count[k] for k in self.count if self.count[k]}
        return StepSummary(self.tensor, self.role, dict(self.worst), dict(self.worst_step), mean, dict(self.last))


@dataclass
class _Tally:
    gate: Gate
    tensor: str
    failed: int = 0
    evaluated: int = 0
    worst: Optional[float] = None
    examples: List[str] = field(default_factory=list)

    def outcome(self) -> GateOutcome:
        return GateOutcome(gate=self.gate.describe(), metric=self.gate.metric, op=self.gate.op,
                           threshold=self.gate.threshold, tensor=self.tensor, passed=self.failed == 0,
                           worst=self.worst, failed_samples=self.failed, total_samples=self.evaluated,
                           examples=list(self.examples), applicable=self.evaluated > 0)


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

    def result(self, with_drift: bool) -> Timeline:
        return Timeline(self.metric, self.tensor, self.bucket, list(self.steps), list(self.values),
                        list(self.drift) if with_drift else [])


def _worst_index(metric: str, values: np.ndarray) -> int:
    """Index of the first worst value (the first NaN when there is one)."""
    nan = np.isnan(values)
    if nan.any():
        return int(np.argmax(nan))
    return int(np.argmin(values) if METRICS[metric].higher_is_better else np.argmax(values))


def _sequential_sum(start: float, values: np.ndarray) -> float:
    """start + v0 + v1 + ... left to right (np.sum pairs terms up, which would depend on grouping)."""
    return float(np.add.accumulate(np.concatenate(([start], values)))[-1])


def _pairs(values: List[Optional[float]]) -> List[Tuple[Optional[float], Optional[float]]]:
    padded = values + [None] if len(values) % 2 else values
    return list(zip(padded[::2], padded[1::2]))


class SequenceStats:
    """Everything the result needs, folded step by step from the records."""

    def __init__(self, outputs: Sequence[str], states: Sequence[str], gates: Sequence[Gate],
                 timeline_tensor: Optional[str], timeline_points: int = 512) -> None:
        self.outputs = {n: _TensorRun(n, "output") for n in outputs}
        self.states = {n: _TensorRun(n, "state") for n in states}
        self.tallies = [_Tally(g, n) for n in outputs for g in gates_for(n, gates)]
        self.steps = 0
        self.first_gate_failure: Optional[int] = None
        self.first_decision_difference: Optional[int] = None
        self.decisions = 0
        self.agreements = 0
        self.timeline = TimelineBuilder("cosine", timeline_tensor, timeline_points) if timeline_tensor else None

    def fold(self, record: Dict[str, Any]) -> Tuple[List[str], bool]:
        """Add one step; returns (gates failed at this step, whether the decision differs)."""
        return self.fold_many([record])[0]

    def fold_many(self, records: Sequence[Dict[str, Any]]) -> List[Tuple[List[str], bool]]:
        """Add several consecutive steps; per step (gates failed, whether the decision differs)."""
        if not records:
            return []
        steps = [int(r["step"]) for r in records]
        self.steps += len(records)
        outputs = [r.get("outputs") or {} for r in records]
        states = [r.get("states") or {} for r in records]
        for name, run in self.outputs.items():
            rows = [(s, o[name]) for s, o in zip(steps, outputs) if name in o]
            run.add_many([s for s, _ in rows], [m for _, m in rows])
        for name, run in self.states.items():
            rows = [(s, o[name]) for s, o in zip(steps, states) if name in o]
            run.add_many([s for s, _ in rows], [m for _, m in rows])
        failed: List[List[str]] = [[] for _ in records]
        for tally in self.tallies:
            self._tally(tally, steps, outputs, failed)
        events: List[Tuple[List[str], bool]] = []
        for i, record in enumerate(records):
            step = steps[i]
            if failed[i] and self.first_gate_failure is None:
                self.first_gate_failure = step
            differs = False
            decision = record.get("decision")
            if decision is not None:
                self.decisions += 1
                differs = decision[0] != decision[1]
                if differs and self.first_decision_difference is None:
                    self.first_decision_difference = step
                self.agreements += 0 if differs else 1
            if self.timeline is not None:
                drift: Optional[float] = None
                for metrics in states[i].values():
                    value = metrics.get("cosine")
                    if value is not None and (drift is None or worse("cosine", float(value), drift)):
                        drift = float(value)
                value = (outputs[i].get(self.timeline.tensor) or {}).get("cosine")
                self.timeline.add(step, None if value is None else float(value), drift)
            events.append((failed[i], differs))
        return events

    def _tally(self, tally: _Tally, steps: List[int], outputs: List[Dict[str, Dict[str, Any]]],
               failed: List[List[str]]) -> None:
        metric = tally.gate.metric
        index = [i for i, o in enumerate(outputs) if (o.get(tally.tensor) or {}).get(metric) is not None]
        if not index:
            return
        values = np.array([float(outputs[i][tally.tensor][metric]) for i in index])
        tally.evaluated += len(index)
        j = _worst_index(metric, values)
        if tally.worst is None or worse(metric, float(values[j]), tally.worst):
            tally.worst = float(values[j])
        with np.errstate(invalid="ignore"):  # NaN compares False: a NaN value fails its gate
            ok = values >= tally.gate.threshold if METRICS[metric].higher_is_better else values <= tally.gate.threshold
        mismatch = np.array([bool(outputs[i][tally.tensor].get("nonfinite_mismatch")) for i in index])
        description = f"{tally.gate.describe()} on {tally.tensor}"
        for k in np.flatnonzero(~ok | mismatch):
            i = index[int(k)]
            tally.failed += 1
            failed[i].append(description)
            if len(tally.examples) < MAX_EXAMPLES:
                tally.examples.append(f"step {steps[i]}")

    # ---- read-out --------------------------------------------------------------------------------
    def output_summaries(self) -> List[StepSummary]:
        return [run.summary() for run in self.outputs.values() if run.last]

    def state_summaries(self) -> List[StepSummary]:
        return [run.summary() for run in self.states.values() if run.last]

    def gate_outcomes(self) -> List[GateOutcome]:
        return [t.outcome() for t in self.tallies]

    def agreement(self) -> Optional[float]:
        return self.agreements / self.decisions if self.decisions else None

    def timeline_result(self) -> Optional[Timeline]:
        return self.timeline.result(with_drift=bool(self.states)) if self.timeline is not None else None
