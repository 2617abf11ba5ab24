"""The tensor-diff engine: compare tensor pairs sample by sample and accumulate over a data set.

A `TensorTracker` follows one tensor pair (a model output, or a layer) across samples. Each
sample's arrays are reduced to `PairStats` at once and dropped, so memory does not grow with the
number of samples; the tracker keeps the merged sums (exact data-set values), the worst and mean
of each per-sample metric, and the per-sample gate verdicts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple


from .gates import Gate, gates_for
from .metrics import DEFAULT_TOPK, METRICS, PairStats, metric_value_ok
from .values import layout, reduce_values

MAX_EXAMPLES = 5
"""Failing sample ids kept per gate, as examples for the report."""
ABSOLUTE_GATES = ("max_abs",)
"""Gates a negligible sample still answers to: an absolute bound means what it says at any scale."""


@dataclass
class GateTally:
    gate: Gate
    failed: int = 0
    evaluated: int = 0
    examples: List[str] = field(default_factory=list)
    worst: Optional[float] = None
    excused: int = 0
    """Samples whose value crossed the threshold but passed as negligible (max |b - a| <= the tracker's atol)."""


@dataclass
class TensorTracker:
    """Accumulates one tensor pair over samples."""

    name: str
    name_b: str
    gates: List[Gate] = field(default_factory=list)
    topk: Sequence[int] = DEFAULT_TOPK
    distribution: bool = True
    keep_per_sample: bool = True
    atol: float = 0.0
    """Samples whose max |b - a| is at most this are negligible: rounding noise of tensors near zero
    (the mean of a normalised row, an activation at 1e-8), where cosine, SQNR and relative errors
    measure noise against noise (Swin's LayerNorm mean: cosine 0.1 at |b - a| 6e-8). Such a sample
    passes every gate but max_abs. 0: off (model outputs keep strict gates)."""
    total: PairStats = field(default_factory=PairStats)
    samples: int = 0
    shape_mismatch_samples: int = 0
    dtype_a: str = ""
    dtype_b: str = ""
    shape_a: List[int] = field(default_factory=list)
    shape_b: List[int] = field(default_factory=list)
    _sum: Dict[str, float] = field(default_factory=dict)
    _count: Dict[str, int] = field(default_factory=dict)
    _worst: Dict[str, float] = field(default_factory=dict)
    per_sample: List[dict] = field(default_factory=list)
    tallies: List[GateTally] = field(default_factory=list)
    unequal_samples: int = 0
    """Samples where a value compared for equality (a string, a label, a map key) differs."""
    first_unequal: Optional[Tuple[str, str, str, str]] = None
    """The first such difference: (sample, where inside the value, A's value, B's value)."""

    def __post_init__(self) -> None:
        self.tallies = [GateTally(g) for g in gates_for(self.name, self.gates)]

    def add(self, sample: str, a: Any, b: Any) -> Optional[Dict[str, Optional[float]]]:
        """Compare one sample's pair; returns its metrics (None when shapes or structures differ).
        `a` and `b` are tensors, or any value onnxruntime returns: strings, sequences, maps
        (diff/values.py)."""
        self.samples += 1
        if not self.dtype_a:
            layout_a, layout_b = layout(a), layout(b)
            self.dtype_a, self.dtype_b = layout_a.dtype, layout_b.dtype
            self.shape_a, self.shape_b = list(layout_a.shape), list(layout_b.shape)
        stats = reduce_values(a, b, topk=self.topk, distribution=self.distribution)
        if stats is None:
            self.add_mismatch(sample)
            return None
        return self.add_stats(sample, stats)

    def add_mismatch(self, sample: str) -> None:
        """Record a sample whose two values cannot be compared: shapes (or sequence lengths, key sets) differ."""
        self.shape_mismatch_samples += 1
        self._record_gates(sample, None, shape_mismatch=True, nonfinite_mismatch=0)
        if self.keep_per_sample:
            self.per_sample.append({"sample": sample, "metrics": {}, "nonfinite_mismatch": 0,
                                    "shape_mismatch": True})

    def add_stats(self, sample: str, stats: PairStats) -> Dict[str, Optional[float]]:
        """Fold in one sample already reduced to sums (used by workers that compare remotely)."""
        self.total.merge(stats)
        metrics = stats.metrics()
        for name, value in metrics.items():
            if value is None or name not in METRICS:
                continue
            self._sum[name] = self._sum.get(name, 0.0) + value
            self._count[name] = self._count.get(name, 0) + 1
            previous = self._worst.get(name)
            if previous is None or _worse(name, value, previous):
                self._worst[name] = value
        self._record_gates(sample, metrics, shape_mismatch=False, nonfinite_mismatch=stats.nonfinite_mismatch)
        if stats.items_unequal:
            self.unequal_samples += 1
            if self.first_unequal is None and stats.first_unequal is not None:
                self.first_unequal = (sample, *stats.first_unequal)
        if self.keep_per_sample:
            row = {"sample": sample, "metrics": metrics, "nonfinite_mismatch": stats.nonfinite_mismatch,
                   "shape_mismatch": False}
            if stats.nan_same:
                row["nan_same"] = stats.nan_same
            if stats.items:
                row["unequal"] = stats.items_unequal
            self.per_sample.append(row)
        return metrics

    def _record_gates(self, sample: str, metrics: Optional[Dict[str, Optional[float]]], *,
                      shape_mismatch: bool, nonfinite_mismatch: int) -> None:
        for tally in self.tallies:
            value = None if metrics is None else metrics.get(tally.gate.metric)
            if metrics is not None and value is None and not nonfinite_mismatch:
                continue  # metric undefined for this tensor (e.g. top-5 of 3 classes)
            tally.evaluated += 1
            ok = not shape_mismatch and nonfinite_mismatch == 0 and metric_value_ok(tally.gate.metric, value,
                                                                                    tally.gate.threshold)
            if not ok and nonfinite_mismatch == 0 and tally.gate.metric not in ABSOLUTE_GATES \
                    and self._negligible_sample(metrics):
                tally.excused += 1
                ok = True
            if value is not None and (tally.worst is None or _worse(tally.gate.metric, value, tally.worst)):
                tally.worst = value
            if not ok:
                tally.failed += 1
                if len(tally.examples) < MAX_EXAMPLES:
                    tally.examples.append(sample)

    def _negligible_sample(self, metrics: Optional[Dict[str, Optional[float]]]) -> bool:
        max_abs = None if metrics is None else metrics.get("max_abs")
        return self.atol > 0.0 and max_abs is not None and max_abs <= self.atol

    @property
    def negligible(self) -> bool:
        """Every sample compared, all finite where they should be, and max |b - a| <= atol over all."""
        return (self.atol > 0.0 and self.total.count > 0 and self.shape_mismatch_samples == 0
                and self.total.nonfinite_mismatch == 0 and self.total.max_abs <= self.atol)

    # ---- read-out -------------------------------------------------------------------------------
    def dataset_metrics(self) -> Dict[str, Optional[float]]:
        return self.total.metrics()

    def worst_metrics(self) -> Dict[str, Optional[float]]:
        return {name: self._worst.get(name) for name in self.dataset_metrics()}

    def mean_metrics(self) -> Dict[str, Optional[float]]:
        return {name: (self._sum[name] / self._count[name] if self._count.get(name) else None)
                for name in self.dataset_metrics()}


def _worse(metric: str, value: float, than: float) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(than, float) and math.isnan(than):
        return False
    return value < than if METRICS[metric].higher_is_better else value > than
