"""Step metrics of a block of steps as columns: one numpy call per sum for the whole block.

A small streaming model runs in a few hundred microseconds; ten numpy calls per tensor per step,
a dict per step and tensor, and folding those dicts back into running summaries cost as much
again. The loop therefore keeps the last K steps' outputs (references, no copies) and reduces them
together into `BlockColumns`: per metric one list over the steps, which the summaries fold as
one column (stats.py). Each row's sums are the same dot products and reductions as
diff/metrics.compare_arrays; rows holding NaN/Inf (a sum turns non-finite) take the per-step
function itself, so compare_arrays' NaN/Inf bookkeeping applies unchanged. Per-step dicts (the
JSONL records) are only built when a journal asks for them (`BlockColumns.row`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..diff.metrics import REL_EPSILON
from .metrics import KEEP, decision_of

Pair = Tuple[np.ndarray, np.ndarray]
COUNTS = ("nonfinite_mismatch", "nonfinite_a", "nonfinite_b", "nonfinite_same", "shape_mismatch")
"""Per-step counts a metrics row may carry besides the metrics (absent = 0)."""
_ELEMENT = ("cosine", "max_abs", "mean_abs", "rmse", "max_rel", "sqnr")


@dataclass
class BlockColumns:
    """One tensor's metrics over a block of steps: metric -> one value per step (None: not computed)."""

    size: int
    values: Dict[str, List[Optional[float]]] = field(default_factory=dict)
    counts: Dict[str, List[int]] = field(default_factory=dict)
    present: Optional[List[bool]] = None
    """None: the tensor was compared at every step; else which steps have it (records read back)."""

    def row(self, i: int) -> Dict[str, Any]:
        """The metrics dict of step `i` as step_metrics returns it (KEEP order, then the counts)."""
        out: Dict[str, Any] = {k: self.values[k][i] for k in KEEP if k in self.values and self.values[k][i] is not None}
        for key in COUNTS:
            column = self.counts.get(key)
            if column is not None and column[i]:
                out[key] = column[i]
        return out

    def has(self, i: int) -> bool:
        return self.present is None or self.present[i]

    def flagged(self, key: str) -> List[bool]:
        """Per step: whether the row has `key` or a shape mismatch (what the loop looks closer at)."""
        flags = [False] * self.size
        for name in (key, "shape_mismatch"):
            for i, value in enumerate(self.counts.get(name, ())):
                flags[i] = flags[i] or bool(value)
        return flags

    def head(self, k: int) -> "BlockColumns":
        return BlockColumns(k, {m: v[:k] for m, v in self.values.items()}, {m: v[:k] for m, v in self.counts.items()},
                            None if self.present is None else self.present[:k])


def columns_from_rows(rows: Sequence[Optional[Dict[str, Any]]]) -> BlockColumns:
    """Columns of per-step metric dicts (None: the tensor is absent at that step)."""
    n = len(rows)
    columns = BlockColumns(n, present=None if all(r is not None for r in rows) else [r is not None for r in rows])
    for i, row in enumerate(rows):
        for key, value in (row or {}).items():
            target = columns.counts if key in COUNTS else columns.values
            column = target.get(key)
            if column is None:
                column = target[key] = [0 if key in COUNTS else None] * n  # type: ignore[list-item]
            column[i] = value
    return columns


