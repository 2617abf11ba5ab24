"""The statistics of one float32 tensor in two compiled passes (numba; loaded by core/jit.py).

`scan` reads the tensor once for its extremes, zero count, NaN/Inf counts and log-histogram buckets
(sketch.py), where numpy takes min, max, a key array, bincount's own max pass and its count, and an
equality pass; `squared_deviations` reads it once for the sum of (x - shift)**2, where numpy writes
x - shift, squares it and sums it. The float32 sum itself stays numpy's (one fast pass). They return
what the numpy path of tracker.py computes, to the bit:

- the sum of squares is numpy's pairwise summation of a contiguous float32 array (`np.add.reduce`,
  as `.sum(dtype=np.float32)` runs it): blocks of at most 128 values summed with 8 accumulators,
  the halves of a longer range (cut at a multiple of 8) summed in turn, the total added to the
  reduction's initial 0.0; each (x - shift) and its square are the same two float32 roundings
  numpy's subtract and square make (no fused multiply-add: numba's default);
- the extremes are exact whatever the order, except the sign of a zero extreme when both +0 and -0
  occur (numpy's SIMD min/max pick either): the counts of each are returned so the caller asks
  numpy then; NaN and Inf are counted, not measured (the caller then filters the tensor and takes
  numpy's path for its moments, as before).
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

try:
    from numba import njit
except ImportError as missing:  # the optional `fast` extra: core.jit then runs the numpy path
    raise ImportError("compiled kernels need numba: pip install 'model-inspector[fast]'") from missing

_EXPONENT = np.uint32(0x7F800000)
_MANTISSA = np.uint32(0x007FFFFF)


@njit(nogil=True, cache=True)
def _leaf_sum(x: np.ndarray, lo: int, n: int) -> np.float32:
    """numpy's pairwise sum of x[lo:lo+n] for n <= 128 (loops_utils.h: 8 accumulators)."""
    if n < 8:
        res = np.float32(-0.0)
        for i in range(lo, lo + n):
            res += x[i]
        return res
    r0, r1, r2, r3 = x[lo], x[lo + 1], x[lo + 2], x[lo + 3]
    r4, r5, r6, r7 = x[lo + 4], x[lo + 5], x[lo + 6], x[lo + 7]
    stop = lo + n - (n % 8)
    i = lo + 8
    while i < stop:
        r0 += x[i]
        r1 += x[i + 1]
        r2 += x[i + 2]
        r3 += x[i + 3]
        r4 += x[i + 4]
        r5 += x[i + 5]
        r6 += x[i + 6]
        r7 += x[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += x[i]
        i += 1
    return res


@njit(nogil=True, cache=True)
def _pairwise(x: np.ndarray, shift: np.float32) -> np.float32:
    """numpy's pairwise recursion over x (halves cut at a multiple of 8, leaves of at most 128 values,
    each pair of halves added left + right) summing (x - shift)**2, walked with an explicit stack:
    numba's on-disk cache crashes on loading recursive functions."""
    lows = np.empty(64, dtype=np.int64)
    sizes = np.empty(64, dtype=np.int64)
    stage = np.zeros(64, dtype=np.int8)  # 0: not split yet, 1: left half running, 2: right half running
    left = np.empty(64, dtype=np.float32)
    top = 0
    lows[0], sizes[0], stage[0] = 0, x.size, 0
    while True:
        lo, n = lows[top], sizes[top]
        if n > 128:
            half = n // 2
            half -= half % 8
            stage[top] = 1
            top += 1
            lows[top], sizes[top], stage[top] = lo, half, 0
            continue
        value = _sq_leaf(x, lo, n, shift)
        while True:  # hand the value up: a left half waits for its right one, a right half completes its parent
            top -= 1
            if top < 0:
                return value
            if stage[top] == 1:
                left[top] = value
                stage[top] = 2
                half = sizes[top] // 2
                half -= half % 8
                lows[top + 1], sizes[top + 1], stage[top + 1] = lows[top] + half, sizes[top] - half, 0
                top += 1
                break
            value = left[top] + value


@njit(nogil=True, cache=True)
def _scan(x: np.ndarray, counts: np.ndarray, ext: np.ndarray, tally: np.ndarray) -> None:
    """x's finite values counted into `counts` (bucket = top 16 bits), their extremes into ext[0] (min)
    and ext[1] (max), and into tally: zeros, NaN, Inf, +0, -0 (counters in locals: stores into
    `counts` may alias any array, which would keep them in memory)."""
    bits = x.view(np.uint32)
    low, high = np.float32(np.inf), np.float32(-np.inf)
    zeros = nan = inf = minus = 0
    for i in range(x.size):
        b = bits[i]
        if (b & _EXPONENT) == _EXPONENT:
            if b & _MANTISSA:
                nan += 1
            else:
                inf += 1
            continue
        v = x[i]
        low = min(low, v)  # selects, no branch: which of two equal values is kept does not matter (+-0: see above)
        high = max(high, v)
        zero = np.int64(v == 0)  # a ReLU output is half zeros: a branch here would be mispredicted half the time
        zeros += zero
        minus += zero & np.int64(b >> 31)
        counts[b >> 16] += 1
    ext[0], ext[1] = low, high
    tally[0], tally[1], tally[2], tally[3], tally[4] = zeros, nan, inf, zeros - minus, minus


@njit(nogil=True, cache=True)
def _sq_leaf(x: np.ndarray, lo: int, n: int, shift: np.float32) -> np.float32:
    if n < 8:
        res = np.float32(-0.0)
        for i in range(lo, lo + n):
            t = x[i] - shift
            res += t * t
        return res
    t0, t1, t2, t3 = x[lo] - shift, x[lo + 1] - shift, x[lo + 2] - shift, x[lo + 3] - shift
    t4, t5, t6, t7 = x[lo + 4] - shift, x[lo + 5] - shift, x[lo + 6] - shift, x[lo + 7] - shift
    r0, r1, r2, r3, r4, r5, r6, r7 = t0 * t0, t1 * t1, t2 * t2, t3 * t3, t4 * t4, t5 * t5, t6 * t6, t7 * t7
    stop = lo + n - (n % 8)
    i = lo + 8
    while i < stop:
        t0, t1, t2, t3 = x[i] - shift, x[i + 1] - shift, x[i + 2] - shift, x[i + 3] - shift
        t4, t5, t6, t7 = x[i + 4] - shift, x[i + 5] - shift, x[i + 6] - shift, x[i + 7] - shift
        r0 += t0 * t0
        r1 += t1 * t1
        r2 += t2 * t2
        r3 += t3 * t3
        r4 += t4 * t4
        r5 += t5 * t5
        r6 += t6 * t6
        r7 += t7 * t7
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        t = x[i] - shift
        res += t * t
        i += 1
    return res


@njit(nogil=True, cache=True)
def _squared_deviations(x: np.ndarray, shift: np.float32) -> np.float32:
    if x.size == 0:
        return np.float32(0.0)
    return np.float32(0.0) + _pairwise(x, shift)


class Scan:
    """Reusable result buffers of `scan` (one per thread of work)."""

    def __init__(self) -> None:
        self.ext = np.empty(2, dtype=np.float32)
        self.tally = np.zeros(5, dtype=np.int64)


def scan(x: np.ndarray, counts: np.ndarray, buffers: Scan) -> Tuple[Any, Any, int, int, int, int, int]:
    """(min, max, zeros, NaN, Inf, +0 count, -0 count) of the finite values of a contiguous 1-D float32
    array (min > max when there is none); their buckets are added to `counts` (int64[65536])."""
    _scan(x, counts, buffers.ext, buffers.tally)
    zeros, nan, inf, plus, minus = buffers.tally.tolist()
    return buffers.ext[0], buffers.ext[1], zeros, nan, inf, plus, minus


def squared_deviations(x: np.ndarray, shift: np.float32) -> np.float32:
    """numpy's `np.square(x - shift).sum(dtype=np.float32)` of a contiguous 1-D float32 array."""
    return _squared_deviations(x, shift)


def warm() -> None:
    """Compile (or load from numba's cache) every kernel for the types the tracker passes."""
    x = np.arange(300, dtype=np.float32)
    scan(x, np.zeros(1 << 16, dtype=np.int64), Scan())
    squared_deviations(x, np.float32(1.0))
