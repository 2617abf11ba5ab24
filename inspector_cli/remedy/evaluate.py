"""Targets ('cosine>=0.995') and the evaluator that runs model variants on the samples.

One *run* is one model variant evaluated on every sample (a session build plus one inference per
sample); the engines count runs, because that is what their cost is made of.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..core.runner import RuntimeConfig, Session
from ..core.types import TensorMap
from ..diff.metrics import METRICS, PairStats, metric_value_ok
from ..diff.values import all_finite, reduce_values
from ..errors import UsageError

ACCURACY_METRICS = {"acc1": ">=", "acc5": ">=", "acc1_drop": "<=", "acc5_drop": "<="}
"""Targets on the task's metric, against `--labels`: top-1/top-5 accuracy of the candidate, and its drop from
the reference's accuracy on the same samples (0.01 = one point)."""

_TARGET = re.compile(r"^\s*(?:(?P<output>[^:]+):)?\s*(?P<metric>[a-z0-9_]+)\s*(?P<op>>=|<=)\s*(?P<value>\S+)\s*$")


@dataclass(frozen=True)
class Target:
    """`metric op threshold` on one output (None: every output), measured over all samples at once."""

    metric: str
    op: str
    threshold: float
    output: Optional[str] = None

    @property
    def on_labels(self) -> bool:
        """A target on accuracy against the labels (acc1, acc5 and their drops)."""
        return self.metric in ACCURACY_METRICS

    def holds(self, value: Optional[float]) -> bool:
        if self.on_labels:
            return value is not None and value == value and (
                value >= self.threshold if self.op == ">=" else value <= self.threshold)
        return metric_value_ok(self.metric, value, self.threshold)

    def describe(self) -> str:
        # 12 digits: a target such as cosine>=0.99999996 must not be shown (and keyed) as cosine>=1
        return f"{self.output + ':' if self.output else ''}{self.metric}{self.op}{self.threshold:.12g}"

    def shortfall(self, value: Optional[float]) -> float:
        """How far `value` is from meeting the target (0 when met; large for NaN)."""
        if value is None:
            return 0.0
        if math.isnan(value):
            return 1e9
        gap = self.threshold - value if self.op == ">=" else value - self.threshold
        return max(0.0, float(gap))


def parse_target(text: str) -> Target:
    """'cosine>=0.995', 'top1>=0.99', 'logits:max_abs<=0.1' -> Target (metric names of diff.metrics)."""
    match = _TARGET.match(text)
    if match is None:
        raise UsageError(f"--target '{text}': expected METRIC>=NUMBER or OUTPUT:METRIC<=NUMBER, e.g. cosine>=0.995")
    metric, op = match["metric"], match["op"]
    if metric not in METRICS and metric not in ACCURACY_METRICS:
        raise UsageError(f"--target '{text}': unknown metric '{metric}'",
                         hint=f"metrics: {', '.join([*METRICS, *ACCURACY_METRICS])}")
    expected = ACCURACY_METRICS.get(metric) or (">=" if METRICS[metric].higher_is_better else "<=")
    if op != expected:
        raise UsageError(f"--target '{text}': {metric} is bounded with {expected}")
    try:
        threshold = float(match["value"])
    except ValueError as exc:
        raise UsageError(f"--target '{text}': '{match['value']}' is not a number") from exc
    return Target(metric, op, threshold, match["output"])


@dataclass
class Evaluation:
    """Data-set-level metrics of a candidate against the reference, per output, and its verdict."""

    metrics: Dict[str, Dict[str, Optional[float]]]
    nonfinite_samples: List[str]
    latency_ms: float
    """Median wall time of one inference over the samples."""
    shortfall: float = 0.0
    meets: bool = False
    partial: int = 0
    """Stopped early: the samples run before a target could no longer hold (0: every sample ran). The
    metrics are then those of these samples; `meets` is False."""

    def value(self, target: Target) -> Optional[float]:
        """The worst value of the target's metric over the outputs it applies to."""
        values = [m.get(target.metric) for name, m in self.metrics.items()
                  if target.output is None or target.output == name]
        values = [v for v in values if v is not None]
        if not values:
            return None
        return min(values) if target.op == ">=" else max(values)

    def summary(self, targets: Sequence[Target]) -> Dict[str, Optional[float]]:
        return {t.describe(): self.value(t) for t in targets}