def cosine_and_sqnr(sq: np.ndarray, dot: np.ndarray, a2: np.ndarray,
                    b2: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """diff/metrics' _cosine and _sqnr element-wise over arrays of sums (|b-a|^2, a.b, a.a, b.b): the
    same IEEE operations and the same edge cases (a zero error, a zero side)."""
    with np.errstate(all="ignore"):
        cosine = np.clip(dot / (np.sqrt(a2) * np.sqrt(b2)), -1.0, 1.0)
        sqnr = 10.0 * np.log10(a2 / sq)
    zero_err, zero_a, zero_b = sq == 0.0, a2 == 0.0, b2 == 0.0
    if zero_err.any() or zero_a.any() or zero_b.any():
        cosine[zero_err] = 1.0
        cosine[zero_a | zero_b] = 0.0
        cosine[zero_a & zero_b] = 1.0
        sqnr[zero_a] = -np.inf
        sqnr[zero_err] = np.inf
    return cosine, sqnr


def block_columns(pairs: Sequence[Pair], one: Callable[[np.ndarray, np.ndarray], Dict[str, Any]]) -> BlockColumns:
    """`one(a, b)` for every pair as columns, computed row-wise in one go when the pairs stack."""
    if len(pairs) < 2 or not _stackable(pairs):
        return columns_from_rows([one(a, b) for a, b in pairs])
    # np.array of the flattened rows stacks and widens in one C call (np.stack is Python-level)
    a = np.array([p[0].reshape(-1) for p in pairs], dtype=np.float64)
    b = np.array([p[1].reshape(-1) for p in pairs], dtype=np.float64)
    n = a.shape[1]
    with np.errstate(all="ignore"):  # NaN/Inf rows are recomputed exactly below
        diff = b - a
        sq = np.einsum("ij,ij->i", diff, diff)
        dot = np.einsum("ij,ij->i", a, b)
        a2 = np.einsum("ij,ij->i", a, a)
        b2 = np.einsum("ij,ij->i", b, b)
        abs_diff = np.abs(diff, out=diff)
        rel = np.abs(a, out=a)
        np.maximum(rel, REL_EPSILON, out=rel)
        np.divide(abs_diff, rel, out=rel)
        sum_rel = rel.sum(axis=1)
        finite = np.isfinite(sq + a2 + b2 + sum_rel)  # a sum past float64's range: the exact path too
    cosine, sqnr = cosine_and_sqnr(sq, dot, a2, b2)
    columns = BlockColumns(len(pairs), {
        "cosine": cosine.tolist(), "max_abs": abs_diff.max(axis=1).tolist(),
        "mean_abs": (abs_diff.sum(axis=1) / n).tolist(), "rmse": np.sqrt(sq / n).tolist(),
        "max_rel": rel.max(axis=1).tolist(), "sqnr": sqnr.tolist()})
    if not finite.all():
        for i in np.flatnonzero(~finite).tolist():
            _patch(columns, i, one(*pairs[i]))
    return columns


def _patch(columns: BlockColumns, i: int, row: Dict[str, Any]) -> None:
    """Step `i`'s values replaced by the exact per-step row (NaN/Inf bookkeeping)."""
    for key in _ELEMENT:
        columns.values[key][i] = row.get(key)
    for key in COUNTS:
        if row.get(key):
            columns.counts.setdefault(key, [0] * columns.size)[i] = row[key]


def _stackable(pairs: Sequence[Pair]) -> bool:
    shape = pairs[0][0].shape
    if not shape or pairs[0][0].size == 0:
        return False
    for a, b in pairs:
        if a.shape != shape or b.shape != shape or a.dtype.kind != "f" or b.dtype.kind != "f":
            return False
    return True


def batch_metrics(pairs: Sequence[Pair], one: Callable[[np.ndarray, np.ndarray], Dict[str, Any]]) -> List[Dict[str, Any]]:
    """`one(a, b)` for every pair as per-step dicts (the rows of `block_columns`)."""
    columns = block_columns(pairs, one)
    return [columns.row(i) for i in range(columns.size)]


def batch_decisions(values: Sequence[np.ndarray]) -> List[List[int]]:
    """decision_of for every step's array (argmax on the last axis; one value per row: > 0.5)."""
    shape = values[0].shape
    if any(v.shape != shape for v in values) or not shape:
        return [decision_of(v) for v in values]
    stacked = np.stack(values).reshape(len(values), -1, shape[-1])
    if shape[-1] == 1:
        chosen = (stacked[:, :, 0] > 0.5).astype(np.int64)
    else:
        chosen = stacked.argmax(axis=2)
    return chosen.tolist()
