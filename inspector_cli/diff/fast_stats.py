"""Element metrics of large tensor pairs, fast: float32 arithmetic in cache-sized blocks, float64 sums.

`metrics.compare_arrays` widens both tensors to float64 and makes a dozen full-size temporaries,
which is right for model outputs (and needed for KL and top-k) but dominates a layer-wise run
over hundreds of large activations. Here the same sufficient statistics (`PairStats`) are
computed block by block (64 Ki elements stay in the CPU cache across the ten passes), with
float32 element arithmetic and float64 accumulation of the block sums; the relative error of a
block's dot product is ~1e-7 * sqrt(block) and the sums across blocks are exact to float64.

Where the tensors nearly agree ((b-a).(b-a) under 1% of a.a and of b.b), the dot product is
derived as (a.a + b.b - (b-a).(b-a)) / 2: it is then exact where it matters most, for a cosine
within 1e-6 of 1. Elsewhere that difference cancels (a tensor 300x smaller than its partner, or
nearly orthogonal ones, lose every digit of it: a LayerNorm mean whose true cosine is 0.011 read
0.007) and the directly accumulated a.b is used.

float32 squares underflow below |x| ~ 1e-19 (random-init CNNs have activations ~1e-25: every
square was 0 and the cosine said 1.0 where the truth is 0.9966). Tensors whose peak magnitude
lies outside [2**-30, 2**30] are therefore scaled by a power of two (exact) so the peak is ~1,
and the sums scaled back in float64. When the two peaks are more than 2**40 apart no common scale
serves both, and the pair takes the exact float64 path. Non-finite values are detected from the
sums and handed to the exact path too.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import numpy as np

from .metrics import REL_EPSILON, REL_SIG_FRACTION, PairStats, compare_arrays

BLOCK = 1 << 16
_max = np.maximum.reduce
"""ndarray.max without its Python wrapper (numpy's _methods._amax calls this ufunc reduction): the same
value, ~2 us less per call, three calls per block of every layer pair."""
_SAFE_EXP = 30
"""Peaks within [2**-30, 2**30] are read as they are: their squares and block sums stay normal float32."""
_SPREAD_EXP = 40
"""Peaks further apart than 2**40 take the exact path: under one scale the smaller side's squares would underflow."""


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
        self.mask = np.empty(block, dtype=np.bool_)
        """The significance test as booleans (a float32 comparison writing bytes is ~8x cheaper than
        a float64 one writing floats; the 0/1 floats are copied from it)."""
        self.ones = np.ones(block, dtype=np.float32)
        """Sums as dot products with ones: BLAS is 2-5x faster than numpy's float32 or float64 sum."""
        self.extent = np.empty(2, dtype=np.float64)
        """The extremes of a block of b's integers (kernels.dequantising_block_pass)."""
        self.kernels: Any = None
        """diff/kernels.py when the run uses compiled kernels (core/jit.py): the same bits, fewer passes."""


def _block(x: np.ndarray, start: int, stop: int, affine: Optional[Affine], factor: float,
           out: np.ndarray) -> np.ndarray:
    """x[start:stop] as float32 times the power of two `factor` (converted, dequantised or scaled
    into `out` when needed)."""
    part = x[start:stop]
    if affine is None and factor == 1.0 and part.dtype == np.float32:
        return part
    buf = out[: stop - start]
    if part.dtype == np.float16:
        _widen_half(part, buf)
    else:
        np.copyto(buf, part, casting="unsafe")
    scale, zero = affine if affine is not None else (1.0, 0.0)
    if zero:
        np.subtract(buf, zero, out=buf)
    if scale * factor != 1.0:
        np.multiply(buf, np.float32(scale * factor), out=buf)
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
        sums, factor, peak_a = _sums(fa, fb, scratch, affine_a, affine_b)
    if sums is not None:
        a2, b2, err, dot, sum_abs, sum_rel, max_abs, max_rel, sum_sig, max_sig, count_sig = sums
    if sums is None or not all(math.isfinite(v) for v in (a2, b2, err, dot, sum_rel, sum_sig)):
        # NaN/Inf (or float32 overflow, or peaks too far apart): the exact float64 path
        return compare_arrays(_dequantized(fa, affine_a), _dequantized(fb, affine_b), distribution=False)
    back = 1.0 / factor  # a power of two: undoing the scale is exact
    a2, b2, err, dot = a2 * back * back, b2 * back * back, err * back * back, dot * back * back
    stats.sum_a2, stats.sum_b2, stats.sum_sq_err = a2, b2, err
    # nearly equal tensors: the derived dot keeps 1 - cosine exact; otherwise it would cancel
    stats.dot = (a2 + b2 - err) / 2.0 if err <= 1e-2 * min(a2, b2) else dot
    stats.sum_abs, stats.max_abs = sum_abs * back, max_abs * back
    stats.sum_rel, stats.max_rel = sum_rel, max_rel
    if peak_a > 0.0:  # an all-zero reference has no significant element
        stats.sum_rel_sig, stats.max_rel_sig, stats.count_rel_sig = sum_sig, max_sig, int(count_sig)
    return stats


def _sums(fa: np.ndarray, fb: np.ndarray, scratch: Scratch, affine_a: Optional[Affine],
          affine_b: Optional[Affine]) -> Tuple[Optional[Tuple[float, ...]], float, float]:
    """The block sums, the factor they were read with and a's peak; no sums when the exact path
    must take the pair (a NaN/Inf peak, whose sums would not be finite either; peaks too far apart).

    Reading a tensor from memory costs as much as the arithmetic on it (a large activation is not
    in the cache), so each is read once per block pass plus, for `a`, once for its peak (the
    significance floor needs it first). b's peak only picks the factor: the pass assumes the factor
    of a's peak alone, takes b's from the blocks it reads anyway, and runs again in the rare case
    b's peak changes the factor (the result is the same as with both peaks known first)."""
    peak_a = _peak(fa, affine_a, scratch.block, scratch.kernels)
    if not math.isfinite(peak_a):
        return None, 1.0, peak_a
    peak_b = _peak_half(fb) if fb.dtype == np.float16 else None  # the bits give it at a fraction of a pass
    if peak_b is not None and not math.isfinite(peak_b):
        return None, 1.0, peak_a
    factor = _factor(peak_a, peak_a if peak_b is None else peak_b)
    if factor is None:
        return None, 1.0, peak_a
    sums, extent_b = _blocks(fa, fb, scratch, affine_a, affine_b, factor, _floor(peak_a, factor), peak_b is None)
    if peak_b is None:
        peak_b = _extent(*extent_b, affine_b)
        actual = _factor(peak_a, peak_b) if math.isfinite(peak_b) else None
        if actual is None:
            return None, 1.0, peak_a
        if actual != factor:
            factor = actual
            sums = _blocks(fa, fb, scratch, affine_a, affine_b, factor, _floor(peak_a, factor), False)[0]
    return sums, factor, peak_a


def _floor(peak_a: float, factor: float) -> np.float64:
    """The significance floor of |a| times `factor` (relative errors are scale-free)."""
    return np.float64(REL_SIG_FRACTION * peak_a * factor)


def _peak(fa: np.ndarray, affine: Optional[Affine], block: int, kernels: Any = None) -> float:
    """max |a| without a full-size temporary (NaN when `a` holds one: the exact path takes over).
    Block by block, so that the min reads each block from the cache after the max fetched it (with
    the compiled kernels: both in one pass)."""
    if fa.dtype == np.float16:
        return _peak_half(fa)
    if kernels is not None:
        return kernels.abs_peak(fa) if affine is None and fa.dtype == np.float32 else _extent(*kernels.extremes(fa), affine)
    his, los = [], []
    for start in range(0, fa.size, block):
        part = fa[start:start + block]
        his.append(part.max())
        los.append(part.min())
    return _extent(float(np.max(his)), float(np.min(los)), affine)  # np.max: a NaN block propagates


def _extent(hi: float, lo: float, affine: Optional[Affine]) -> float:
    """max |x| from the largest and smallest raw values (dequantised when `affine`)."""
    if affine is not None:
        scale, zero = affine
        hi, lo = (hi - zero) * scale, (lo - zero) * scale
    return max(abs(hi), abs(lo)) if math.isfinite(hi) and math.isfinite(lo) else math.nan


def _factor(peak_a: float, peak_b: float) -> Optional[float]:
    """The power of two both tensors are read times (1.0 when their peaks are in the safe range), or
    None when one scale cannot serve both (the exact path takes the pair)."""
    peaks = [p for p in (peak_a, peak_b) if p > 0.0]
    if not peaks or not all(math.isfinite(p) for p in (peak_a, peak_b)):
        return 1.0  # all zero, or NaN/Inf: the sums say so and the exact path takes over
    exps = [math.frexp(p)[1] for p in peaks]
    if max(exps) - min(exps) > _SPREAD_EXP:
        return None
    top = max(exps)
    return 1.0 if -_SAFE_EXP <= top <= _SAFE_EXP else math.ldexp(1.0, -top)


def _blocks(fa: np.ndarray, fb: np.ndarray, scratch: Scratch, affine_a: Optional[Affine],
            affine_b: Optional[Affine], factor: float, floor: np.float64,
            extent_b: bool) -> Tuple[Tuple[float, ...], Tuple[float, float]]:
    """The sums of the values times `factor` (relative errors are scale-free: the 1e-12 floor of |a|
    is scaled with them), and with `extent_b` the largest and smallest raw value of b."""
    his: List[object] = []
    los: List[object] = []
    a2 = b2 = err = dot = sum_abs = sum_rel = sum_sig = count_sig = 0.0
    max_abs = max_rel = max_sig = 0.0
    eps = np.float32(REL_EPSILON * factor)
    threshold = _float32_at_least(floor)
    n = fa.size
    kernels = scratch.kernels
    for start in range(0, n, scratch.block):
        stop = min(n, start + scratch.block)
        xa = _block(fa, start, stop, affine_a, factor, scratch.a)
        if kernels is not None:
            d, r, sig = scratch.diff[: stop - start], scratch.rel[: stop - start], scratch.sig[: stop - start]
            mask = scratch.mask[: stop - start]
            if affine_b is not None and fb.dtype in kernels.INTEGER_BLOCKS:  # quantised b: read in the pass
                xb = scratch.b[: stop - start]
                his_b, los_b = kernels.dequantising_block_pass(
                    xa, fb[start:stop], xb, d, r, sig, mask, threshold, eps, np.float32(affine_b[1]),
                    np.float32(affine_b[0] * factor), scratch.extent)
            else:
                xb = _block(fb, start, stop, affine_b, factor, scratch.b)
                kernels.block_pass(xa, xb, d, r, sig, mask, threshold, eps)
                if extent_b:
                    his_b, los_b = kernels.extremes(fb[start:stop])
            if extent_b:
                his.append(his_b)
                los.append(los_b)
            ones = scratch.ones[: stop - start]
            # the same float32 dot products, of the same arrays, as below (|d|.|d| == d.d to the bit)
            err += float(np.dot(d, d))
            a2 += float(np.dot(xa, xa))
            b2 += float(np.dot(xb, xb))
            dot += float(np.dot(xa, xb))
            max_abs = max(max_abs, float(_max(d)))
            sum_abs += float(np.dot(d, ones))
            max_rel = max(max_rel, float(_max(r)))
            sum_rel += float(np.dot(r, ones))
            max_sig = max(max_sig, float(_max(sig)))
            sum_sig += float(np.dot(sig, ones))
            count_sig += np.count_nonzero(mask)
            continue
        xb = _block(fb, start, stop, affine_b, factor, scratch.b)
        d = scratch.diff[: stop - start]
        r = scratch.rel[: stop - start]
        np.subtract(xb, xa, out=d)
        if extent_b:  # the raw block is in the cache now
            part = fb[start:stop]
            his.append(part.max())
            los.append(part.min())
        err += float(np.dot(d, d))
        a2 += float(np.dot(xa, xa))
        b2 += float(np.dot(xb, xb))
        dot += float(np.dot(xa, xb))
        ones = scratch.ones[: stop - start]
        np.abs(d, out=d)
        max_abs = max(max_abs, float(_max(d)))
        sum_abs += float(np.dot(d, ones))
        np.abs(xa, out=r)
        sig, mask = scratch.sig[: stop - start], scratch.mask[: stop - start]
        # the same elements as the exact path's float64 test against `floor` (see _float32_at_least)
        np.greater_equal(r, threshold, out=mask)
        np.maximum(r, eps, out=r)
        np.divide(d, r, out=r)
        max_rel = max(max_rel, float(_max(r)))
        sum_rel += float(np.dot(r, ones))
        # relative errors are >= 0, so zeroing the insignificant ones keeps the max and the sum right
        np.copyto(sig, mask)
        np.multiply(r, sig, out=d)
        max_sig = max(max_sig, float(_max(d)))
        sum_sig += float(np.dot(d, ones))
        count_sig += np.count_nonzero(mask)
    extent = (float(np.max(his)), float(np.min(los))) if extent_b else (math.nan, math.nan)
    return (a2, b2, err, dot, sum_abs, sum_rel, max_abs, max_rel, sum_sig, max_sig, count_sig), extent


def _float32_at_least(floor: np.float64) -> np.float32:
    """The smallest float32 >= `floor`: for a float32 x, x >= it exactly when float64(x) >= floor
    (no float32 lies between `floor` and it), so the test runs in float32."""
    value = np.float32(floor)
    if np.float64(value) < floor:
        value = np.nextafter(value, np.float32(np.inf))
    return value


_HALF_MAGNITUDE = np.uint16(0x7FFF)
_HALF_EXP_ALL_ONES = 0x7C00
_HALF_TO_SINGLE = np.float32(2.0 ** 112)
"""float16 bits shifted into a float32 read 2**-112 times the value (exponent bias 15 vs 127)."""
_KEEP_SIGN_EXP_MANTISSA = np.int32(-0x70000001)
"""0x8FFFFFFF: the sign bit and the 28 low bits (the sign-extended copies in bits 28-30 cleared)."""


def _peak_half(x: np.ndarray) -> float:
    """max |x| of a float16 array from its bits (numpy's float16 max/min run ~40 ns per element, the
    integer max of the sign-cleared bits ~0.2: for non-negative halves the bit order is the value
    order). NaN when x holds a NaN or an Inf."""
    top = int(np.bitwise_and(x.view(np.uint16), _HALF_MAGNITUDE).max())
    if top >= _HALF_EXP_ALL_ONES:
        return math.nan
    return float(np.array(top, dtype=np.uint16).view(np.float16))


def _widen_half(part: np.ndarray, out: np.ndarray) -> None:
    """float16 -> float32 into `out`, exactly, with integer operations (numpy's cast runs ~4 ns per
    element): the sign-extended bits shifted into place and rescaled by 2**112, which is exact for
    normal and subnormal halves alike. Only finite halves come here (the peak test sends NaN/Inf to
    the exact path)."""
    bits = out.view(np.int32)
    np.copyto(bits, part.view(np.int16))
    np.left_shift(bits, 13, out=bits)
    np.bitwise_and(bits, _KEEP_SIGN_EXP_MANTISSA, out=bits)
    np.multiply(out, _HALF_TO_SINGLE, out=out)


def _dequantized(x: np.ndarray, affine: Optional[Affine]) -> np.ndarray:
    if affine is None:
        return x
    return (x.astype(np.float64) - affine[1]) * affine[0]
