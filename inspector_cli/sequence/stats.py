"""Running summaries over steps, rebuilt from per-step records alone (so a resumed run is exact).

A step record is the JSONL line of one step: `{"step": k, "outputs": {name: metrics},
"states": {name: metrics}, "decision": [a, b] or null, "nonfinite": {...}}`. `SequenceStats.fold`
updates worst/mean/last per tensor, gate tallies, the first failing step, decision agreement and
a bounded time-line; nothing grows with the number of steps except the time-line's fixed budget.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..diff.gates import Gate, gates_for
from ..diff.metrics import METRICS
from ..results.base import GateOutcome
from ..results.sequence import StepSummary, Timeline
from .batch import BlockColumns, columns_from_rows
from .fused import ELEMENT, FusedBlock
from .timeline import _HIGHER, TimelineBuilder, worse

MAX_EXAMPLES = 5


@dataclass
class _TensorRun:
    tensor: str
    role: str
    worst: Dict[str, float] = field(default_factory=dict)
    worst_step: Dict[str, int] = field(default_factory=dict)
    total: Dict[str, float] = field(default_factory=dict)
    count: Dict[str, int] = field(default_factory=dict)
    last: Dict[str, Optional[float]] = field(default_factory=dict)
    nonfinite: Dict[str, int] = field(default_factory=dict)
    """Element counts summed over the steps (nonfinite_a/_b, nonfinite_mismatch, nonfinite_same),
    plus 'steps' with a mismatch and 'first_step' (the first of them)."""

    def _add_counts(self, steps: Sequence[int], columns: BlockColumns) -> None:
        for key in ("nonfinite_a", "nonfinite_b", "nonfinite_mismatch", "nonfinite_same"):
            column = columns.counts.get(key)
            if column is not None and any(column):
                self.nonfinite[key] = self.nonfinite.get(key, 0) + int(sum(column))
        mismatch = columns.counts.get("nonfinite_mismatch")
        if mismatch is not None and any(mismatch):
            hits = [i for i, value in enumerate(mismatch) if value]
            self.nonfinite["steps"] = self.nonfinite.get("steps", 0) + len(hits)
            self.nonfinite.setdefault("first_step", int(steps[hits[0]]))

    def add_columns(self, steps: Sequence[int], columns: BlockColumns) -> None:
        """Fold a block's metrics: the same worst (first occurrence) and the same sequential sums
        as one step at a time, so results do not depend on how steps were grouped."""
        last = columns.size - 1 if columns.present is None else \
            max((i for i, present in enumerate(columns.present) if present), default=-1)
        if last < 0:
            return
        self._add_counts(steps, columns)
        self.last = columns.row(last)
        names = [name for name in METRICS if name in columns.values]
        if columns.present is None and not any(None in columns.values[name] for name in names):
            self._add_matrix(steps, names, np.array([columns.values[name] for name in names], dtype=np.float64))
            return
        for name in names:
            column = columns.values.get(name)
            if column is None:
                continue
            if None in column:
                index = [i for i, value in enumerate(column) if value is not None]
                values = np.array([float(column[i]) for i in index])
            else:  # the usual block: every step has the metric, one column, one conversion
                index = range(len(column))
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

    def _add_matrix(self, steps: Sequence[int], names: List[str], values: np.ndarray) -> None:
        """The fold above for every metric at once (one row per metric, one column per step): the same
        first worst, and the same left-to-right sums (a non-finite value adds 0.0, which leaves a sum
        unchanged, instead of being skipped)."""
        nan = np.isnan(values)
        sign = np.array([-1.0 if _HIGHER[name] else 1.0 for name in names])[:, None]
        with np.errstate(invalid="ignore"):
            index = np.where(nan.any(axis=1), nan.argmax(axis=1), (values * sign).argmax(axis=1)).tolist()
        finite = np.isfinite(values)
        counts = finite.sum(axis=1).tolist()
        starts = np.array([[self.total.get(name, 0.0)] for name in names])
        totals = np.add.accumulate(np.concatenate((starts, np.where(finite, values, 0.0)), axis=1), axis=1)[:, -1].tolist()
        for row, name in enumerate(names):
            j = index[row]
            value = float(values[row, j])
            previous = self.worst.get(name)
            if previous is None or worse(name, value, previous):
                self.worst[name], self.worst_step[name] = value, int(steps[j])
            if counts[row]:
                self.total[name] = totals[row]
                self.count[name] = self.count.get(name, 0) + int(counts[row])

    def add_fused(self, steps: Sequence[int], values: np.ndarray) -> None:
        """Fold a fused block's metrics of this tensor ([len(ELEMENT), steps], all present)."""
        self.last = dict(zip(ELEMENT, values[:, -1].tolist()))
        self._add_matrix(steps, list(ELEMENT), values)

    def summary(self) -> StepSummary:
        mean = {k: self.total[k] / self.count[k] for k in self.count if self.count[k]}
        for k, value in self.worst.items():
            # a step with NaN/Inf disagreement (cosine NaN, an error +inf, SQNR -inf) makes the mean
            # that too: the finite steps' mean alone would read as agreement
            if not np.isfinite(value) and not (value == np.inf and METRICS[k].higher_is_better):
                mean[k] = value
        return StepSummary(self.tensor, self.role, dict(self.worst), dict(self.worst_step), mean, dict(self.last),
                           nonfinite=dict(self.nonfinite))


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


