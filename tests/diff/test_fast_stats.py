"""Fast layer metrics: the same sufficient statistics as the exact float64 path."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.fast_stats import Scratch, fast_pair_stats
from inspector_cli.diff.metrics import compare_arrays


def test_hand_computed_values():
    a = np.array([1.0, 2.0, 0.0, -4.0], np.float32)
    b = np.array([1.5, 2.0, 0.25, -4.0], np.float32)
    m = fast_pair_stats(a, b).metrics()
    d = np.array([0.5, 0.0, 0.25, 0.0])
    assert m["max_abs"] == 0.5 and m["mean_abs"] == pytest.approx(0.75 / 4)
    assert m["sqnr"] == pytest.approx(10 * math.log10(21 / (d @ d)))
    cosine = (a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))
    assert m["cosine"] == pytest.approx(float(cosine), abs=1e-9)
    assert m["max_rel"] == pytest.approx(0.25 / 1e-12)  # a = 0 there: floored at 1e-12, as everywhere


@pytest.mark.parametrize("block", [7, 1 << 16])
def test_agrees_with_the_exact_path_across_blocks(block):
    rng = np.random.default_rng(3)
    a = np.maximum(rng.normal(size=100_003), 0).astype(np.float32)
    b = (a + rng.normal(0, 1e-3, size=a.size)).astype(np.float32)
    fast, exact = fast_pair_stats(a, b, Scratch(block)).metrics(), compare_arrays(a, b, distribution=False).metrics()
    for name in ("max_abs", "mean_abs", "rmse", "max_rel", "mean_rel", "sqnr"):
        assert fast[name] == pytest.approx(exact[name], rel=1e-5), name
    assert 1 - fast["cosine"] == pytest.approx(1 - exact["cosine"], rel=1e-4)  # accurate where cosine ~ 1


def test_int8_and_fp16_operands_are_dequantised_per_block():
    rng = np.random.default_rng(4)
    a = rng.normal(size=5000).astype(np.float32)
    q = np.clip(np.rint(a / 0.03) - 7, -128, 127).astype(np.int8)
    exact = compare_arrays(a, (q.astype(np.float64) + 7) * 0.03, distribution=False).metrics()
    fast = fast_pair_stats(a, q, Scratch(512), affine_b=(0.03, -7.0)).metrics()
    assert fast["sqnr"] == pytest.approx(exact["sqnr"], rel=1e-5) and fast["max_abs"] == pytest.approx(exact["max_abs"])
    h = a.astype(np.float16)
    assert fast_pair_stats(a, h).metrics()["max_abs"] == pytest.approx(float(np.abs(h.astype(np.float64) - a).max()))


def test_non_finite_values_take_the_exact_path():
    a = np.array([1.0, np.nan, 3.0, np.inf], np.float32)
    b = np.array([1.0, np.nan, 2.0, 5.0], np.float32)
    stats = fast_pair_stats(a, b)
    # NaN on both sides (position 1) is counted apart (nan_same); inf vs 5 (position 3) is a mismatch
    assert stats.nonfinite() == {"nan_a": 1, "inf_a": 1, "nan_b": 1, "inf_b": 0, "mismatch": 1, "inf_same": 0,
                                 "nan_same": 1}
    assert stats.count == 2 and stats.max_abs == 1.0 and stats.metrics(allow_nonfinite=True)["max_abs"] == 1.0
    assert stats.metrics()["max_abs"] == np.inf


def test_element_counts_must_agree():
    with pytest.raises(ValueError, match="element counts differ"):
        fast_pair_stats(np.zeros(3, np.float32), np.zeros(4, np.float32))


TINY = 2.0 ** -83  # ~1e-25, the activations of random-init MobileNetV2/EfficientNet (issue 14, zoo)


def test_tiny_values_do_not_underflow_in_the_squares():
    # float32 squares of ~1e-25 are 0: a.a = b.b = 0 made the cosine 1.0 (the truth here is 24/25)
    a = np.array([3.0, 4.0], np.float32) * np.float32(TINY)
    b = np.array([4.0, 3.0], np.float32) * np.float32(TINY)
    stats = fast_pair_stats(a, b)
    m = stats.metrics()
    assert m["cosine"] == pytest.approx(24 / 25, abs=1e-12)
    assert stats.sum_a2 == 25 * TINY**2 and stats.dot == 24 * TINY**2  # powers of two: exact
    assert m["max_abs"] == TINY and m["rmse"] == TINY and m["mean_abs"] == TINY
    assert m["sqnr"] == pytest.approx(10 * math.log10(25 / 2))
    # |a| < 1e-12 everywhere: relative errors are floored there, as in the exact path
    assert m["max_rel"] == m["max_rel_sig"] == pytest.approx(TINY / 1e-12, rel=1e-6)
    assert m["mean_rel"] == pytest.approx(TINY / 1e-12, rel=1e-6)


def test_fp16_flushed_to_zero_is_cosine_zero_not_one():
    # fp16 cannot hold 1e-25: the candidate is all zeros, the reference is not (cosine 0, SQNR 0 dB)
    a = np.array([3.0, 4.0], np.float32) * np.float32(TINY)
    b = a.astype(np.float16)
    assert not b.any()
    m = fast_pair_stats(a, b).metrics()
    assert m["cosine"] == 0.0 and m["sqnr"] == pytest.approx(0.0) and m["max_abs"] == 4 * TINY


def test_large_values_are_scaled_too():
    a = np.array([3.0, 4.0], np.float32) * np.float32(2.0 ** 70)  # squares overflow float32
    m = fast_pair_stats(a, a[::-1].copy()).metrics()
    assert m["cosine"] == pytest.approx(24 / 25, abs=1e-12) and m["max_abs"] == 2.0 ** 70


def test_peaks_too_far_apart_take_the_exact_path():
    a = np.array([3.0, 4.0], np.float32) * np.float32(2.0 ** 50)
    b = np.array([4.0, 3.0], np.float32) * np.float32(2.0 ** -50)
    assert fast_pair_stats(a, b).metrics()["cosine"] == pytest.approx(24 / 25, abs=1e-12)


def test_a_small_tensor_against_a_large_one_does_not_cancel():
    # a = 2**-12 everywhere, b = +1 on 50,100 elements and -1 on 49,900: cosine = 200 / 100,000 exactly.
    # (a.a + b.b - (b-a).(b-a)) / 2 cancels 1e5 against 1e5 in float32 sums (a LayerNorm mean read
    # 0.007 where the truth is 0.011); the dot product accumulated directly is exact here
    n = 100_000
    a = np.full(n, 2.0 ** -12, np.float32)
    b = np.where(np.arange(n) < 50_100, 1.0, -1.0).astype(np.float32)
    assert fast_pair_stats(a, b).metrics()["cosine"] == pytest.approx(0.002, abs=1e-9)
