"""How fast_pair_stats reads its operands: an fp16 reference, n-d arrays, the significance floor at
a scaled read, peaks too far apart, and a dequantisation scale equal to the read factor. Each case
was a surviving mutant of scripts/mutation.sh diff (no unit test reached it); values by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.fast_stats import Scratch, fast_pair_stats
from inspector_cli.diff.metrics import compare_arrays

ELEMENT = ("cosine", "max_abs", "mean_abs", "rmse", "max_rel", "mean_rel", "max_rel_sig", "mean_rel_sig", "sqnr")


def test_an_fp16_reference_is_read_from_its_bits() -> None:
    # the reference side's peak comes from the half bits (_peak_half): every value is exact in fp16
    a = np.array([1.5, -2.0, 0.25, 4.0], np.float16)
    b = np.array([1.0, -2.0, 0.5, 4.0], np.float32)
    m = fast_pair_stats(a, b).metrics()
    assert m["max_abs"] == 0.5
    assert m["mean_abs"] == 0.75 / 4
    assert m["rmse"] == math.sqrt((0.25 + 0.0625) / 4)
    assert m["max_rel"] == 1.0  # |0.5 - 0.25| / 0.25
    assert m["mean_rel"] == pytest.approx((0.5 / 1.5 + 1.0) / 4, rel=1e-7)
    assert m["sqnr"] == pytest.approx(10 * math.log10(22.3125 / 0.3125), rel=1e-12)
    dot = 1.5 + 4.0 + 0.125 + 16.0
    assert m["cosine"] == pytest.approx(dot / math.sqrt(22.3125 * 21.25), rel=1e-7)


@pytest.mark.parametrize("block", [4, 1 << 16])
def test_two_dimensional_arrays_are_compared_in_c_order(block: int) -> None:
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    b = np.array([[1.0, 2.0, 3.5], [4.0, 4.0, 6.0]], np.float32)
    stats = fast_pair_stats(a, b, Scratch(block))
    m = stats.metrics()
    assert stats.count == 6
    assert m["max_abs"] == 1.0 and m["mean_abs"] == 1.5 / 6
    assert m["max_rel"] == pytest.approx(0.2, rel=1e-7)  # |4 - 5| / 5
    assert m["mean_rel"] == pytest.approx((0.5 / 3 + 0.2) / 6, rel=1e-7)
    assert stats.sum_a2 == 91.0 and stats.sum_sq_err == 1.25


def test_peaks_too_far_apart_take_the_exact_path_without_distribution_metrics() -> None:
    # 3 vs 2^45: 44 binades apart, the exact float64 path computes the pair; a layer's stats have no
    # KL or top-k (fast_pair_stats never computes them), whichever path computed them
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.array([1.0, 2.0, 2.0 ** 45], np.float32)
    stats = fast_pair_stats(a, b)
    m = stats.metrics()
    assert m["max_abs"] == 2.0 ** 45 - 3.0
    assert m["kl"] is None and m["top1"] is None and m["top5"] is None
    assert stats.kl_mode is None and stats.topk_rows == {}


def test_a_candidate_80_binades_below_the_reference_keeps_its_squares() -> None:
    # b's squares (2^-160) vanish in float32 at the reference's scale: the pair must not be read
    # under one factor (more than 2^40 apart), or b.b reads 0 and the cosine 0 instead of 1/sqrt(2)
    a = np.array([1.0, 0.0], np.float32)
    b = np.array([2.0 ** -80, 2.0 ** -80], np.float32)
    m = fast_pair_stats(a, b).metrics()
    assert m["cosine"] == pytest.approx(1 / math.sqrt(2), rel=1e-12)
    assert m["max_abs"] == 1.0 - 2.0 ** -80


def test_significance_floor_at_a_reference_peak_read_scaled() -> None:
    # a's peak 2^40 is outside the safe range: read times 2^-41; the floor 1e-3 * 2^40 (~1.1e9) must
    # be scaled alike: 2^40 and 2^31 are significant, 2^28 and 3 are not
    a = np.array([2.0 ** 40, 2.0 ** 31, 2.0 ** 28, 3.0], np.float32)
    b = a * np.array([1.5, 1.25, 1.125, 2.0], np.float32)
    for stats in (fast_pair_stats(a, b), compare_arrays(a, b, distribution=False)):
        m = stats.metrics()
        assert stats.count_rel_sig == 2
        assert m["max_rel_sig"] == 0.5 and m["mean_rel_sig"] == 0.375
        assert m["max_rel"] == 1.0 and m["mean_rel"] == pytest.approx(1.875 / 4, rel=1e-7)


def test_significance_floor_after_the_candidate_peak_changes_the_scale() -> None:
    # a's peak 2^20 is read as it is, b's 2^40 is not: the second pass at factor 2^-41 must scale the
    # floor (1e-3 * 2^20 = 1048.576) too: 2^20 and 2^12 are significant, 2^8 and 3 are not
    a = np.array([2.0 ** 20, 2.0 ** 12, 2.0 ** 8, 3.0], np.float32)
    b = np.array([2.0 ** 40, 1.25 * 2.0 ** 12, 1.125 * 2.0 ** 8, 6.0], np.float32)
    for stats in (fast_pair_stats(a, b, Scratch(3)), compare_arrays(a, b, distribution=False)):
        m = stats.metrics()
        assert stats.count_rel_sig == 2
        assert m["max_rel_sig"] == pytest.approx(2.0 ** 20 - 1, rel=1e-7)
        assert m["mean_rel_sig"] == pytest.approx((2.0 ** 20 - 1 + 0.25) / 2, rel=1e-7)


def test_a_reference_just_below_the_floor_is_not_significant() -> None:
    # floor 1e-3 * 5 = 0.005; float32(0.005) = 0.004999999888 lies below it: that element is not
    # significant (the float32 test must use the next float32 up, as the float64 test does)
    small = np.float32(0.005)
    assert float(small) < 0.005
    a = np.array([5.0, small], np.float32)
    b = np.array([5.5, 0.006], np.float32)
    for stats in (fast_pair_stats(a, b), compare_arrays(a, b, distribution=False)):
        m = stats.metrics()
        assert stats.count_rel_sig == 1
        assert m["max_rel_sig"] == pytest.approx(0.1, rel=1e-7) and m["mean_rel_sig"] == pytest.approx(0.1, rel=1e-7)


def test_a_dequantisation_scale_equal_to_the_read_factor_is_still_applied() -> None:
    # a: int32 codes dequantised by 2^-31 (peak 1.5 * 2^-9); b's peak 1.5 * 2^30 sets the factor
    # 2^-31: scale * factor is 2^-62, not 1, and the codes must be multiplied by it
    q = np.array([1 << 22, 3 << 21, -(1 << 22), 5 << 20], np.int32)
    scale = 2.0 ** -31
    a = q.astype(np.float64) * scale  # 2^-9, 1.5 * 2^-9, -2^-9, 1.25 * 2^-9
    b = np.array([2.0 ** -9, 1.5 * 2.0 ** -9, -(2.0 ** -9), 1.5 * 2.0 ** 30], np.float32)
    fast = fast_pair_stats(q, b, affine_a=(scale, 0.0)).metrics()
    exact = compare_arrays(a, b, distribution=False).metrics()
    assert fast["max_abs"] == pytest.approx(1.5 * 2.0 ** 30, rel=1e-7)  # 1.25 * 2^-9 less, below float32's ulp
    assert fast["mean_abs"] == pytest.approx((1.5 * 2.0 ** 30) / 4, rel=1e-7)
    for name in ELEMENT:
        assert fast[name] == pytest.approx(exact[name], rel=1e-6), name


def test_an_fp16_candidate_far_below_a_huge_reference_is_not_read_at_its_scale() -> None:
    # b's fp16 peak (1.0) is known from its bits before the pass: 2^100 vs 1 is 100 binades apart, so
    # no read factor serves both (at a's, 2^-101, b's squares vanish and the cosine would read 0)
    a = np.array([2.0 ** 100, 0.0], np.float32)
    b = np.array([1.0, 1.0], np.float16)
    m = fast_pair_stats(a, b).metrics()
    assert m["cosine"] == pytest.approx(1 / math.sqrt(2), rel=1e-12)
    assert m["max_abs"] == 2.0 ** 100 - 1.0


def test_a_quantised_candidate_spread_is_judged_on_its_dequantised_values() -> None:
    # b's codes are 1 (raw extent 1) but dequantise to 2^-80: 60 binades below a's 2^-20, so the pair
    # takes the exact path; judged on the raw codes it would be read at factor 1, b.b = 2^-160
    # would vanish in float32 and the cosine read 0 instead of 1/sqrt(2)
    a = np.array([2.0 ** -20, 0.0], np.float32)
    q = np.array([1, 1], np.int8)
    m = fast_pair_stats(a, q, affine_b=(2.0 ** -80, 0.0)).metrics()
    assert m["cosine"] == pytest.approx(1 / math.sqrt(2), rel=1e-12)
    assert m["max_abs"] == 2.0 ** -20 - 2.0 ** -80


def test_a_quantised_candidate_read_again_at_its_own_scale_is_dequantised_again() -> None:
    # a's peak 2^20 is read as it is (factor 1); b's codes dequantise to up to 100 * 2^35 (about
    # 2^41.6), so the pass runs again at factor 2^-42, b dequantised again on the way
    a = np.array([2.0 ** 20, 3.0, -5.0, 0.5], np.float32)
    q = np.array([100, 0, 0, 0], np.int8)
    scale = 2.0 ** 35
    fast = fast_pair_stats(a, q, affine_b=(scale, 0.0)).metrics()
    exact = compare_arrays(a, q.astype(np.float64) * scale, distribution=False).metrics()
    assert fast["max_abs"] == pytest.approx(100 * 2.0 ** 35 - 2.0 ** 20, rel=1e-7)
    assert fast["mean_abs"] == pytest.approx((100 * 2.0 ** 35 - 2.0 ** 20 + 8.5) / 4, rel=1e-7)
    for name in ELEMENT:
        assert fast[name] == pytest.approx(exact[name], rel=1e-6), name
