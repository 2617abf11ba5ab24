"""The compiled block pass (diff/kernels.py, numba) gives fast_pair_stats the same bits as numpy's passes.

Every field of `PairStats` is compared with `==` on the repr of the float (every bit), on the tensor
kinds the layer pass meets: float32 pairs near and far apart, int8/uint8 activations dequantised per
block, float16 candidates, peaks outside the safe range (rescaled), tensors longer than a block and
of odd sizes, zeros, and NaN/Inf (the exact path: the kernel's arrays must send the same pairs there).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inspector_cli.core import jit
from inspector_cli.diff.fast_stats import BLOCK, Scratch, fast_pair_stats

kernels = pytest.importorskip("inspector_cli.diff.kernels", reason="numba (the fast extra) is not installed")


def _pairs():
    rng = np.random.default_rng(45)
    for n in (1, 5, 8, 127, 4096, BLOCK - 1, BLOCK, BLOCK + 3, 3 * BLOCK + 17):
        a = rng.standard_normal(n).astype(np.float32)
        near = a + rng.standard_normal(n).astype(np.float32) * np.float32(1e-3)
        yield a, near, None, None
        yield a, rng.standard_normal(n).astype(np.float32), None, None  # unrelated
        yield a * np.float32(1e-25), near * np.float32(1e-25), None, None  # rescaled by 2**k
        yield a * np.float32(1e34), near * np.float32(1e34), None, None  # overflows float32 sums: exact path
        yield np.maximum(a, 0), np.maximum(near, 0), None, None  # half zeros: the significance test
        yield np.zeros(n, np.float32), near, None, None  # all-zero reference
        yield a, near.astype(np.float16), None, None
        q = rng.integers(-128, 128, n).astype(np.int8)
        yield a, q, None, (0.0123, -3.0)
        yield q.astype(np.uint8), rng.integers(0, 256, n).astype(np.uint8), (0.02, 128.0), (0.021, 127.0)
        yield a * np.float32(1e-25), q, None, (1.1e-27, 5.0)  # dequantised and rescaled by 2**k in the pass
        yield a, rng.integers(0, 65536, n).astype(np.uint16), None, (3e-5, 32768.0)  # A16 activations
        yield a, rng.integers(-32768, 32768, n).astype(np.int16), None, (4e-5, 0.0)  # zero point 0: no subtraction
        for bad in (np.nan, np.inf, -np.inf):
            b = near.copy()
            b[n // 2] = bad
            yield a, b, None, None


@pytest.mark.parametrize("case", list(range(len(list(_pairs())))))
def test_the_compiled_pass_gives_every_field_to_the_bit(case):
    a, b, affine_a, affine_b = list(_pairs())[case]
    plain, compiled = Scratch(), Scratch()
    compiled.kernels = kernels
    want = fast_pair_stats(a, b, plain, affine_a=affine_a, affine_b=affine_b)
    got = fast_pair_stats(a, b, compiled, affine_a=affine_a, affine_b=affine_b)
    assert repr(dataclasses.astuple(got)) == repr(dataclasses.astuple(want))


def test_the_block_pass_writes_numpys_arrays():
    rng = np.random.default_rng(7)
    xa = rng.standard_normal(1000).astype(np.float32)
    xa[::7] = 0.0
    xb = xa + rng.standard_normal(1000).astype(np.float32)
    threshold, eps = np.float32(0.25), np.float32(1e-12)
    out = np.empty((3, 1000), np.float32)
    mask = np.empty(1000, bool)
    kernels.block_pass(xa, xb, out[0], out[1], out[2], mask, threshold, eps)
    d = np.abs(xb - xa)
    r = d / np.maximum(np.abs(xa), eps)
    assert out[0].tobytes() == d.tobytes()
    assert out[1].tobytes() == r.tobytes()
    assert np.array_equal(mask, np.abs(xa) >= threshold)
    assert out[2].tobytes() == (r * mask.astype(np.float32)).tobytes()


def test_extremes_flag_a_nan_like_numpy():
    x = np.array([1.0, -2.0, 3.0], np.float32)
    assert kernels.extremes(x) == (3.0, -2.0)
    x[1] = np.nan
    hi, lo = kernels.extremes(x)
    assert np.isnan(hi) and np.isnan(lo)
    assert kernels.extremes(np.array([-5, 7, 0], np.int8)) == (7.0, -5.0)


@pytest.mark.parametrize("values, want", [
    ([1.0, -2.0, 3.0], 3.0),
    ([-7.5, 2.0, -0.0], 7.5),
    ([0.0, -0.0], 0.0),
    ([1e-45, -3e-45], 3e-45),  # subnormals
    ([3.4e38, -3.4028235e38], 3.4028235e38),
    ([1.0, np.nan, 2.0], None),
    ([1.0, -np.inf], None),  # as _extent: an Inf peak is not finite, the exact path takes the pair
    ([np.inf, 2.0], None),
])
def test_abs_peak_is_numpys_largest_magnitude(values, want):
    x = np.array(values, np.float32)
    got = kernels.abs_peak(x)
    if want is None:
        assert np.isnan(got)
    else:
        assert got == float(np.abs(x).max()) == float(np.float32(want))


def test_abs_peak_on_a_long_tensor_matches_numpy():
    x = np.random.default_rng(3).standard_normal(3 * BLOCK + 5).astype(np.float32)
    x[1234] = -9.5
    assert kernels.abs_peak(x) == 9.5 == float(np.abs(x).max())


def test_runs_use_the_kernels_only_when_large_enough(monkeypatch):
    monkeypatch.delenv("MI_JIT", raising=False)
    assert not jit.worth(jit.WORTH_VALUES - 1) and jit.worth(jit.WORTH_VALUES)
    monkeypatch.setenv("MI_JIT", "always")
    assert jit.worth(1)
    monkeypatch.setenv("MI_JIT", "0")
    assert not jit.worth(10 * jit.WORTH_VALUES)
    assert jit.kernels("inspector_cli.diff.kernels") is None
