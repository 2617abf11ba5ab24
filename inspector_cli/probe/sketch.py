"""A fixed-memory, exactly mergeable log-bucket histogram over float32 bit patterns.

Every finite float32 value falls in the bucket named by the top 16 bits of its IEEE-754 pattern
(sign, 8 exponent bits, 7 mantissa bits): 65,536 buckets that cover the whole float32 range, so
the range never has to adapt, histograms of different samples and runs add bucket by bucket, and
memory is 512 KiB per tensor whatever the data.

Error bound. Inside one bucket all values share sign, exponent and the 7 leading mantissa bits,
so a bucket [a, b] of normal numbers has (b - a) <= |a| * 2**-7. Percentiles are rank-exact: the
count of values up to every bucket is exact, so the bucket holding the requested order statistic
is known exactly, and the estimate is that bucket's midpoint clamped to the exact [min, max].
Hence `|estimate - true| <= 2**-8 * |true|` (0.39 %), or at most 2**-133 (~9.2e-41) absolute for
subnormal values. The q-th percentile is the order statistic of rank ceil(q/100 * N) (numpy's
`method="inverted_cdf"`).

Counting uses one shift into a reused index buffer and `np.bincount`: about 3 ns per value on the
reference machine, the largest single cost of probing.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

BUCKETS = 1 << 16
REL_ERROR = 2.0 ** -8
"""Relative error bound of a percentile estimate (normal numbers)."""
ABS_ERROR_SUBNORMAL = 2.0 ** -133
"""Absolute error bound below the smallest normal float32 (the +-0 buckets hold subnormals up to ~9.2e-41)."""
PERCENTILES: Tuple[float, ...] = (0.1, 1.0, 50.0, 99.0, 99.9)
SMALL = 32768
"""Below this many keys, counting in place beats bincount's full-size temporary."""

_TABLES: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = None


def _tables() -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, low, high, mid): buckets in value order and each bucket's value bounds (float64)."""
    global _TABLES
    if _TABLES is None:
        keys = np.arange(BUCKETS, dtype=np.uint32)
        with np.errstate(invalid="ignore"):  # the NaN buckets; never counted
            first = (keys << 16).view(np.float32).astype(np.float64)
            last = ((keys << 16) | 0xFFFF).view(np.float32).astype(np.float64)
        low, high = np.minimum(first, last), np.maximum(first, last)
        finite = np.isfinite(low) & np.isfinite(high)
        low, high = np.where(finite, low, 0.0), np.where(finite, high, 0.0)
        mid = (low + high) / 2
        mid[[0, 0x8000]] = 0.0  # +-0 and the tiniest subnormals: report 0
        # Value order: negatives from the most negative (0xFFFF) up to -0 (0x8000), then +0 upwards.
        order = np.concatenate((np.arange(BUCKETS - 1, 0x7FFF, -1), np.arange(0, 0x8000))).astype(np.intp)
        _TABLES = (order, low, high, mid)
    return _TABLES


def bucket_bounds(key: int) -> Tuple[float, float]:
    """The closed value range [low, high] of one bucket."""
    _, low, high, _ = _tables()
    return float(low[key]), float(high[key])


class KeyBuffer:
    """Reusable index buffer: fresh multi-megabyte arrays per tensor cost page faults on every sample."""

    def __init__(self) -> None:
        self._keys = np.empty(0, dtype=np.intp)

    def keys(self, values: np.ndarray) -> np.ndarray:
        """Bucket keys of a contiguous float32 array (a view into the shared buffer)."""
        n = values.size
        if self._keys.size < n:
            self._keys = np.empty(max(n, 2 * self._keys.size), dtype=np.intp)
        out = self._keys[:n]
        np.right_shift(values.reshape(-1).view(np.uint32), 16, out=out, casting="unsafe")  # strided views too
        return out