@dataclass
class Evaluator:
    """Runs model variants on `samples` and compares their outputs with `reference` outputs."""

    samples: Sequence[TensorMap]
    sample_ids: Sequence[str]
    targets: Sequence[Target]
    runtime: RuntimeConfig = RuntimeConfig()
    reference: List[TensorMap] = field(default_factory=list)
    extra: Any = None
    """The `label_binding.LabelBinding` accuracy targets are measured with (None without labels)."""
    runs: int = 0
    inferences: int = 0
    session_builds: int = 0
    seconds: float = 0.0

    def outputs(self, model: "bytes | str", label: str = "model",
                stop: Optional[Callable[[int, TensorMap], bool]] = None) -> List[TensorMap]:
        """All outputs of `model` on every sample (counts one run); `stop(k, outputs)` True after sample k
        ends the run there (the outputs so far are returned)."""
        start = time.perf_counter()
        session = Session(model, self.runtime, label=label)
        self.session_builds += 1
        self.runs += 1
        results: List[TensorMap] = []
        self._times: List[float] = []
        for sample_id, feeds in zip(self.sample_ids, self.samples):
            t0 = time.perf_counter()
            results.append(session.run(feeds, sample=sample_id))
            self._times.append(time.perf_counter() - t0)
            self.inferences += 1
            if stop is not None and len(results) < len(self.samples) and stop(len(results) - 1, results[-1]):
                break
        self.seconds += time.perf_counter() - start
        return results

    def set_reference(self, model: "bytes | str") -> None:
        self.reference = self.outputs(model, label="reference")

    def evaluate(self, model: "bytes | str", label: str = "candidate", early_stop: bool = False) -> Evaluation:
        """Metrics of `model` against the reference, with the targets' verdict. `early_stop`: stop as soon as a
        countable target (top1/top5 agreement, accuracy against labels) can no longer hold (early_stop.py)."""
        from .early_stop import miss_counter

        stop = miss_counter(self) if early_stop else None
        candidate = self.outputs(model, label=label, stop=stop)
        latency = float(np.median(self._times)) * 1000.0 if self._times else 0.0
        result = self.judge(candidate, latency)
        if len(candidate) < len(self.samples):
            result.partial, result.meets = len(candidate), False
        return result

    def judge(self, candidate: Sequence[Mapping[str, np.ndarray]], latency_ms: float = 0.0) -> Evaluation:
        stats: Dict[str, PairStats] = {}
        bad: List[str] = []
        unmatched: set = set()
        for sample_id, ref, cand in zip(self.sample_ids, self.reference, candidate):  # a partial run: its samples
            for name, value in ref.items():
                # any value onnxruntime returns: strings compared for equality, sequences and maps by the
                # numbers inside (diff/values.py); a structure that differs is no match at all
                pair = reduce_values(value, cand[name])
                if pair is None:
                    unmatched.add(name)
                    continue
                stats[name] = stats[name].merge(pair) if name in stats else pair
                if not all_finite(cand[name]) and sample_id not in bad:
                    bad.append(sample_id)
        metrics = {name: s.metrics() for name, s in stats.items()}
        on_labels = any(t.on_labels for t in self.targets)
        if on_labels:
            self._add_accuracy(metrics, candidate)
        result = Evaluation(metrics, bad, latency_ms)
        # a changed label or string output misses agreement targets whatever the metrics say; against the
        # labels, a changed prediction is what the accuracy counts
        unequal = not on_labels and (any(s.items_unequal for s in stats.values()) or bool(unmatched))
        result.shortfall = sum(t.shortfall(result.value(t)) for t in self.targets) + (1e6 if bad else 0.0) + (
            1e3 if unequal else 0.0)
        # a changed label or string output misses the targets whatever the metrics say
        result.meets = not bad and not unequal and all(t.holds(result.value(t)) for t in self.targets)
        return result

    def _add_accuracy(self, metrics: Dict[str, Dict[str, Optional[float]]],
                      candidate: Sequence[Mapping[str, Any]]) -> None:
        """acc1/acc5 of the candidate and their drops from the reference's, on the bound output."""
        from ..errors import UsageError as _Usage
        from .label_binding import accuracy

        binding = self.extra
        if binding is None:
            raise _Usage("--target acc1/acc5: give --labels FILE (the accuracy is measured against them)")
        row = metrics.setdefault(binding.output, {})
        for k in binding.ks:
            mine = accuracy(binding, candidate, self.sample_ids, k)
            theirs = accuracy(binding, self.reference[:len(candidate)], self.sample_ids, k)  # the same samples
            row[f"acc{k}"] = mine
            row[f"acc{k}_drop"] = None if mine is None or theirs is None else theirs - mine
