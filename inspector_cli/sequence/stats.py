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

from ..diff.gates import Gate, gates_for
from ..diff.metrics import METRICS, metric_value_ok
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

    def add(self, step: int, metrics: Dict[str, Any]) -> None:
        self.last = dict(metrics)
        for name, value in metrics.items():
            if value is None or name not in METRICS:
                continue
            value = float(value)
            previous = self.worst.get(name)
            if previous is None or worse(name, value, previous):
                self.worst[name], self.worst_step[name] = value, step
            if math.isfinite(value):
                self.total[name] = self.total.get(name, 0.0) + value
                self.count[name] = self.count.get(name, 0) + 1

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
        step = int(record["step"])
        self.steps += 1
        outputs: Dict[str, Dict[str, Any]] = record.get("outputs") or {}
        for name, metrics in outputs.items():
            self.outputs[name].add(step, metrics)
        drift: Optional[float] = None
        for name, metrics in (record.get("states") or {}).items():
            self.states[name].add(step, metrics)
            value = metrics.get("cosine")
            if value is not None and (drift is None or worse("cosine", float(value), drift)):
                drift = float(value)
        failed: List[str] = []
        for tally in self.tallies:
            metrics = outputs.get(tally.tensor)
            if metrics is None:
                continue
            value = metrics.get(tally.gate.metric)
            if value is None:
                continue
            tally.evaluated += 1
            value = float(value)
            if tally.worst is None or worse(tally.gate.metric, value, tally.worst):
                tally.worst = value
            if not metric_value_ok(tally.gate.metric, value, tally.gate.threshold) or metrics.get("nonfinite_mismatch"):
                tally.failed += 1
                failed.append(f"{tally.gate.describe()} on {tally.tensor}")
                if len(tally.examples) < MAX_EXAMPLES:
                    tally.examples.append(f"step {step}")
        if failed and self.first_gate_failure is None:
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
            value = (outputs.get(self.timeline.tensor) or {}).get("cosine")
            self.timeline.add(step, None if value is None else float(value), drift)
        return failed, differs

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