class LogHistogram:
    """Bucket counts of finite float32 values over any number of samples."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts = np.zeros(BUCKETS, dtype=np.int64)

    def add_keys(self, keys: np.ndarray) -> int:
        """Count one sample's keys; returns how many fell in the two zero buckets."""
        before = self.counts[0] + self.counts[0x8000]
        if keys.size < SMALL:
            np.add.at(self.counts, keys, 1)  # no 512 KiB temporary for a few values
        else:
            self.counts += np.bincount(keys, minlength=BUCKETS)
        return int(self.counts[0] + self.counts[0x8000] - before)

    def merge(self, other: "LogHistogram") -> None:
        self.counts += other.counts

    def __getstate__(self) -> Tuple[np.ndarray, np.ndarray]:
        # sent between processes as its non-empty buckets: a few KiB instead of 512 KiB
        keys = np.flatnonzero(self.counts).astype(np.uint16)
        return keys, self.counts[keys]

    def __setstate__(self, state: Tuple[np.ndarray, np.ndarray]) -> None:
        keys, counts = state
        self.counts = np.zeros(BUCKETS, dtype=np.int64)
        self.counts[keys.astype(np.intp)] = counts

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def zero_bucket_count(self) -> int:
        """Values in the +-0 buckets (exact zeros plus subnormals below ~9e-41)."""
        return int(self.counts[0] + self.counts[0x8000])

    def percentiles(self, qs: Sequence[float] = PERCENTILES, *, lo: Optional[float] = None,
                    hi: Optional[float] = None) -> Dict[str, Optional[float]]:
        """Estimates of the q-th percentiles (rank ceil(q/100*N)), clamped to the exact [lo, hi]."""
        order, _, _, mid = _tables()
        ordered = self.counts[order]
        cumulative = np.cumsum(ordered)
        total = int(cumulative[-1]) if cumulative.size else 0
        out: Dict[str, Optional[float]] = {}
        for q in qs:
            label = percentile_label(q)
            if total == 0:
                out[label] = None
                continue
            rank = max(1, math.ceil(q / 100.0 * total))
            index = int(np.searchsorted(cumulative, rank, side="left"))
            value = float(mid[order[index]])
            if lo is not None:
                value = max(value, lo)
            if hi is not None:
                value = min(value, hi)
            out[label] = value
        return out

    def count_beyond(self, low: float, high: float) -> Tuple[int, int, int]:
        """Values below `low` or above `high`: (estimate, lower bound, upper bound).

        Buckets entirely outside [low, high] count for sure; a bucket that straddles a threshold
        counts in the upper bound only, and in the estimate when its midpoint lies outside.
        """
        _, blow, bhigh, mid = _tables()
        nonzero = np.flatnonzero(self.counts)
        counts = self.counts[nonzero]
        b_lo, b_hi, b_mid = blow[nonzero], bhigh[nonzero], mid[nonzero]
        sure = (b_hi < low) | (b_lo > high)
        maybe = ~sure & ((b_lo < low) | (b_hi > high))
        estimate = (b_mid < low) | (b_mid > high)
        return int(counts[estimate].sum()), int(counts[sure].sum()), int(counts[sure | maybe].sum())

    def display(self, lo: float, hi: float, bins: int = 32) -> List[int]:
        """Counts in `bins` equal-width bins over [lo, hi], each bucket counted at its midpoint."""
        _, _, _, mid = _tables()
        nonzero = np.flatnonzero(self.counts)
        if nonzero.size == 0:
            return [0] * bins
        values = np.clip(mid[nonzero], lo, hi)
        width = (hi - lo) / bins if hi > lo else 1.0
        index = np.clip(((values - lo) / width).astype(np.int64), 0, bins - 1)
        return [int(c) for c in np.bincount(index, weights=self.counts[nonzero], minlength=bins).astype(np.int64)]


def percentile_label(q: float) -> str:
    """0.1 -> 'p0.1', 50.0 -> 'p50'."""
    return "p" + (f"{q:g}")
