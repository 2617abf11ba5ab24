"""Mean and variance over samples, merged exactly (Chan et al.), computed per sample in two passes.

Per sample, the mean comes from numpy's pairwise float32 sum (error ~ log2(n) ulp of sum|x|) and
the sum of squared deviations from a second pass about that mean, so there is no cancellation
however large the mean is against the spread. Samples merge with Chan's parallel update in
float64, which is exact in exact arithmetic and order-independent to rounding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import numpy as np


@dataclass
class Moments:
    """Count, mean and sum of squared deviations (M2) of a stream of values."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def merge(self, count: int, mean: float, m2: float) -> None:
        """Chan's update: add a batch of `count` values with its own mean and M2."""
        if count == 0:
            return
        if self.count == 0:
            self.count, self.mean, self.m2 = count, mean, m2
            return
        total = self.count + count
        delta = mean - self.mean
        self.mean += delta * count / total
        self.m2 += m2 + delta * delta * self.count * count / total
        self.count = total

    @property
    def std(self) -> float:
        """Population standard deviation (ddof=0, as numpy's default)."""
        return math.sqrt(max(self.m2, 0.0) / self.count) if self.count else math.nan


class MomentScratch:
    """One reusable work buffer per dtype, shared by every tensor of a run."""

    def __init__(self) -> None:
        self._buffers: dict = {}

    def get(self, n: int, dtype: np.dtype) -> np.ndarray:
        buffer = self._buffers.get(dtype)
        if buffer is None or buffer.size < n:
            buffer = np.empty(max(n, 2 * (buffer.size if buffer is not None else 0)), dtype=dtype)
            self._buffers[dtype] = buffer
        return buffer[:n]


def sample_moments(flat: np.ndarray, scratch: MomentScratch) -> Tuple[float, float]:
    """(mean, M2) of one sample's finite values (`flat`: contiguous float32 or float64, non-empty)."""
    n = flat.size
    mean = float(flat.sum(dtype=flat.dtype)) / n
    shift = flat.dtype.type(mean)
    work = scratch.get(n, flat.dtype)
    np.subtract(flat, shift, out=work)
    np.square(work, out=work)
    m2 = float(work.sum(dtype=flat.dtype))
    # Deviations were taken about the rounded mean `shift`; remove that offset exactly.
    m2 -= n * (float(shift) - mean) ** 2
    return mean, max(m2, 0.0)
