"""Every metric against hand-computed values, and the documented edge cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.metrics import PairStats, compare_arrays, metric_value_ok, shapes_compatible


def metrics(a, b, **kw):
    return compare_arrays(np.asarray(a), np.asarray(b), **kw).metrics()


def test_hand_computed_values():
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([1.0, 2.5, 2.0, 4.0], np.float32)
    m = metrics(a, b, distribution=False)
    # diff = [0, .5, -1, 0]; |a|^2 = 30; |b|^2 = 1 + 6.25 + 4 + 16 = 27.25; a.b = 1 + 5 + 6 + 16 = 28
    assert m["cosine"] == pytest.approx(28 / math.sqrt(30 * 27.25), rel=1e-12)
    assert m["max_abs"] == pytest.approx(1.0)
    assert m["mean_abs"] == pytest.approx(1.5 / 4)
    assert m["rmse"] == pytest.approx(math.sqrt(1.25 / 4))
    assert m["max_rel"] == pytest.approx(1 / 3)
    assert m["mean_rel"] == pytest.approx((0 + 0.25 + 1 / 3 + 0) / 4)
    assert m["sqnr"] == pytest.approx(10 * math.log10(30 / 1.25))
    assert m["kl"] is None and m["top1"] is None


def test_identical_and_zero_vectors():
    a = np.array([0.5, -1.5, 2.0])
    same = metrics(a, a.copy(), distribution=False)
    assert same["cosine"] == 1.0 and same["sqnr"] == math.inf and same["max_abs"] == 0.0
    zeros = np.zeros(3)
    both_zero = metrics(zeros, zeros, distribution=False)
    assert both_zero["cosine"] == 1.0 and both_zero["sqnr"] == math.inf
    one_zero = metrics(zeros, a, distribution=False)
    assert one_zero["cosine"] == 0.0 and one_zero["sqnr"] == -math.inf
    assert metrics(a, zeros, distribution=False)["cosine"] == 0.0
    assert metrics(a, -a, distribution=False)["cosine"] == -1.0


def test_relative_error_floor_for_zero_reference():
    m = metrics(np.array([0.0, 1.0]), np.array([1e-6, 1.0]), distribution=False)
    assert m["max_rel"] == pytest.approx(1e-6 / 1e-12)


def test_topk_overlap_per_row():
    a = np.array([[9, 8, 7, 6, 5, 4, 3, 2.0],   # top5 {0..4}, top1 0
                  [1, 2, 3, 4, 5, 6, 7, 8.0]])  # top5 {3..7}, top1 7
    b = np.array([[9, 8, 7, 1, 1, 4, 3, 2.0],   # top5 {0,1,2,5,6}: 3 shared; top1 0 (hit)
                  [8, 2, 3, 4, 5, 6, 7, 1.0]])  # top5 {0,3,4,5,6}: 4 shared {3,4,5,6}; top1 0 (miss)
    m = metrics(a.astype(np.float32), b.astype(np.float32))
    assert m["top1"] == pytest.approx((1 + 0) / 2)
    assert m["top5"] == pytest.approx((3 / 5 + 4 / 5) / 2)


def test_topk_not_applicable_when_axis_too_short():
    m = metrics(np.array([[1.0, 2.0, 3.0]]), np.array([[1.0, 2.0, 3.5]]))
    assert m["top5"] is None and m["top1"] == 1.0


def test_kl_on_softmax_of_logits():
    a = np.array([[1.0, 2.0, 3.0]])
    b = np.array([[1.0, 3.0, 2.0]])
    stats = compare_arrays(a, b)
    p = np.exp(a[0]) / np.exp(a[0]).sum()
    q = np.exp(b[0]) / np.exp(b[0]).sum()
    assert stats.kl_mode == "softmax"
    assert stats.metrics()["kl"] == pytest.approx(float(np.sum(p * np.log(p / q))))


def test_kl_on_raw_distributions():
    p = np.array([[0.7, 0.2, 0.1]])
    q = np.array([[0.5, 0.3, 0.2]])
    stats = compare_arrays(p, q)
    assert stats.kl_mode == "raw"
    assert stats.metrics()["kl"] == pytest.approx(float(np.sum(p * np.log(p / q))))


def test_nonfinite_positions_are_counted_not_compared():
    a = np.array([1.0, np.nan, np.inf, 2.0, -np.inf])
    b = np.array([1.0, np.nan, 5.0, 2.5, -np.inf])
    stats = compare_arrays(a, b, distribution=False)
    # position 4 (both -inf) agrees; position 1 holds NaN on both sides (nan_same: neither a match nor a
    # mismatch here, compare's findings decide); position 2 (inf vs 5) is a mismatch
    assert stats.nonfinite_mismatch == 1 and stats.inf_same == 1 and stats.nan_same == 1
    assert (stats.nan_a, stats.inf_a, stats.nan_b, stats.inf_b) == (1, 2, 1, 1)
    assert stats.count == 2
    assert stats.metrics(allow_nonfinite=True)["max_abs"] == pytest.approx(0.5)  # the finite positions alone
    metrics = stats.metrics()
    assert np.isnan(metrics["cosine"]) and metrics["sqnr"] == -np.inf
    assert all(metrics[k] == np.inf for k in ("max_abs", "mean_abs", "rmse", "max_rel", "mean_rel"))


def test_fp16_is_widened_before_arithmetic():
    a = np.full(4096, 60000, np.float16)
    b = a.copy()
    b[0] = np.float16(59968)
    m = metrics(a, b, distribution=False)
    # in fp16 the squared sums would overflow to inf; widened they are exact
    assert m["max_abs"] == 32.0
    assert math.isfinite(m["sqnr"])
    assert m["sqnr"] == pytest.approx(10 * math.log10(4096 * 60000.0 ** 2 / 32.0 ** 2))


def test_integer_and_bool_outputs():
    m = metrics(np.array([3, 1, 2], np.int64), np.array([3, 1, 5], np.int64))
    assert m["max_abs"] == 3.0 and m["top1"] is None and m["kl"] is None
    mb = metrics(np.array([True, False, True]), np.array([True, True, True]))
    assert mb["max_abs"] == 1.0 and mb["mean_abs"] == pytest.approx(1 / 3)


def test_merge_gives_exact_dataset_values():
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(size=50), rng.normal(size=50)) for _ in range(4)]
    total = PairStats()
    for a, b in pairs:
        total.merge(compare_arrays(a, b, distribution=False))
    a_all = np.concatenate([p[0] for p in pairs])
    b_all = np.concatenate([p[1] for p in pairs])
    whole = compare_arrays(a_all, b_all, distribution=False).metrics()
    merged = total.metrics()
    for key in ("cosine", "max_abs", "mean_abs", "rmse", "max_rel", "mean_rel", "sqnr"):
        assert merged[key] == pytest.approx(whole[key], rel=1e-12)
    assert total.samples == 4


def test_shape_compatibility():
    assert shapes_compatible((1, 1000), (1000,))
    assert not shapes_compatible((1, 64, 56, 56), (1, 32, 56, 56))


def test_gate_comparison_direction_and_nan():
    assert metric_value_ok("cosine", 0.995, 0.99)
    assert not metric_value_ok("cosine", 0.98, 0.99)
    assert metric_value_ok("max_abs", 0.05, 0.1)
    assert not metric_value_ok("max_abs", float("nan"), 0.1)
    assert metric_value_ok("top5", None, 0.8)
