"""Edges of the distribution metrics and gates that mutation testing (scripts/mutation.sh) showed
untested: raw rows that sum to 1 only within the tolerance, several rows, logits large enough to
overflow exp without the max shift, and a gate value exactly at its threshold."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.diff.metrics import compare_arrays, metric_value_ok


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sum(p * np.log(p / q)))


def test_raw_rows_are_normalised_per_row_before_kl() -> None:
    # rows sum to 1.01 and 0.99 (inside the 2e-2 tolerance): each is divided by its own sum
    a = np.array([[0.71, 0.2, 0.1], [0.5, 0.29, 0.2]])
    b = np.array([[0.5, 0.3, 0.2], [0.6, 0.2, 0.2]])
    stats = compare_arrays(a, b)
    assert stats.kl_mode == "raw" and stats.kl_rows == 2
    p, q = a / a.sum(axis=1, keepdims=True), b / b.sum(axis=1, keepdims=True)
    expected = (_kl(p[0], q[0]) + _kl(p[1], q[1])) / 2
    assert stats.metrics()["kl"] == pytest.approx(expected, rel=1e-9)


def test_softmax_of_large_logits_is_shifted_by_the_row_max() -> None:
    # exp(1000) overflows: without subtracting the row's max the KL would be NaN
    a = np.array([[1000.0, 1001.0, 1002.0]])
    b = np.array([[1000.0, 1002.0, 1001.0]])
    stats = compare_arrays(a, b)
    p = np.exp(a[0] - 1002.0) / np.exp(a[0] - 1002.0).sum()
    q = np.exp(b[0] - 1002.0) / np.exp(b[0] - 1002.0).sum()
    assert stats.kl_mode == "softmax"
    assert stats.metrics()["kl"] == pytest.approx(_kl(p, q), rel=1e-9)


@pytest.mark.parametrize("name, value, threshold, ok", [
    ("max_abs", 0.1, 0.1, True),    # lower is better: at the threshold passes
    ("cosine", 0.99, 0.99, True),   # higher is better: at the threshold passes
    ("max_abs", 0.1000001, 0.1, False),
    ("cosine", 0.9899999, 0.99, False),
])
def test_gate_at_the_threshold(name: str, value: float, threshold: float, ok: bool) -> None:
    assert metric_value_ok(name, value, threshold) is ok


def _softmax(rows: np.ndarray) -> np.ndarray:
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_distribution_metrics_over_the_last_axis_of_a_3d_tensor() -> None:
    # [2, 3, 4]: 6 rows of 4 (the last axis), not 2 rows of 3
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4))
    b = a + rng.standard_normal((2, 3, 4)) * 0.5
    stats = compare_arrays(a, b)
    p, q = _softmax(a.reshape(-1, 4)), _softmax(b.reshape(-1, 4))
    assert stats.kl_rows == 6 and stats.topk_rows[1] == 6
    assert stats.metrics()["kl"] == pytest.approx(float(np.sum(p * np.log(p / q))) / 6, rel=1e-9)
    top1 = float(np.mean(a.reshape(-1, 4).argmax(axis=1) == b.reshape(-1, 4).argmax(axis=1)))
    assert stats.metrics()["top1"] == pytest.approx(top1)


def test_two_class_rows_have_kl_and_top1() -> None:
    stats = compare_arrays(np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([[0.6, 0.4], [0.7, 0.3]]))
    assert stats.kl_mode == "raw" and stats.kl_rows == 2
    assert stats.metrics()["top1"] == 0.5
    expected = (0.9 * np.log(0.9 / 0.6) + 0.1 * np.log(0.1 / 0.4) + 0.2 * np.log(0.2 / 0.7) + 0.8 * np.log(0.8 / 0.3)) / 2
    assert stats.metrics()["kl"] == pytest.approx(expected, rel=1e-9)


def test_one_hot_rows_are_raw_distributions_and_zero_terms_add_nothing() -> None:
    a = np.array([[0.0, 0.0, 1.0]])          # a zero minimum and a maximum of exactly 1: still a distribution
    b = np.array([[0.1, 0.2, 0.7]])
    stats = compare_arrays(a, b)
    assert stats.kl_mode == "raw"
    assert stats.metrics()["kl"] == pytest.approx(float(np.log(1.0 / 0.7)), rel=1e-9)


@pytest.mark.parametrize("a, b", [
    ([[-0.5, 0.5, 1.0]], [[0.2, 0.3, 0.5]]),   # sums to 1 but holds a negative: logits
    ([[0.2, 0.3, 0.5]], [[2.0, 1.0, -2.0]]),   # only one side is a distribution: both softmaxed
])
def test_rows_that_are_not_both_distributions_are_softmaxed(a, b) -> None:
    a, b = np.array(a), np.array(b)
    stats = compare_arrays(a, b)
    p, q = _softmax(a), _softmax(b)
    assert stats.kl_mode == "softmax"
    assert stats.metrics()["kl"] == pytest.approx(float(np.sum(p * np.log(p / q))), rel=1e-9)


def test_topk_equal_to_the_width_is_not_reported_whatever_the_order() -> None:
    a = np.arange(5.0)[None, :]
    stats = compare_arrays(a, a[:, ::-1], topk=(5, 1))
    assert stats.metrics()["top5"] is None and stats.metrics()["top1"] == 0.0


def test_top3_picks_exactly_the_three_largest() -> None:
    a = np.array([[9.0, 8.0, 7.0, 6.0, 5.0, 0.0]])
    b = np.array([[9.0, 8.0, 0.0, 7.0, 6.0, 5.0]])  # b's top 3: indices 0, 1, 3
    assert compare_arrays(a, b, topk=(3,)).metrics()["top3"] == pytest.approx(2 / 3)
