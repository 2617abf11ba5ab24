"""Per-step metrics of one tensor pair, the step's decision, and the flags the loop reads from them."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np

from ..diff.metrics import PairStats, _accumulate_elements, compare_arrays, shapes_compatible

KEEP = ("cosine", "max_abs", "mean_abs", "rmse", "max_rel", "sqnr", "top1", "top5", "kl")
DISTRIBUTION = ("kl", "top1", "top5")


def step_metrics(a: np.ndarray, b: np.ndarray, distribution: bool = False,
                 allow_nonfinite: bool = False) -> Dict[str, Any]:
    """The kept metrics of one pair at one step (None values dropped), with non-finite counts.

    Element metrics only by default: top-1 agreement is the step's decision, and KL/top-k on the
    last axis cost more than a small streaming model's inference."""
    if not shapes_compatible(a.shape, b.shape):
        return {"shape_mismatch": 1}
    stats = None if distribution else _finite_element_stats(a, b)
    if stats is None:
        stats = compare_arrays(a, b, distribution=distribution)
    # a step's NaN is a fault even where both models hold it (the decode cannot go on from it)
    values = stats.metrics(allow_nonfinite, nan_is_mismatch=True)
    out: Dict[str, Any] = {k: values[k] for k in KEEP if values.get(k) is not None}
    if stats.nonfinite_mismatch or stats.nan_same:
        out["nonfinite_mismatch"] = stats.nonfinite_mismatch + stats.nan_same
    if stats.nan_a or stats.inf_a:
        out["nonfinite_a"] = stats.nan_a + stats.inf_a
    if stats.nan_b or stats.inf_b:
        out["nonfinite_b"] = stats.nan_b + stats.inf_b
    if stats.inf_same:
        out["nonfinite_same"] = stats.inf_same
    return out


def unmatched(row: Dict[str, Any], side: str) -> int:
    """Non-finite values of side 'a' or 'b' in a step's metrics row that the other side does not hold
    at the same place (a NaN always; an Inf unless the other side has the same Inf there: a mask)."""
    return int(row.get(f"nonfinite_{side}", 0)) - int(row.get("nonfinite_same", 0))


def decision_view(value: np.ndarray, last_position: bool) -> np.ndarray:
    """The part of a step's decision output the decision is read from: with `last_position` (a
    decoder's logits [batch, seq, vocab]) the last position of each row, the generated token."""
    return value[:, -1] if last_position and value.ndim == 3 else value


def _finite_element_stats(a: np.ndarray, b: np.ndarray) -> Optional[PairStats]:
    """compare_arrays' element sums without its NaN/Inf bookkeeping, or None when a value is not finite.

    The same arithmetic (diff/metrics._accumulate_elements), minus the isfinite masks: a NaN or Inf
    anywhere makes a sum non-finite, and then the exact path runs. Saves half the per-step cost on
    small streaming models."""
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        return None
    stats = PairStats(samples=1)
    with np.errstate(invalid="ignore", over="ignore"):  # Inf - Inf: the exact path below counts it
        _accumulate_elements(stats, a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1))
    if not (math.isfinite(stats.sum_sq_err) and math.isfinite(stats.sum_a2) and math.isfinite(stats.sum_b2)
            and math.isfinite(stats.sum_rel)):
        return None
    return stats


def decision_of(value: np.ndarray) -> List[int]:
    """Argmax on the last axis (flattened over the rest); a single value per row is thresholded at 0.5."""
    rows = value.reshape(-1, value.shape[-1] if value.ndim else 1)
    if rows.shape[1] == 1:
        return [int(v) for v in (rows[:, 0] > 0.5)]
    return [int(v) for v in rows.argmax(axis=1)]
