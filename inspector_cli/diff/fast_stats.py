"""Element metrics of large tensor pairs, fast: float32 arithmetic in cache-sized blocks, float64 sums.

`metrics.compare_arrays` widens both tensors to float64 and makes a dozen full-size temporaries,
which is right for model outputs (and needed for KL and top-k) but dominates a layer-wise run
over hundreds of large activations. Here the same sufficient statistics (`PairStats`) are
computed block by block (64 Ki elements stay in the CPU cache across the ten passes), with
float32 element arithmetic and float64 accumulation of the block sums; the relative error of a
block's dot product is ~1e-7 * sqrt(block) and the sums across blocks are exact to float64.

The dot product a.b is derived as (a.a + b.b - (b-a).(b-a)) / 2: it is then exact where it
matters most, for nearly identical tensors whose cosine is within 1e-6 of 1. Non-finite values
are detected from the sums and handed to the exact path.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from .metrics import REL_EPSILON, REL_SIG_FRACTION, PairStats, compare_arrays

BLOCK = 1 << 16
_EPS32 = np.float32(REL_EPSILON)


Affine = Tuple[float, float]
"""(scale, zero_point) of a per-tensor quantised operand: value = (q - zero_point) * scale."""


class Scratch:
    """Reusable block buffers (one set per thread of work)."""

    def __init__(self, block: int = BLOCK) -> None:
        self.block = block
        self.diff = np.empty(block, dtype=np.float32)
        self.rel = np.empty(block, dtype=np.float32)
        self.a = np.empty(block, dtype=np.float32)
        self.b = np.empty(block, dtype=np.float32)
        self.sig = np.empty(block, dtype=np.float32)
        """1.0 where |a| is significant (>= REL_SIG_FRACTION * max|a|), else 0.0."""
        self.ones = np.ones(block, dtype=np.float32)
        """Sums as dot products with ones: BLAS is 2-5x faster than numpy's float32 or float64 sum."""


def _block(x: np.ndarray, start: int, stop: int, affine: Optional[Affine], out: np.ndarray) -> np.ndarray:
    """x[start:stop] as float32 (converted or dequantised into `out` when needed)."""
    part = x[start:stop]
    if affine is None and part.dtype == np.float32:
        return part
    buf = out[: stop - start]
    np.copyto(buf, part, casting="unsafe")
    if affine is not None:
        scale, zero = affine
        if zero:
            np.subtract(buf, zero, out=buf)
        np.multiply(buf, scale, out=buf)
    return buf


def fast_pair_stats(a: np.ndarray, b: np.ndarray, scratch: Optional[Scratch] = None, *,
                    affine_a: Optional[Affine] = None, affine_b: Optional[Affine] = None) -> PairStats:
    """`PairStats` of reference `a` and candidate `b`: the same number of elements, compared in
    C order; any numeric dtype (fp16 is widened, quantised integers are dequantised per block with
    `affine_*`, so int8 activations are never materialised as float32 arrays)."""
    fa, fb = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if fa.size != fb.size:
        raise ValueError(f"element counts differ: {fa.size} vs {fb.size}")
    scratch = scratch or Scratch()
    stats = PairStats(samples=1, count=int(fa.size))
    if fa.size == 0:
        return stats
    with np.errstate(all="ignore"):  # NaN/Inf show up in the sums and are handled below
        floor = np.float64(REL_SIG_FRACTION * _peak(fa, affine_a))
        sums = _blocks(fa, fb, scratch, affine_a, affine_b, floor)
    a2, b2, err, sum_abs, sum_rel, max_abs, max_rel, sum_sig, max_sig, count_sig = sums
    if not all(math.isfinite(v) for v in (a2, b2, err, sum_rel, sum_sig)):
        # NaN/Inf (or float32 overflow): the exact float64 path counts and excludes them
        return compare_arrays(_dequantized(fa, affine_a), _dequantized(fb, affine_b), distribution=False)
    stats.sum_a2, stats.sum_b2, stats.sum_sq_err = a2, b2, err
    stats.dot = (a2 + b2 - err) / 2.0
    stats.sum_abs, stats.max_abs = sum_abs, max_abs
    stats.sum_rel, stats.max_rel = sum_rel, max_rel
    if floor > 0.0:  # an all-zero reference has no significant element
        stats.sum_rel_sig, stats.max_rel_sig, stats.count_rel_sig = sum_sig, max_sig, int(count_sig)
    return stats


def _peak(fa: np.ndarray, affine: Optional[Affine]) -> float:
    """max |a| without a full-size temporary (NaN when `a` holds one: the exact path takes over)."""
    hi, lo = float(fa.max()), float(fa.min())
    if affine is not None:
        scale, zero = affine
        hi, lo = (hi - zero) * scale, (lo - zero) * scale
    return max(abs(hi), abs(lo)) if math.isfinite(hi) and math.isfinite(lo) else math.nan


def _blocks(fa: np.ndarray, fb: np.ndarray, scratch: Scratch, affine_a: Optional[Affine],
            affine_b: Optional[Affine], floor: np.float64) -> Tuple[float, ...]:
    a2 = b2 = err = sum_abs = sum_rel = sum_sig = count_sig = 0.0
    max_abs = max_rel = max_sig = 0.0
    n = fa.size
    for start in range(0, n, scratch.block):
        stop = min(n, start + scratch.block)
        xa = _block(fa, start, stop, affine_a, scratch.a)
        xb = _block(fb, start, stop, affine_b, scratch.b)
        d = scratch.diff[: stop - start]
        r = scratch.rel[: stop - start]
        np.subtract(xb, xa, out=d)
        err += float(np.dot(d, d))
        a2 += float(np.dot(xa, xa))
        b2 += float(np.dot(xb, xb))
        ones = scratch.ones[: stop - start]
        np.abs(d, out=d)
        max_abs = max(max_abs, float(d.max()))
        sum_abs += float(np.dot(d, ones))
        np.abs(xa, out=r)
        sig = scratch.sig[: stop - start]
        np.greater_equal(r, floor, out=sig)  # float64 floor: the same elements as the exact path
        np.maximum(r, _EPS32, out=r)
        np.divide(d, r, out=r)
        max_rel = max(max_rel, float(r.max()))
        sum_rel += float(np.dot(r, ones))
        # relative errors are >= 0, so zeroing the insignificant ones keeps the max and the sum right
        np.multiply(r, sig, out=d)
        max_sig = max(max_sig, float(d.max()))
        sum_sig += float(np.dot(d, ones))
        count_sig += float(np.dot(sig, ones))  # exact: a block holds far fewer than 2**24 elements
    return a2, b2, err, sum_abs, sum_rel, max_abs, max_rel, sum_sig, max_sig, count_sig


def _dequantized(x: np.ndarray, affine: Optional[Affine]) -> np.ndarray:
    if affine is None:
        return x
    return (x.astype(np.float64) - affine[1]) * affine[0]
