"""Every compared tensor of a block of steps reduced in one vectorised pass (the common, finite case).

`batch.block_columns` reduces one tensor at a time: about twenty numpy calls per tensor and block,
then a Python list per metric that the summaries turn back into arrays. On a small streaming model
a numpy call costs as much as a few elements' inference, so this module puts all compared tensors
of a block side by side in one float64 matrix per model ([steps, elements of every tensor]) and
takes each sum for every (step, tensor) cell at once (a product with a 0/1 matrix that marks each
tensor's columns): about thirty numpy calls per block, plus two maxima per tensor. The metrics come
out as one array `[metric, step, tensor]` that the summaries fold without leaving numpy
(stats.SequenceStats.fold_fused), and the decision (argmax / > 0.5) is read from the same matrix.

The arithmetic is diff/metrics.compare_arrays' (squared error, dot products, |diff|, |diff| /
max(|a|, REL_EPSILON)); only the order of the additions differs (within 1e-12 relative, tested
against compare_arrays). A block qualifies when every compared tensor is a non-empty float array of
one shape at every step, in A and B alike, and every sum is finite: NaN/Inf (or squares past
float64's range) send the whole block to the per-tensor path, whose per-step bookkeeping of
non-finite values then applies unchanged. So does a gate on KL/top-k.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..diff.metrics import REL_EPSILON
from .batch import cosine_and_sqnr

_SHAPE = attrgetter("shape")
ELEMENT = ("cosine", "max_abs", "mean_abs", "rmse", "max_rel", "sqnr")
"""The metrics of a fused block, in this order along its first axis (metrics.KEEP's order)."""


@dataclass
class FusedBlock:
    """The metrics of `size` steps for `names` (step outputs first, then state outputs)."""

    size: int
    names: List[str]
    values: np.ndarray
    """[len(ELEMENT), size, len(names)] float64."""
    chosen_a: Optional[np.ndarray] = None
    """Per step, A's decision per row ([size, rows] int); None without a decision output."""
    chosen_b: Optional[np.ndarray] = None

    def rows(self) -> List[List[Dict[str, float]]]:
        """Per step, per tensor: the metrics dict step_metrics gives (for the JSONL records)."""
        return [[dict(zip(ELEMENT, cell)) for cell in step] for step in self.values.transpose(1, 2, 0).tolist()]

    def decisions(self) -> List[Optional[List[List[int]]]]:
        """Per step [A's decision, B's decision] as lists (None without a decision output)."""
        if self.chosen_a is None or self.chosen_b is None:
            return [None] * self.size
        return [[x, y] for x, y in zip(self.chosen_a.tolist(), self.chosen_b.tolist())]

    def differs(self) -> Optional[np.ndarray]:
        """Per step: whether the decisions differ."""
        if self.chosen_a is None or self.chosen_b is None:
            return None
        return (self.chosen_a != self.chosen_b).any(axis=1)


def fuse(outs_a: Sequence[Sequence[Any]], outs_b: Sequence[Sequence[Any]], names: List[str],
         index_a: List[int], index_b: List[int], decision: Optional[str],
         last_position: bool = False) -> Optional[FusedBlock]:
    """The block's metrics, or None when it does not qualify (see the module docstring).

    `outs_a[k][index_a[t]]` is A's value of tensor `names[t]` at the block's step k (the lists
    onnxruntime returns); the same for B."""
    size = len(outs_a)
    if not size or not names:
        return None
    mats_a: List[np.ndarray] = []
    mats_b: List[np.ndarray] = []
    widths: List[int] = []
    shapes: List[tuple] = []
    for ja, jb in zip(index_a, index_b):
        xs = [step[ja] for step in outs_a]
        ys = [step[jb] for step in outs_b]
        first = xs[0]
        if not isinstance(first, np.ndarray) or not isinstance(ys[0], np.ndarray) or first.dtype.kind != "f" \
                or ys[0].dtype.kind != "f" or not first.ndim or not first.size:
            return None
        shape = first.shape
        # one shape at every step (dynamic axes may change it) and in both models (map: no Python frame per step)
        if list(map(_SHAPE, xs)).count(shape) != size or list(map(_SHAPE, ys)).count(shape) != size:
            return None
        widths.append(first.size)
        shapes.append(shape)
        mats_a.append(np.concatenate(xs).reshape(size, -1))
        mats_b.append(np.concatenate(ys).reshape(size, -1))
    a = np.concatenate(mats_a, axis=1, dtype=np.float64)
    b = np.concatenate(mats_b, axis=1, dtype=np.float64)
    bounds = np.cumsum([0] + widths).tolist()
    # column j of `member` sums the columns of tensor j: one matrix product gives every sum of every
    # (step, tensor) cell (np.add.reduceat over such short runs was 5x slower)
    member = np.zeros((a.shape[1], len(widths)))
    for t in range(len(widths)):
        member[bounds[t]:bounds[t + 1], t] = 1.0
    parts = np.empty((6,) + a.shape)
    with np.errstate(all="ignore"):  # a non-finite sum sends the block to the exact path below
        diff = np.subtract(b, a, out=parts[4])
        np.multiply(diff, diff, out=parts[0])
        np.multiply(a, b, out=parts[1])
        np.multiply(a, a, out=parts[2])
        np.multiply(b, b, out=parts[3])
        np.abs(diff, out=diff)
        rel = np.abs(a, out=parts[5])
        np.maximum(rel, REL_EPSILON, out=rel)
        np.divide(diff, rel, out=rel)
        sums = parts[:5] @ member  # [5, steps, tensors]: |diff| / |a| is only needed for its maximum
        if not np.isfinite(sums).all():
            return None
        peaks = np.stack([parts[4:, :, bounds[t]:bounds[t + 1]].max(axis=2) for t in range(len(widths))], axis=2)
        sq, dot, a2, b2, sum_abs = sums
    cosine, sqnr = cosine_and_sqnr(sq, dot, a2, b2)
    count = np.asarray(widths, dtype=np.float64)
    values = np.stack((cosine, peaks[0], sum_abs / count, np.sqrt(sq / count), peaks[1], sqnr))
    block = FusedBlock(size, list(names), values)
    if decision is not None and decision in names:
        t = names.index(decision)
        shape = shapes[t]
        last = shape[1] if last_position and len(shape) == 3 else 1  # a decoder's logits: its last position
        block.chosen_a = _choose(a, bounds[t], widths[t], shape[-1], last)
        block.chosen_b = _choose(b, bounds[t], widths[t], shape[-1], last)
    return block


def _choose(matrix: np.ndarray, start: int, width: int, last: int, positions: int = 1) -> np.ndarray:
    """metrics.decision_of for every step: argmax on the last axis, one value per row thresholded at
    0.5 (on float64 copies of the outputs: the widening is exact, so are the comparisons); with
    `positions` > 1 only the last of each row's `positions` positions (a decoder's generated token)."""
    rows = matrix[:, start:start + width].reshape(len(matrix), -1, last)
    if positions > 1:
        rows = rows.reshape(len(matrix), -1, positions, last)[:, :, -1]
    if last == 1:
        return (rows[:, :, 0] > 0.5).astype(np.int64)
    return rows.argmax(axis=2)
