"""PairStats sums and compare_arrays' edges that surviving mutants of scripts/mutation.sh diff showed
untested: merging maxima, KL modes and top-k counts; metrics of no compared element; which pairs get
KL and top-k (1-D, integer sides, overflowing squares, k equal to the width); the cosine's clamp;
size-1 dimensions. Values by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.engine import TensorTracker
from inspector_cli.diff.metrics import PairStats, compare_arrays, shapes_compatible


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sum(p * np.log(p / q)))


def test_merge_keeps_the_larger_significant_maximum_and_adds_its_sums() -> None:
    total = PairStats(max_rel_sig=0.5, sum_rel_sig=0.7, count_rel_sig=2)
    total.merge(PairStats(max_rel_sig=0.3, sum_rel_sig=0.3, count_rel_sig=1))
    assert (total.max_rel_sig, total.sum_rel_sig, total.count_rel_sig) == (0.5, 1.0, 3)
    assert total.metrics()["max_rel_sig"] == 0.5 and total.metrics()["mean_rel_sig"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("mine, theirs, merged", [
    (None, "raw", "raw"),          # the first sample with KL sets the mode
    ("softmax", None, "softmax"),  # a sample without KL leaves it
    ("raw", "raw", "raw"),
    ("raw", "softmax", "mixed"),   # rows read as distributions in one sample, as logits in another
])
def test_merge_of_kl_modes(mine: "str | None", theirs: "str | None", merged: str) -> None:
    assert PairStats(kl_mode=mine).merge(PairStats(kl_mode=theirs)).kl_mode == merged


def test_merge_adds_top_k_hits_and_rows_per_k() -> None:
    total = PairStats(topk_hits={1: 2.0}, topk_rows={1: 3})
    total.merge(PairStats(topk_hits={1: 1.0, 5: 0.6}, topk_rows={1: 1, 5: 1}))
    assert total.topk_hits == {1: 3.0, 5: 0.6} and total.topk_rows == {1: 4, 5: 1}
    m = total.metrics()
    assert m["top1"] == 0.75 and m["top5"] == 0.6


@pytest.mark.parametrize("a, b", [
    (np.array([-np.inf, np.inf]), np.array([-np.inf, np.inf])),  # every position the same Inf (agreeing)
    (np.zeros(0, np.float32), np.zeros(0, np.float32)),         # an empty tensor
    (np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32)),  # no rows (a detector's 0 boxes)
])
def test_no_compared_element_gives_zero_errors_not_a_division(a: np.ndarray, b: np.ndarray) -> None:
    stats = compare_arrays(a, b)
    m = stats.metrics()
    assert stats.count == 0 and stats.samples == 1 and stats.nonfinite_mismatch == 0
    assert (m["mean_abs"], m["rmse"], m["mean_rel"], m["max_abs"]) == (0.0, 0.0, 0.0, 0.0)
    assert m["cosine"] == 1.0 and m["sqnr"] == math.inf
    assert m["max_rel_sig"] is None and m["mean_rel_sig"] is None
    assert m["kl"] is None and m["top1"] is None and stats.kl_mode is None


def test_a_tracker_compares_an_output_with_no_rows() -> None:
    # a detector that found nothing in either model: boxes of shape (0, 4) on both sides agree
    tracker = TensorTracker("boxes", "boxes")
    assert tracker.add("s0", np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32)) is not None
    assert tracker.dataset_metrics()["max_abs"] == 0.0 and tracker.total.count == 0


def test_overflowing_squares_still_get_kl_and_top_k() -> None:
    # a.a overflows float64: the exact path takes the pair; every value is finite, so the
    # distribution metrics are computed (softmax of either row is [1, 0, 0])
    a = np.array([[1e200, 0.0, -1e200]])
    b = np.array([[1e200, -1e200, 0.0]])
    stats = compare_arrays(a, b)
    m = stats.metrics()
    assert m["max_abs"] == 1e200 and stats.count == 3
    assert stats.kl_mode == "softmax" and stats.kl_rows == 1
    assert m["kl"] == 0.0 and m["top1"] == 1.0


@pytest.mark.parametrize("a_dtype, b_dtype", [(np.float32, np.int64), (np.int64, np.float32)])
def test_a_non_float_side_gets_no_distribution_metrics(a_dtype: type, b_dtype: type) -> None:
    a = np.array([[0, 0, 1]], a_dtype)
    b = np.array([[0, 1, 0]], b_dtype)
    stats = compare_arrays(a, b)
    m = stats.metrics()
    assert m["kl"] is None and m["top1"] is None and stats.kl_mode is None
    assert m["max_abs"] == 1.0 and m["mean_abs"] == pytest.approx(2 / 3)


def test_a_one_dimensional_output_is_one_row() -> None:
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 3.0, 2.0])
    stats = compare_arrays(a, b)
    m = stats.metrics()
    assert stats.kl_mode == "softmax" and stats.kl_rows == 1
    assert m["kl"] == pytest.approx(_kl(_softmax(a), _softmax(b)), rel=1e-12)
    assert m["top1"] == 0.0  # argmax 2 vs 1
    assert m["top5"] is None  # 3 classes: top-5 is not informative


def test_top_k_of_as_many_classes_as_k_is_skipped() -> None:
    # two classes: top-2 always overlaps fully; top-1 is informative
    a = np.array([[0.3, 0.7]])
    b = np.array([[0.6, 0.4]])
    stats = compare_arrays(a, b, topk=(1, 2))
    assert stats.topk_rows == {1: 1} and stats.topk_hits == {1: 0.0}
    assert "top2" not in stats.metrics()


def test_a_row_just_above_one_is_read_as_logits() -> None:
    # [1.01, 0] sums to 1.01 (inside the tolerance) but holds a value above 1: not a distribution
    a = np.array([[1.01, 0.0]])
    b = np.array([[1.0, 0.0]])
    stats = compare_arrays(a, b)
    assert stats.kl_mode == "softmax"
    assert stats.metrics()["kl"] == pytest.approx(_kl(_softmax(a[0]), _softmax(b[0])), rel=1e-9)


def test_cosine_of_parallel_vectors_is_clamped_to_one() -> None:
    # b = 1.1 a: the cosine is 1, but dot / (|a| |b|) rounds to 1 + 2^-52 here (the errors are not 0,
    # so the identical-tensor shortcut does not apply)
    a = np.array([1.0 + i / 3 for i in range(5)])  # 1, 4/3, 5/3, 2, 7/3 (rounded)
    b = a * 1.1
    stats = compare_arrays(a, b, distribution=False)
    assert stats.dot / (math.sqrt(stats.sum_a2) * math.sqrt(stats.sum_b2)) > 1.0  # the case is real
    assert stats.metrics()["cosine"] == 1.0


@pytest.mark.parametrize("shape_a, shape_b, compatible", [
    ((2, 3), (1, 2, 3), True),
    ((1, 2, 3), (2, 3), True),
    ((2, 3), (3, 2), False),
    ((2, 3), (2, 1, 3, 1), True),
])
def test_size_one_dimensions_are_dropped_on_both_sides(shape_a: tuple, shape_b: tuple, compatible: bool) -> None:
    assert shapes_compatible(shape_a, shape_b) is compatible


def test_a_tracker_folds_in_the_metrics_after_an_undefined_one() -> None:
    # an all-zero reference has no significant element (max_rel_sig None): the metrics listed
    # after it (SQNR, KL, top-1) are still folded into the worst and mean values
    tracker = TensorTracker("y", "y")
    tracker.add("s0", np.array([0.0, 0.0]), np.array([3.0, 4.0]))
    worst, mean = tracker.worst_metrics(), tracker.mean_metrics()
    assert worst["max_rel_sig"] is None and mean["max_rel_sig"] is None
    assert worst["sqnr"] == -math.inf and mean["sqnr"] == -math.inf
    assert worst["top1"] == 0.0 and mean["top1"] == 0.0  # argmax 0 (a tie, the first) vs 1
    kl = _kl(np.array([0.5, 0.5]), _softmax(np.array([3.0, 4.0])))
    assert worst["kl"] == pytest.approx(kl, rel=1e-12) and mean["kl"] == pytest.approx(kl, rel=1e-12)
    assert worst["max_abs"] == 4.0 and mean["mean_abs"] == 3.5
