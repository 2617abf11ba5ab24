"""NaN/Inf is never agreement (issue 30): hand-computed values of every rule of diff/metrics."""
from __future__ import annotations

import math

import numpy as np

from inspector_cli.diff.engine import TensorTracker
from inspector_cli.diff.gates import parse_gate
from inspector_cli.diff.metrics import compare_arrays


def test_all_nan_logits_against_finite_ones_read_as_total_disagreement() -> None:
    a = np.array([[0.5, -1.0, 2.0]], np.float32)
    b = np.full((1, 3), np.nan, np.float32)
    m = compare_arrays(a, b).metrics()
    # before issue 30: cosine 1.0, max_abs 0.0, SQNR inf (no finite position left to compare)
    assert math.isnan(m["cosine"]) and m["max_abs"] == math.inf and m["sqnr"] == -math.inf
    assert m["rmse"] == math.inf and m["top1"] is None


def test_plus_against_minus_inf_is_a_mismatch_the_same_inf_is_not_and_nan_on_both_is_counted_apart() -> None:
    a = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    b = np.array([1.0, np.nan, -np.inf, -np.inf, 4.0])
    stats = compare_arrays(a, b, distribution=False)
    assert (stats.nonfinite_mismatch, stats.inf_same, stats.nan_same, stats.count) == (1, 1, 1, 2)
    finite = stats.metrics(allow_nonfinite=True)  # over positions 0 and 4: errors 0 and 2
    assert finite["max_abs"] == 2.0 and finite["mean_abs"] == 1.0 and finite["rmse"] == math.sqrt(2.0)
    assert finite["cosine"] == (1 * 1 + 2 * 4) / (math.sqrt(5) * math.sqrt(17))


def test_the_same_mask_in_both_leaves_equal_tensors_equal_and_different_ones_different() -> None:
    mask = np.array([[0.0, -np.inf], [0.0, 0.0]], np.float32)
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32) + mask
    equal = TensorTracker("s", "s", gates=[parse_gate("min-cosine", "0.999"), parse_gate("max-abs", "0")])
    equal.add("0", a, a.copy())
    assert all(t.failed == 0 for t in equal.tallies)
    assert equal.dataset_metrics()["cosine"] == 1.0 and equal.dataset_metrics()["sqnr"] == math.inf
    assert equal.total.nonfinite()["inf_same"] == 1 and equal.total.nonfinite()["mismatch"] == 0
    b = a.copy()
    b[1, 1] = 5.0
    different = TensorTracker("s", "s", gates=[parse_gate("max-abs", "0.5")])
    different.add("0", a, b)
    assert different.tallies[0].failed == 1 and different.dataset_metrics()["max_abs"] == 1.0


def test_sums_merge_exactly_and_a_mismatch_in_one_sample_makes_the_data_set_unbounded() -> None:
    clean = compare_arrays(np.array([1.0, 2.0]), np.array([1.0, 3.0]), distribution=False)
    bad = compare_arrays(np.array([1.0, 2.0]), np.array([np.nan, 2.0]), distribution=False)
    merged = compare_arrays(np.array([1.0, 2.0]), np.array([1.0, 3.0]), distribution=False).merge(bad)
    assert (merged.count, merged.nonfinite_mismatch, merged.nan_b, merged.sum_sq_err) == (3, 1, 1, 1.0)
    assert math.isnan(merged.metrics()["cosine"]) and merged.metrics()["max_abs"] == math.inf
    assert merged.metrics(allow_nonfinite=True)["max_abs"] == 1.0 == clean.metrics()["max_abs"]
    whole = compare_arrays(np.array([1.0, 2.0, 1.0, 2.0]), np.array([1.0, 3.0, np.nan, 2.0]), distribution=False)
    assert (whole.count, whole.sum_sq_err, whole.dot, whole.nonfinite_mismatch) == (3, 1.0, merged.dot, 1)


def test_nan_on_both_sides_leaves_the_finite_metrics_and_a_sequence_step_still_fails_on_it() -> None:
    from inspector_cli.sequence.metrics import step_metrics

    a = np.array([[1.0, np.nan, 2.0]], np.float32)
    b = np.array([[1.0, np.nan, 4.0]], np.float32)
    stats = compare_arrays(a, b, distribution=False)
    assert (stats.nan_same, stats.nonfinite_mismatch, stats.count) == (1, 0, 2)
    m = stats.metrics()  # over positions 0 and 2: errors 0 and 2
    assert m["max_abs"] == 2.0 and m["mean_abs"] == 1.0 and m["cosine"] == (1 + 8) / (math.sqrt(5) * math.sqrt(17))
    assert math.isnan(stats.metrics(nan_is_mismatch=True)["cosine"])
    # a decode cannot go on from a NaN, even one both models produce: the step stays non-finite (issue 30's rule)
    row = step_metrics(a, b)
    assert row["nonfinite_mismatch"] == 1 and math.isnan(row["cosine"]) and row["max_abs"] == math.inf
    assert step_metrics(a, b, allow_nonfinite=True)["max_abs"] == 2.0
