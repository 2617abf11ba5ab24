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
