"""The exact (float64, non-finite-aware) path of compare_arrays and the float32 blocks of
fast_pair_stats, with hand-computed values: the cases mutation testing (scripts/mutation.sh diff)
found unexercised."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.engine import TensorTracker
from inspector_cli.diff.fast_stats import Scratch, fast_pair_stats
from inspector_cli.diff.metrics import PairStats, accumulate_rel_sig, compare_arrays


def exact(a, b) -> PairStats:
    return compare_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64), distribution=False)


# ---- the significant relative error on the exact path ------------------------------------------------
def test_rel_sig_with_a_nan_elsewhere_uses_the_finite_references_peak() -> None:
    # -inf in both at one position (a mask) sends the pair to the exact path; peak 2 -> floor 0.002
    stats = exact([1.0, 2.0, -np.inf], [1.5, 2.0, -np.inf])
    assert stats.nonfinite_mismatch == 0 and stats.inf_same == 1 and stats.count == 2
    assert stats.count_rel_sig == 2 and stats.max_rel_sig == 0.5 and stats.sum_rel_sig == 0.5
    assert stats.metrics()["mean_rel_sig"] == 0.25


def test_rel_sig_element_exactly_on_the_floor_counts_on_the_exact_path() -> None:
    # peak 1000 -> floor 1.0; |a| = 1 sits on it (kept: >=), |a| = 0.5 is below
    stats = exact([1000.0, 1.0, 0.5, np.inf], [1000.0, 2.0, 5.0, np.inf])
    assert stats.count == 3 and stats.count_rel_sig == 2
    assert stats.max_rel_sig == 1.0 and stats.sum_rel_sig == 1.0
    assert stats.max_rel == 9.0  # the plain relative error keeps the small reference


def test_overflowing_squares_take_the_exact_path_without_a_given_peak() -> None:
    # finite values whose squares overflow float64: a.a is inf, so the fast path gives up
    stats = exact([1e200, 2e200], [1.1e200, 2e200])
    assert stats.count == 2 and stats.nonfinite_mismatch == 0
    assert stats.max_rel == pytest.approx(0.1) and stats.max_rel_sig == pytest.approx(0.1)
    assert stats.count_rel_sig == 2 and stats.sum_rel_sig == pytest.approx(0.1)
    assert stats.max_abs == pytest.approx(1e199) and math.isinf(stats.sum_a2)


def test_all_zero_reference_on_the_exact_path_has_no_significant_element() -> None:
    stats = exact([0.0, 0.0], [1e200, 1.0])  # b.b overflows: exact path, peak 0
    assert stats.count == 2 and stats.count_rel_sig == 0 and stats.max_rel_sig == 0.0
    assert stats.metrics()["max_rel_sig"] is None and stats.metrics()["mean_rel_sig"] is None
    assert stats.max_rel == pytest.approx(1e212)


def test_accumulate_rel_sig_adds_into_the_stats() -> None:
    stats = PairStats()
    abs_a = np.array([10.0, 1.0, 0.001])
    accumulate_rel_sig(stats, abs_a, np.array([0.5, 0.25, 9.0]), peak=10.0)  # floor 0.01: two elements
    accumulate_rel_sig(stats, abs_a, np.array([0.1, 0.75, 9.0]), peak=10.0)
    assert stats.count_rel_sig == 4 and stats.sum_rel_sig == pytest.approx(1.6) and stats.max_rel_sig == 0.75
    accumulate_rel_sig(stats, abs_a, np.array([5.0, 5.0, 5.0]), peak=0.0)  # no significant element
    assert stats.count_rel_sig == 4 and stats.max_rel_sig == 0.75
    accumulate_rel_sig(stats, abs_a, np.array([5.0, 5.0, 5.0]), peak=1e9)  # floor 1e6: none reaches it
    assert stats.count_rel_sig == 4


# ---- the tracker passes its own top-k ------------------------------------------------------------------
def test_tracker_uses_its_topk() -> None:
    tracker = TensorTracker("p", "p", topk=(2,))
    metrics = tracker.add("s0", np.array([[0.1, 0.5, 0.4]], np.float32), np.array([[0.5, 0.1, 0.4]], np.float32))
    assert metrics is not None
    assert metrics["top2"] == 0.5  # {1, 2} vs {0, 2}: one of two
    assert metrics["top1"] is None  # not asked for
    assert tracker.shape_mismatch_samples == 0


def test_tracker_counts_every_shape_mismatch() -> None:
    tracker = TensorTracker("y", "y")
    for i in range(3):
        tracker.add(f"s{i}", np.ones((1, 4), np.float32), np.ones((1, 5), np.float32))
    assert tracker.shape_mismatch_samples == 3 and tracker.samples == 3


# ---- fast_pair_stats: float32 element arithmetic, as documented ------------------------------------------
def test_fast_stats_compute_elements_in_float32() -> None:
    # 1 - 1e-8 is 1 in float32: the block difference and the relative error are float32 values
    a, b = np.array([1e-8], np.float32), np.array([1.0], np.float32)
    stats = fast_pair_stats(a, b)
    assert stats.max_abs == 1.0 and stats.sum_abs == 1.0
    assert stats.max_rel == float(np.float32(1.0) / np.float32(1e-8))
    # float64 inputs are rounded to float32 blocks: a difference below float32's resolution vanishes
    wide = fast_pair_stats(np.array([1.0, 2.0]), np.array([1.0 + 1e-9, 2.0]))
    assert wide.max_abs == 0.0 and wide.sum_sq_err == 0.0 and wide.metrics()["cosine"] == 1.0


def test_fast_stats_integers_without_affine_are_widened_before_squaring() -> None:
    a = np.array([100, -100, 7], np.int8)
    b = np.array([100, -100, 9], np.int8)
    stats = fast_pair_stats(a, b, Scratch(2))
    assert stats.sum_a2 == 20049.0 and stats.sum_b2 == 20081.0 and stats.sum_sq_err == 4.0
    assert stats.max_abs == 2.0 and stats.dot == 20063.0


def test_fast_stats_affine_applies_to_a_float_operand_too() -> None:
    # value = (q - zero) * scale whatever q's dtype: a float32 tensor given an affine is dequantised
    a = np.array([1.0, 2.0], np.float32)
    stats = fast_pair_stats(a, np.array([4.0, 6.0], np.float32), affine_a=(2.0, -1.0))
    assert stats.sum_sq_err == 0.0 and stats.sum_a2 == 16.0 + 36.0


def test_fast_stats_one_element_and_empty_tensors() -> None:
    one = fast_pair_stats(np.array([2.0], np.float32), np.array([3.0], np.float32))
    assert (one.samples, one.count, one.max_abs, one.sum_sq_err, one.sum_a2, one.sum_b2) == (1, 1, 1.0, 1.0, 4.0, 9.0)
    assert one.max_rel == 0.5 and one.count_rel_sig == 1
    empty = fast_pair_stats(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32))
    assert (empty.samples, empty.count, empty.sum_a2, empty.max_abs) == (1, 0, 0.0, 0.0)


def test_fast_stats_zero_reference_divides_by_the_float32_floor() -> None:
    stats = fast_pair_stats(np.array([0.0, 1.0], np.float32), np.array([1.0, 1.0], np.float32))
    # |b - a| / max(|a|, 1e-12) in float32 blocks (the exact float64 path would give 1e12 rounded otherwise)
    assert stats.max_rel == float(np.float32(1.0) / np.float32(1e-12))
    assert stats.count_rel_sig == 1 and stats.max_rel_sig == 0.0


def test_fast_stats_past_float32_range_gives_exact_sums_without_distribution() -> None:
    # finite in float64, but 1e30 squared is past float32: the sums stay right and no KL/top-k appear
    a = np.array([[1e30, 2e30, 3e30]])
    stats = fast_pair_stats(a, a * 1.5)
    assert stats.count == 3 and stats.max_abs == pytest.approx(1.5e30) and stats.sum_a2 == pytest.approx(14e60)
    assert stats.kl_rows == 0 and stats.topk_rows == {} and stats.samples == 1


@pytest.mark.parametrize("side", ["a", "b"])
def test_fast_stats_nan_fallback_still_dequantises(side: str) -> None:
    # a NaN on the float side sends the pair to the exact path, which must dequantise the int8 side
    q = np.array([1, 2, 3], np.int8)                  # (q - 1) * 0.5 = 0, 0.5, 1
    real = np.array([0.0, 0.5, np.nan])
    if side == "a":
        stats = fast_pair_stats(q, real, affine_a=(0.5, 1.0))
    else:
        stats = fast_pair_stats(real, q, affine_b=(0.5, 1.0))
    assert stats.count == 2 and stats.nonfinite_mismatch == 1
    assert stats.max_abs == 0.0 and stats.sum_a2 == 0.25 and stats.sum_b2 == 0.25


@pytest.mark.parametrize("q, zero, values", [
    ([-5, 5], -5.0, [0.0, 10.0]),    # (q - zero): hi - zero = 10, lo - zero = 0
    ([-5, 5], 5.0, [-10.0, 0.0]),    # hi - zero = 0, lo - zero = -10
])
def test_fast_stats_peak_of_a_quantised_reference_uses_its_zero_point(q, zero, values) -> None:
    stats = fast_pair_stats(np.array(q, np.int8), np.array(values, np.float32) * 1.1, affine_a=(1.0, zero))
    # the peak |a| is 10: the floor is 0.01, the element of 10 is significant (relative error 0.1)
    assert stats.count_rel_sig == 1 and stats.max_rel_sig == pytest.approx(0.1)
    assert stats.metrics()["max_rel_sig"] == pytest.approx(0.1)


def test_softmax_shifts_each_row_by_its_own_max() -> None:
    # a row far below another row's max must not underflow to 0/0: KL of row 2 is
    # KL(softmax[0, 1] || softmax[1, 0]) = (p1 - p0) * ln(p1 / p0) = tanh(0.5) * 1
    a = np.array([[1000.0, 999.0], [0.0, 1.0]])
    b = np.array([[1000.0, 999.0], [1.0, 0.0]])
    stats = compare_arrays(a, b)
    assert stats.kl_mode == "softmax" and stats.kl_rows == 2
    assert stats.metrics()["kl"] == pytest.approx(math.tanh(0.5) / 2, rel=1e-12)
