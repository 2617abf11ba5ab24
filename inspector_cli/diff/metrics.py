"""Tensor-diff metrics: definitions, one registry of names, and the per-pair computation.

Everything is pure numpy. A comparison of reference `a` with candidate `b` is reduced to sums
(`PairStats`) from which every metric is derived; sums of several samples merge exactly, so the
same code gives per-sample values and exact data-set-level values (cosine over all samples as one
vector, RMSE over all elements, ...). Definitions, with their edge cases, are in the README.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

REL_EPSILON = 1e-12
"""Floor of |a| in relative errors, so that a_i = 0 does not divide by zero."""
REL_SIG_FRACTION = 1e-3
"""The significant relative error counts only elements with |a| >= this fraction of the sample's
max |a|: elements whose reference is ~0 (where |b - a| / |a| is 1e+12 and says nothing) drop out."""
KL_EPSILON = 1e-12
"""Floor of probabilities in KL divergence, so that q_i = 0 gives a large but finite term."""
DISTRIBUTION_TOLERANCE = 2e-2
"""Rows summing to 1 within this, with values in [0, 1], are taken as distributions already (the
loose bound admits quantised softmax outputs); such rows are renormalised to sum to 1."""
DEFAULT_TOPK: Tuple[int, ...] = (1, 5)


@dataclass(frozen=True)
class MetricSpec:
    """A metric's name, its label and which direction is better."""

    name: str
    label: str
    higher_is_better: bool
    description: str


METRICS: Dict[str, MetricSpec] = {m.name: m for m in [
    MetricSpec("cosine", "cosine", True, "cosine similarity of a and b as flat vectors"),
    MetricSpec("max_abs", "max abs err", False, "max |b - a|"),
    MetricSpec("mean_abs", "mean abs err", False, "mean |b - a|"),
    MetricSpec("rmse", "RMSE", False, "sqrt(mean (b - a)^2)"),
    MetricSpec("max_rel", "max rel err", False, "max |b - a| / max(|a|, 1e-12)"),
    MetricSpec("mean_rel", "mean rel err", False, "mean |b - a| / max(|a|, 1e-12)"),
    MetricSpec("max_rel_sig", "max rel err (|a| >= 1e-3 max|a|)", False,
               "max |b - a| / |a| over the elements with |a| >= 1e-3 * max|a| of the sample (others ignored)"),
    MetricSpec("mean_rel_sig", "mean rel err (|a| >= 1e-3 max|a|)", False,
               "mean |b - a| / |a| over the elements with |a| >= 1e-3 * max|a| of the sample (others ignored)"),
    MetricSpec("sqnr", "SQNR dB", True, "10 log10(sum a^2 / sum (b - a)^2)"),
    MetricSpec("kl", "KL div", False, "mean over rows of KL(P_a || P_b) on the last axis"),
    MetricSpec("top1", "top-1 overlap", True, "mean over rows of |top1(a) ∩ top1(b)| on the last axis"),
    MetricSpec("top5", "top-5 overlap", True, "mean over rows of |top5(a) ∩ top5(b)| / 5 on the last axis"),
]}
ELEMENT_METRICS = ("cosine", "max_abs", "mean_abs", "rmse", "max_rel", "mean_rel", "max_rel_sig", "mean_rel_sig", "sqnr")


def topk_metric_name(k: int) -> str:
    return f"top{k}"


