"""The significant relative error: |b - a| / |a| over elements with |a| >= 1e-3 * max|a| of the sample."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.diff.engine import TensorTracker
from inspector_cli.diff.fast_stats import Scratch, fast_pair_stats
from inspector_cli.diff.metrics import METRICS, PairStats, compare_arrays


def exact(a, b):
    return compare_arrays(np.asarray(a), np.asarray(b), distribution=False)


def test_hand_computed_with_elements_below_the_floor_and_zeros():
    # max|a| = 1000 -> floor 1.0; 0.5 and 0 are below it, 1.0 sits exactly on it (kept: >=)
    a = np.array([1000.0, 10.0, 0.5, 0.0, -200.0, 1.0], np.float32)
    b = np.array([1001.0, 11.0, 0.6, 1e-3, -210.0, 1.25], np.float32)
    for stats in (exact(a, b), fast_pair_stats(a, b), fast_pair_stats(a, b, Scratch(4))):
        # significant: 1/1000, 1/10, 10/200, 0.25/1
        assert stats.count_rel_sig == 4
        assert stats.max_rel_sig == pytest.approx(0.25, rel=1e-6)
        assert stats.sum_rel_sig == pytest.approx(0.001 + 0.1 + 0.05 + 0.25, rel=1e-6)
        m = stats.metrics()
        assert m["mean_rel_sig"] == pytest.approx(0.401 / 4, rel=1e-6)
        assert m["max_rel"] == pytest.approx(1e-3 / 1e-12, rel=1e-6)  # max_rel unchanged: the a = 0 element


def test_all_zero_reference_has_no_significant_element():
    for stats in (exact(np.zeros(4), np.ones(4)), fast_pair_stats(np.zeros(4, np.float32), np.ones(4, np.float32))):
        m = stats.metrics()
        assert stats.count_rel_sig == 0 and m["max_rel_sig"] is None and m["mean_rel_sig"] is None
        assert m["max_rel"] == pytest.approx(1e12)


def test_nan_and_inf_positions_are_left_out_but_finite_reference_values_set_the_floor():
    # a's finite max is 2000 (b is inf there, so that element is not compared) -> floor 2.0;
    # compared: 1000 (rel 0.002), 10 (rel 0.5), 1.5 (below the floor)
    a = np.array([1000.0, np.nan, 10.0, 2000.0, 1.5], np.float32)
    b = np.array([1002.0, 3.0, 15.0, np.inf, 9.0], np.float32)
    for stats in (exact(a, b), fast_pair_stats(a, b)):
        assert stats.count == 3 and stats.count_rel_sig == 2
        assert stats.max_rel_sig == pytest.approx(0.5)
        assert stats.sum_rel_sig == pytest.approx(0.502)


def test_merge_keeps_each_samples_floor():
    one = exact([1000.0, 0.5], [1000.0, 1.0])   # floor 1: only 1000 counts (rel 0)
    two = exact([1.0, 0.5], [1.1, 0.6])          # floor 1e-3: both count (0.1, 0.2)
    total = PairStats().merge(one).merge(two)
    assert total.count_rel_sig == 3
    assert total.max_rel_sig == pytest.approx(0.2)
    assert total.metrics()["mean_rel_sig"] == pytest.approx(0.3 / 3)
    merged_with_empty = PairStats().merge(exact(np.zeros(2), np.ones(2))).merge(two)
    assert merged_with_empty.metrics()["max_rel_sig"] == pytest.approx(0.2)


@pytest.mark.parametrize("block", [7, 1 << 16])
def test_layer_path_gives_the_same_numbers_as_the_exact_path(block):
    rng = np.random.default_rng(11)
    a = np.maximum(rng.normal(size=50_001), 0).astype(np.float32)  # ReLU: half zeros, many tiny values
    a[::97] *= 1e-5
    b = (a + rng.normal(0, 1e-3, size=a.size)).astype(np.float32)
    fast, slow = fast_pair_stats(a, b, Scratch(block)), exact(a, b)
    assert fast.count_rel_sig == slow.count_rel_sig == int((np.abs(a) >= 1e-3 * np.abs(a).max()).sum())
    assert fast.max_rel_sig == pytest.approx(slow.max_rel_sig, rel=1e-5)
    assert fast.sum_rel_sig == pytest.approx(slow.sum_rel_sig, rel=1e-5)
    assert slow.max_rel > 1e3 > slow.max_rel_sig  # the point of it: near-zero references dominate max_rel


def test_quantised_operands_in_the_layer_path():
    rng = np.random.default_rng(5)
    q = rng.integers(-128, 128, size=3000).astype(np.int8)
    deq = (q.astype(np.float64) + 3) * 0.02
    b = (deq * 1.01).astype(np.float32)
    fast = fast_pair_stats(q, b, Scratch(256), affine_a=(0.02, -3.0))
    slow = exact(deq, b)
    assert fast.count_rel_sig == slow.count_rel_sig
    assert fast.max_rel_sig == pytest.approx(slow.max_rel_sig, rel=1e-4)
    assert fast.sum_rel_sig == pytest.approx(slow.sum_rel_sig, rel=1e-4)


def test_engine_reports_dataset_worst_and_mean():
    tracker = TensorTracker("y", "y", distribution=False)
    tracker.add("s0", np.array([1000.0, 0.5]), np.array([1000.0, 1.0]))
    tracker.add("s1", np.array([1.0, 0.5]), np.array([1.1, 0.6]))
    assert tracker.dataset_metrics()["mean_rel_sig"] == pytest.approx(0.1)
    assert tracker.worst_metrics()["max_rel_sig"] == pytest.approx(0.2)
    assert tracker.mean_metrics()["max_rel_sig"] == pytest.approx(0.1)   # (0 + 0.2) / 2


def test_labels_say_what_is_measured():
    assert METRICS["max_rel_sig"].label == "max rel err (|a| >= 1e-3 max|a|)"
    assert "1e-3 * max|a|" in METRICS["mean_rel_sig"].description
