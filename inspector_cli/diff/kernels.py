"""The elementwise part of fast_stats.py's block pass, compiled (numba; loaded by core/jit.py).

`fast_stats._blocks` makes nine numpy passes over each 64 Ki block to get the arrays its sums and
maxima are read from: b - a, its absolute value, |a|, the significance test, max(|a|, eps), the
division, the 0/1 copy of the test and the masked product. `block_pass` makes them in one
vectorised loop and writes the same arrays (|b - a|, the relative error, the test, the significant
relative error), to the same bits (IEEE float32 subtract, abs, maximum, divide and multiply, one
rounding each, no fused multiply-add: numba's default). The sums stay float32 dot products by BLAS
and the maxima and the count numpy's, over those arrays, exactly as before (BLAS's order of
accumulation is its own: no loop of ours would reproduce it).
"""
from __future__ import annotations

import math
from typing import Any, Tuple

import numpy as np

try:
    from numba import njit
except ImportError as missing:  # the optional `fast` extra: core.jit then runs the numpy path
    raise ImportError("compiled kernels need numba: pip install 'model-inspector[fast]'") from missing


INTEGER_BLOCKS = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.uint16))
"""Integer dtypes of b that `dequantising_block_pass` reads (their float32 casts are exact)."""


@njit(nogil=True, cache=True)
def _extremes(x: np.ndarray) -> Tuple[Any, Any, int]:
    hi, lo = x[0], x[0]
    nan = 0
    for i in range(x.size):
        v = x[i]
        nan += v != v
        hi = max(hi, v)
        lo = min(lo, v)
    return hi, lo, nan


@njit(nogil=True, cache=True)
def _magnitude_bits(x: np.ndarray) -> int:
    bits = x.view(np.int32)
    top = np.int32(0)
    for i in range(bits.size):  # an integer max: vectorised (a float max with NaN rules stays scalar)
        top = max(top, bits[i] & np.int32(0x7FFFFFFF))
    return top


def abs_peak(x: np.ndarray) -> float:
    """max |x| of a non-empty contiguous float32 array, NaN when it holds a NaN or an Inf (as
    fast_stats._extent of its extremes): the largest of its sign-cleared bits, whose integer order is
    the order of the magnitudes. One pass at the speed of reading memory (extremes: ~0.6 ns a value)."""
    top = int(_magnitude_bits(x))
    if top >= 0x7F800000:
        return math.nan
    return float(np.array(top, dtype=np.int32).view(np.float32))


def extremes(x: np.ndarray) -> Tuple[float, float]:
    """(max, min) of a non-empty contiguous 1-D array, NaN when it holds one (as numpy's max and min)."""
    hi, lo, nan = _extremes(x)
    return (float("nan"), float("nan")) if nan else (float(hi), float(lo))


@njit(nogil=True, cache=True, error_model="numpy")
def _block_pass(xa: np.ndarray, xb: np.ndarray, ad: np.ndarray, rel: np.ndarray, sig: np.ndarray,
                mask: np.ndarray, threshold: np.float32, eps: np.float32) -> None:
    # No reduction in the loop and numpy's error model (IEEE division, no Python ZeroDivisionError check):
    # LLVM vectorises it (a float max is not associative without fast-math, which would keep it scalar);
    # numpy's SIMD max and count read the results from the cache.
    for i in range(xa.size):
        a = xa[i]
        d = abs(xb[i] - a)
        ra = abs(a)
        significant = ra >= threshold
        r = d / (eps if ra < eps else ra)  # np.maximum(|a|, eps): a NaN |a| stays NaN
        ad[i] = d
        rel[i] = r
        sig[i] = r * np.float32(significant)
        mask[i] = significant


@njit(nogil=True, cache=True, error_model="numpy")
def _dequantising_block_pass(xa: np.ndarray, qb: np.ndarray, xb: np.ndarray, ad: np.ndarray, rel: np.ndarray,
                             sig: np.ndarray, mask: np.ndarray, threshold: np.float32, eps: np.float32,
                             zero: np.float32, mul: np.float32, extent: np.ndarray) -> None:
    # _block_pass with b read from its integers: fast_stats._block's cast, subtract and multiply (one
    # float32 rounding each, in that order) made here, and the integers' extremes taken on the way.
    hi, lo = qb[0], qb[0]
    for i in range(xa.size):
        q = qb[i]
        hi = max(hi, q)
        lo = min(lo, q)
        b = (np.float32(q) - zero) * mul
        xb[i] = b
        a = xa[i]
        d = abs(b - a)
        ra = abs(a)
        significant = ra >= threshold
        r = d / (eps if ra < eps else ra)
        ad[i] = d
        rel[i] = r
        sig[i] = r * np.float32(significant)
        mask[i] = significant
    extent[0], extent[1] = hi, lo


def dequantising_block_pass(xa: np.ndarray, qb: np.ndarray, xb: np.ndarray, ad: np.ndarray, rel: np.ndarray,
                            sig: np.ndarray, mask: np.ndarray, threshold: np.float32, eps: np.float32,
                            zero: np.float32, mul: np.float32, extent: np.ndarray) -> Tuple[float, float]:
    """`block_pass` for an integer block `qb` of b (int8/uint8/int16/uint16), read as
    `(float32(qb) - zero) * mul` into `xb` (fast_stats._block's arithmetic, to the bit: subtracting 0 and
    multiplying by 1 change no float32); returns the largest and smallest integer of `qb` (`extent`: a
    float64[2] buffer)."""
    _dequantising_block_pass(xa, qb, xb, ad, rel, sig, mask, threshold, eps, zero, mul, extent)
    return float(extent[0]), float(extent[1])


def block_pass(xa: np.ndarray, xb: np.ndarray, ad: np.ndarray, rel: np.ndarray, sig: np.ndarray,
               mask: np.ndarray, threshold: np.float32, eps: np.float32) -> None:
    """For float32 blocks `xa`, `xb` (equal sizes): writes |xb - xa| into `ad`, the relative error
    |xb - xa| / max(|xa|, eps) into `rel`, whether |xa| >= threshold into `mask` (bool) and the
    relative error where it is (else 0) into `sig`."""
    _block_pass(xa, xb, ad, rel, sig, mask, threshold, eps)


def warm() -> None:
    """Compile (or load from numba's cache) the kernels for the dtypes fast_stats passes."""
    x = np.linspace(-1.0, 1.0, 256, dtype=np.float32)
    out = np.empty((3, 256), dtype=np.float32)
    block_pass(x, x[::-1].copy(), out[0], out[1], out[2], np.empty(256, dtype=np.bool_), np.float32(1e-3),
               np.float32(1e-12))
    for dtype in (np.float32, np.int8, np.uint8):
        extremes(x.astype(dtype))
    abs_peak(x)
    for dtype in INTEGER_BLOCKS:
        dequantising_block_pass(x, (x * 100).astype(dtype), out[0].copy(), out[0], out[1], out[2],
                                np.empty(256, dtype=np.bool_), np.float32(1e-3), np.float32(1e-12), np.float32(3.0),
                                np.float32(0.01), np.empty(2))