@dataclass
class PairStats:
    """Sufficient statistics of one comparison (or of several, merged). All sums in float64."""

    count: int = 0
    """Elements compared: positions finite in both tensors."""
    sum_abs: float = 0.0
    sum_sq_err: float = 0.0
    max_abs: float = 0.0
    sum_rel: float = 0.0
    max_rel: float = 0.0
    max_rel_sig: float = 0.0
    sum_rel_sig: float = 0.0
    count_rel_sig: int = 0
    """Relative error over the significant elements only: |a| >= REL_SIG_FRACTION * max|a| (per sample)."""
    dot: float = 0.0
    sum_a2: float = 0.0
    sum_b2: float = 0.0
    nan_a: int = 0
    inf_a: int = 0
    nan_b: int = 0
    inf_b: int = 0
    nonfinite_mismatch: int = 0
    """Positions where a and b disagree in being non-finite: a NaN or Inf against a finite value, NaN
    against Inf, +Inf against -Inf. Any such position makes the element metrics unbounded (see
    `metrics`). A NaN on both sides is not counted here but in `nan_same`."""
    inf_same: int = 0
    """Positions where a and b hold the same +Inf or -Inf (a causal mask): equal, left out of the sums."""
    nan_same: int = 0
    """Positions where a and b both hold NaN: left out of the sums, and neither agreement nor a
    mismatch here. What they mean is the caller's rule (compare/outputs.nonfinite_findings): agreement
    against saved outputs that expect the NaN (golden mode), a finding of its own between two models."""
    kl_sum: float = 0.0
    kl_rows: int = 0
    kl_mode: Optional[str] = None
    topk_hits: Dict[int, float] = field(default_factory=dict)
    topk_rows: Dict[int, int] = field(default_factory=dict)
    samples: int = 0
    items: int = 0
    """Values compared for equality where no metric applies (strings, labels, map keys: diff/values.py)."""
    items_unequal: int = 0
    first_unequal: Optional[Tuple[str, str, str]] = None
    """The first of them that differs: (where inside the value, e.g. '[5]', A's value, B's value)."""

    def merge(self, other: "PairStats") -> "PairStats":
        """Add another comparison's sums into this one (exact, order-independent up to rounding)."""
        for name in _MAX_FIELDS:
            setattr(self, name, max(getattr(self, name), getattr(other, name)))
        for name in _SUM_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.kl_mode and self.kl_mode and other.kl_mode != self.kl_mode:
            self.kl_mode = "mixed"
        else:
            self.kl_mode = self.kl_mode or other.kl_mode
        self.first_unequal = self.first_unequal or other.first_unequal
        for mine, theirs in ((self.topk_hits, other.topk_hits), (self.topk_rows, other.topk_rows)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        return self

    def metrics(self, allow_nonfinite: bool = False, *, nan_is_mismatch: bool = False) -> Dict[str, Optional[float]]:
        """Every metric derived from the sums; None where a metric does not apply.

        NaN/Inf never reads as agreement with a finite value: with a non-finite mismatch (a NaN or an
        Inf the other side does not hold at that position) cosine is NaN, SQNR -inf and every error
        metric +inf, so every gate fails. `allow_nonfinite` reads the metrics over the positions
        finite on both sides instead (the mismatch stays counted in `nonfinite()`). Positions holding
        the same Inf, or NaN, on both sides are left out of the sums either way: the metrics are those
        of the finite positions, and `nan_same` says how many NaN both sides share (`nan_is_mismatch`:
        they make the metrics unbounded too, for callers where any NaN is a fault)."""
        if (self.nonfinite_mismatch or (nan_is_mismatch and self.nan_same)) and not allow_nonfinite:
            return self._unbounded()
        if self.items and not self.count:  # strings, labels: equality only (`items_unequal`), no metric
            return {name: None for name in self._unbounded()}
        n = self.count
        values: Dict[str, Optional[float]] = {
            "cosine": _cosine(self.dot, self.sum_a2, self.sum_b2, self.sum_sq_err),
            "max_abs": self.max_abs,
            "mean_abs": self.sum_abs / n if n else 0.0,
            "rmse": math.sqrt(self.sum_sq_err / n) if n else 0.0,
            "max_rel": self.max_rel,
            "mean_rel": self.sum_rel / n if n else 0.0,
            # None when no element is significant (an all-zero reference): undefined, not 0
            "max_rel_sig": self.max_rel_sig if self.count_rel_sig else None,
            "mean_rel_sig": self.sum_rel_sig / self.count_rel_sig if self.count_rel_sig else None,
            "sqnr": _sqnr(self.sum_a2, self.sum_sq_err),
            "kl": self.kl_sum / self.kl_rows if self.kl_rows else None,
        }
        for k in sorted(set(self.topk_rows) | set(DEFAULT_TOPK)):
            rows = self.topk_rows.get(k, 0)
            values[topk_metric_name(k)] = self.topk_hits.get(k, 0.0) / rows if rows else None
        return values

    def _unbounded(self) -> Dict[str, Optional[float]]:
        """The metrics of a comparison with a non-finite mismatch: nothing agrees."""
        values: Dict[str, Optional[float]] = {name: math.inf for name in ELEMENT_METRICS}
        values["cosine"], values["sqnr"] = math.nan, -math.inf
        values["kl"] = None  # not computed over a non-finite row
        for k in sorted(set(self.topk_rows) | set(DEFAULT_TOPK)):
            values[topk_metric_name(k)] = None
        return values

    def nonfinite(self) -> Dict[str, int]:
        return {"nan_a": self.nan_a, "inf_a": self.inf_a, "nan_b": self.nan_b, "inf_b": self.inf_b,
                "mismatch": self.nonfinite_mismatch, "inf_same": self.inf_same, "nan_same": self.nan_same}


_MAX_FIELDS = ("max_abs", "max_rel", "max_rel_sig")
_SUM_FIELDS = tuple(f.name for f in fields(PairStats)
                    if f.name not in _MAX_FIELDS + ("kl_mode", "first_unequal", "topk_hits", "topk_rows"))
"""PairStats.merge's fields by how they merge (dataclasses.fields costs microseconds a call: once per layer
pair of every sample)."""


def _cosine(dot: float, a2: float, b2: float, sq_err: float) -> float:
    if a2 == 0.0 and b2 == 0.0:
        return 1.0
    if a2 == 0.0 or b2 == 0.0:
        return 0.0
    if sq_err == 0.0:
        return 1.0  # identical: avoid 1 - 1 ulp from the square roots
    return float(min(1.0, max(-1.0, dot / (math.sqrt(a2) * math.sqrt(b2)))))


def _sqnr(a2: float, sq_err: float) -> float:
    if sq_err == 0.0:
        return math.inf
    if a2 == 0.0:
        return -math.inf
    return 10.0 * math.log10(a2 / sq_err)


def shapes_compatible(shape_a: Sequence[int], shape_b: Sequence[int]) -> bool:
    """Equal shapes, or equal after dropping size-1 dimensions ([1, 1000] vs [1000])."""
    if tuple(shape_a) == tuple(shape_b):
        return True
    return [d for d in shape_a if d != 1] == [d for d in shape_b if d != 1]


def compare_arrays(a: np.ndarray, b: np.ndarray, *, topk: Sequence[int] = DEFAULT_TOPK,
                   distribution: bool = True) -> PairStats:
    """Sums of one comparison of reference `a` and candidate `b` (shapes must be compatible).

    Values are widened to float64 (fp16, bf16-as-float, integers and bools alike). Positions where
    either side is NaN/Inf are left out of the error sums and counted (`count_nonfinite`): the same
    Inf on both sides (a mask) agrees (`inf_same`), NaN on both sides is `nan_same`, anything else
    (a NaN or Inf against a finite value or another non-finite value) is a `nonfinite_mismatch`.
    `distribution` adds KL and top-k on the last axis (floating tensors only).
    """
    stats = PairStats(samples=1)
    arr_a, arr_b = np.asarray(a), np.asarray(b)
    a64 = arr_a.astype(np.float64, copy=False).reshape(-1)
    b64 = arr_b.astype(np.float64, copy=False).reshape(-1)
    # Fast path: with every value finite (the usual case) the sums are those of the exact path
    # below, computed with the same numpy reductions in the same order (hence the same bits), but
    # without the four isfinite passes and with one scratch buffer instead of a dozen temporaries.
    # A NaN or Inf anywhere makes a.a or b.b non-finite, which sends the pair to the exact path.
    all_finite = _accumulate_finite(stats, a64, b64)
    if not all_finite:
        stats = PairStats(samples=1)
        finite_a = np.isfinite(a64)
        finite_b = np.isfinite(b64)
        all_finite = bool(finite_a.all()) and bool(finite_b.all())
        if not all_finite:
            both = count_nonfinite(stats, a64, b64, finite_a, finite_b)
            # the floor of the significant relative error comes from every finite reference value
            peak = float(np.abs(a64[finite_a]).max()) if finite_a.any() else 0.0
            a64, b64 = a64[both], b64[both]
            _accumulate_elements(stats, a64, b64, peak=peak)
        else:
            _accumulate_elements(stats, a64, b64)
    float_inputs = np.issubdtype(arr_a.dtype, np.floating) and np.issubdtype(arr_b.dtype, np.floating)
    if distribution and float_inputs and arr_a.ndim >= 1 and stats.nonfinite_mismatch == 0 and all_finite:
        # a64/b64 hold exactly arr.astype(float64): reuse them instead of widening again
        _accumulate_distribution(stats, a64.reshape(arr_a.shape), b64.reshape(arr_b.shape), topk)
    return stats


def count_nonfinite(stats: PairStats, a: np.ndarray, b: np.ndarray, finite_a: np.ndarray,
                    finite_b: np.ndarray) -> np.ndarray:
    """Count the non-finite positions of flat `a` and `b` into `stats` (`nan_*`, `inf_*`,
    `inf_same`, `nan_same`, `nonfinite_mismatch`); returns the positions finite on both sides."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    stats.nan_a, stats.nan_b = int(np.count_nonzero(nan_a)), int(np.count_nonzero(nan_b))
    stats.inf_a = int(a.size - np.count_nonzero(finite_a)) - stats.nan_a
    stats.inf_b = int(b.size - np.count_nonzero(finite_b)) - stats.nan_b
    both = finite_a & finite_b
    stats.inf_same = int(np.count_nonzero(np.isinf(a) & (a == b)))  # the same +Inf or -Inf; NaN == NaN is False
    stats.nan_same = int(np.count_nonzero(nan_a & nan_b))
    stats.nonfinite_mismatch = int(a.size - np.count_nonzero(both) - stats.inf_same - stats.nan_same)
    return both


def _accumulate_finite(stats: PairStats, a: np.ndarray, b: np.ndarray) -> bool:
    """`_accumulate_elements` when every value is finite, in one scratch buffer plus one for the
    relative error; False (stats untouched) when a value is NaN/Inf or a square sum overflows."""
    if a.size == 0:
        return False
    with np.errstate(all="ignore"):  # an overflow here only means: take the exact path
        sum_a2 = float(a @ a)
        sum_b2 = float(b @ b)
    if not (math.isfinite(sum_a2) and math.isfinite(sum_b2)):
        return False
    diff = np.subtract(b, a)
    stats.count = int(a.size)
    stats.sum_sq_err = float(diff @ diff)
    stats.dot = float(a @ b)
    stats.sum_a2, stats.sum_b2 = sum_a2, sum_b2
    abs_diff = np.abs(diff, out=diff)
    stats.max_abs = float(abs_diff.max())
    stats.sum_abs = float(abs_diff.sum())
    rel = np.abs(a)
    peak = float(rel.max())
    significant = rel >= np.float64(REL_SIG_FRACTION * peak)  # before |a| is overwritten by |b - a| / |a|
    np.maximum(rel, REL_EPSILON, out=rel)
    np.divide(abs_diff, rel, out=rel)
    stats.max_rel = float(rel.max())
    stats.sum_rel = float(rel.sum())
    if peak > 0.0:  # an all-zero reference has no significant element
        sig = rel[significant]
        stats.max_rel_sig, stats.sum_rel_sig, stats.count_rel_sig = float(sig.max()), float(sig.sum()), int(sig.size)
    return True


def _accumulate_elements(stats: PairStats, a: np.ndarray, b: np.ndarray, *, peak: Optional[float] = None) -> None:
    """Element sums of finite `a`, `b`; `peak` = max |a| over the sample's finite reference values
    (default: over `a`), the scale of the significant relative error's floor."""
    stats.count = int(a.size)
    if a.size == 0:
        return
    diff = b - a
    abs_diff = np.abs(diff)
    stats.max_abs = float(abs_diff.max())
    stats.sum_abs = float(abs_diff.sum())
    with np.errstate(over="ignore", invalid="ignore"):  # squares past float64's range are inf, checked by callers
        stats.sum_sq_err = float(diff @ diff)
        stats.dot = float(a @ b)
        stats.sum_a2 = float(a @ a)
        stats.sum_b2 = float(b @ b)
    abs_a = np.abs(a)
    rel = abs_diff / np.maximum(abs_a, REL_EPSILON)
    stats.max_rel = float(rel.max())
    stats.sum_rel = float(rel.sum())
    accumulate_rel_sig(stats, abs_a, rel, float(abs_a.max()) if peak is None else peak)


def accumulate_rel_sig(stats: PairStats, abs_a: np.ndarray, rel: np.ndarray, peak: float) -> None:
    """Add the relative errors `rel` of the significant elements (|a| >= REL_SIG_FRACTION * peak)
    into `stats`; a zero peak (all-zero reference) has no significant element."""
    floor = REL_SIG_FRACTION * peak
    if not floor > 0.0:
        return
    # np.float64: |a| in float32 is compared exactly (a Python float would be rounded to float32)
    sig = rel[abs_a >= np.float64(floor)]
    if sig.size:
        stats.max_rel_sig = max(stats.max_rel_sig, float(sig.max()))
        stats.sum_rel_sig += float(sig.sum())
        stats.count_rel_sig += int(sig.size)


def _accumulate_distribution(stats: PairStats, a: np.ndarray, b: np.ndarray, topk: Sequence[int]) -> None:
    width = a.shape[-1] if a.ndim else 0
    if width < 2 or a.size == 0:  # a 0-size dimension (e.g. no detections): no row to compare
        return
    rows_a = a.reshape(-1, width).astype(np.float64, copy=False)
    rows_b = b.reshape(-1, width).astype(np.float64, copy=False)
    raw = _is_distribution(rows_a) and _is_distribution(rows_b)
    p = _normalise(rows_a) if raw else _softmax(rows_a)
    q = _normalise(rows_b) if raw else _softmax(rows_b)
    # p (log max(p, eps) - log max(q, eps)) where p > 0, else 0: the same element operations as
    # np.where over temporaries, done in two buffers (the sum below sees the same array)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.maximum(p, KL_EPSILON)
        np.log(terms, out=terms)
        log_q = np.maximum(q, KL_EPSILON)
        np.log(log_q, out=log_q)
        np.subtract(terms, log_q, out=terms)
        np.multiply(p, terms, out=terms)
        terms[~(p > 0)] = 0.0
    stats.kl_sum = float(terms.sum())
    stats.kl_rows = rows_a.shape[0]
    stats.kl_mode = "raw" if raw else "softmax"
    for k in topk:
        if width <= k and k > 1:
            continue  # top-k of k or fewer values always overlaps fully: not informative
        top_a = _top_indices(rows_a, k)
        top_b = _top_indices(rows_b, k)
        hits = (top_a[:, :, None] == top_b[:, None, :]).any(axis=2).sum(axis=1) / k
        stats.topk_hits[k] = float(hits.sum())
        stats.topk_rows[k] = rows_a.shape[0]


def _top_indices(rows: np.ndarray, k: int) -> np.ndarray:
    if k == 1:
        return rows.argmax(axis=1)[:, None]
    return np.argpartition(-rows, k - 1, axis=1)[:, :k]


def _is_distribution(rows: np.ndarray) -> bool:
    if rows.min() < 0.0 or rows.max() > 1.0:
        return False
    return bool(np.all(np.abs(rows.sum(axis=1) - 1.0) <= DISTRIBUTION_TOLERANCE))


def _normalise(rows: np.ndarray) -> np.ndarray:
    return rows / rows.sum(axis=1, keepdims=True)


def _softmax(rows: np.ndarray) -> np.ndarray:
    out = np.subtract(rows, rows.max(axis=1, keepdims=True))  # one buffer, the same element operations
    np.exp(out, out=out)
    np.divide(out, out.sum(axis=1, keepdims=True), out=out)
    return out


def metric_value_ok(name: str, value: Optional[float], threshold: float) -> bool:
    """Whether `value` meets a gate on metric `name` (NaN never does)."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return False
    if METRICS[name].higher_is_better:
        return value >= threshold
    return value <= threshold