def _worst_index(metric: str, values: np.ndarray) -> int:
    """Index of the first worst value (the first NaN when there is one)."""
    nan = np.isnan(values)
    if nan.any():
        return int(np.argmax(nan))
    return int(np.argmin(values) if METRICS[metric].higher_is_better else np.argmax(values))


def _sequential_sum(start: float, values: np.ndarray) -> float:
    """start + v0 + v1 + ... left to right (np.sum pairs terms up, which would depend on grouping)."""
    return float(np.add.accumulate(np.concatenate(([start], values)))[-1])


class SequenceStats:
    """Everything the result needs, folded step by step from the records."""

    def __init__(self, outputs: Sequence[str], states: Sequence[str], gates: Sequence[Gate],
                 timeline_tensor: Optional[str], timeline_points: int = 512, allow_nonfinite: bool = False) -> None:
        self.allow_nonfinite = allow_nonfinite
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
        """Add several consecutive steps' records (JSONL lines read back); per step (gates failed,
        whether the decision differs). The same fold as a live block's columns."""
        if not records:
            return []
        outputs = [r.get("outputs") or {} for r in records]
        states = [r.get("states") or {} for r in records]
        return self.fold_columns([int(r["step"]) for r in records],
                                 {n: columns_from_rows([o.get(n) for o in outputs]) for n in self.outputs},
                                 {n: columns_from_rows([s.get(n) for s in states]) for n in self.states},
                                 [r.get("decision") for r in records])

    def fold_columns(self, steps: Sequence[int], outputs: Dict[str, BlockColumns], states: Dict[str, BlockColumns],
                     decisions: Sequence[Optional[Sequence[Any]]]) -> List[Tuple[List[str], bool]]:
        """Add a block of consecutive steps given as columns per tensor (batch.py); per step (gates
        failed, whether the decision (A's, B's) differs)."""
        n = len(steps)
        if not n:
            return []
        self.steps += n
        for name, run in self.outputs.items():
            if name in outputs:
                run.add_columns(steps, outputs[name])
        for name, run in self.states.items():
            if name in states:
                run.add_columns(steps, states[name])
        failed: List[List[str]] = [[] for _ in range(n)]
        for tally in self.tallies:
            if tally.tensor in outputs:
                self._tally(tally, steps, outputs[tally.tensor], failed)
        drift = self._drift(n, states) if self.timeline is not None else None
        line = outputs.get(self.timeline.tensor) if self.timeline is not None else None
        line_values = line.values.get("cosine") if line is not None else None  # None where absent
        events: List[Tuple[List[str], bool]] = []
        for i in range(n):
            step = steps[i]
            if failed[i] and self.first_gate_failure is None:
                self.first_gate_failure = step
            differs = False
            decision = decisions[i] if i < len(decisions) else None
            if decision is not None:
                self.decisions += 1
                differs = decision[0] != decision[1]
                if differs and self.first_decision_difference is None:
                    self.first_decision_difference = step
                self.agreements += 0 if differs else 1
            if self.timeline is not None:
                value = line_values[i] if line_values is not None else None
                self.timeline.add(step, value, drift[i])  # type: ignore[index]
            events.append((failed[i], differs))
        return events

    @staticmethod
    def _drift(n: int, states: Dict[str, BlockColumns]) -> List[Optional[float]]:
        """Per step: the worst state cosine (None without state)."""
        drift: List[Optional[float]] = [None] * n
        for columns in states.values():
            column = columns.values.get("cosine")
            if column is None:
                continue
            for i, value in enumerate(column):
                if value is not None and (drift[i] is None or worse("cosine", value, drift[i])):  # type: ignore[arg-type]
                    drift[i] = value
        return drift

    def _tally(self, tally: _Tally, steps: Sequence[int], columns: BlockColumns, failed: List[List[str]]) -> None:
        column = columns.values.get(tally.gate.metric)
        if column is None:
            return
        index = [i for i, value in enumerate(column) if value is not None]
        if not index:
            return
        values = np.array([float(column[i]) for i in index])
        mismatch_column = columns.counts.get("nonfinite_mismatch")
        mismatch = None if mismatch_column is None or self.allow_nonfinite else np.array([bool(mismatch_column[i]) for i in index])
        self._tally_values(tally, steps, index, values, mismatch, failed)

    @staticmethod
    def _tally_values(tally: _Tally, steps: Sequence[int], index: Sequence[int], values: np.ndarray,
                      mismatch: Optional[np.ndarray], failed: List[List[str]]) -> None:
        """Count the gate over `values` (the metric at the block's steps `index`)."""
        metric = tally.gate.metric
        tally.evaluated += len(index)
        j = _worst_index(metric, values)
        if tally.worst is None or worse(metric, float(values[j]), tally.worst):
            tally.worst = float(values[j])
        with np.errstate(invalid="ignore"):  # NaN compares False: a NaN value fails its gate
            ok = values >= tally.gate.threshold if METRICS[metric].higher_is_better else values <= tally.gate.threshold
        bad = ~ok
        if mismatch is not None:
            bad |= mismatch
        description = f"{tally.gate.describe()} on {tally.tensor}"
        for k in np.flatnonzero(bad).tolist():
            i = index[k]
            tally.failed += 1
            failed[i].append(description)
            if len(tally.examples) < MAX_EXAMPLES:
                tally.examples.append(f"step {steps[i]}")

    def fold_fused(self, steps: Sequence[int], block: FusedBlock) -> List[Tuple[List[str], bool]]:
        """`fold_columns` for a block reduced by fused.py (every metric finite-summed, no counts): the
        same summaries, tallies, decisions and time-line, without leaving numpy per step."""
        n = block.size
        self.steps += n
        position = {name: t for t, name in enumerate(block.names)}
        for runs in (self.outputs, self.states):
            for name, run in runs.items():
                if name in position:
                    run.add_fused(steps, block.values[:, :, position[name]])
        failed: List[List[str]] = [[] for _ in range(n)]
        for tally in self.tallies:
            if tally.tensor in position and tally.gate.metric in ELEMENT:
                self._tally_values(tally, steps, range(n),
                                   block.values[ELEMENT.index(tally.gate.metric), :, position[tally.tensor]], None, failed)
        if self.first_gate_failure is None:
            self.first_gate_failure = next((steps[i] for i in range(n) if failed[i]), None)
        differs = block.differs()
        if differs is not None:
            hits = np.flatnonzero(differs).tolist()
            self.decisions += n
            self.agreements += n - len(hits)
            if hits and self.first_decision_difference is None:
                self.first_decision_difference = steps[hits[0]]
        if self.timeline is not None:
            cosine = block.values[0]
            line = position.get(self.timeline.tensor)
            held = [position[name] for name in self.states if name in position]
            self.timeline.add_many(steps, cosine[:, line].tolist() if line is not None else [None] * n,
                                   cosine[:, held].min(axis=1).tolist() if held else [None] * n,
                                   clean=line is not None and bool(held))  # fused values are never NaN
        return list(zip(failed, differs.tolist() if differs is not None else [False] * n))

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
