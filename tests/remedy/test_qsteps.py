from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.remedy.qsteps import quant_step_error


def test_exact_off_by_one_is_one_step():
    scale = 0.1
    q = np.array([3, -7, 12, 0], dtype=np.int8)
    ref = q.astype(np.float32) * np.float32(scale)
    cand = (q + np.array([1, 0, -1, 0])).astype(np.float32) * np.float32(scale)
    err = quant_step_error(ref, cand, scale)
    assert err.max_steps == pytest.approx(1.0, abs=1e-6)
    assert err.mean_steps == pytest.approx(0.5, abs=1e-6)  # two of four positions off by one
    assert err.count == 4


def test_per_channel_scale_uses_axis():
    ref = np.zeros((2, 3), dtype=np.float32)
    cand = np.array([[0.2, 0.0, 0.0], [0.0, 0.0, 3.0]], dtype=np.float32)
    err = quant_step_error(ref, cand, np.array([0.1, 1.0]), axis=0)
    # row 0: 0.2 / 0.1 = 2 steps; row 1: 3 / 1 = 3 steps
    assert err.max_steps == pytest.approx(3.0)
    assert err.mean_steps == pytest.approx(5.0 / 6.0)


def test_non_finite_positions_are_skipped_and_bad_scale_rejected():
    err = quant_step_error(np.array([0.0, np.nan]), np.array([0.5, 1.0]), 0.5)
    assert (err.max_steps, err.count) == (1.0, 1)
    with pytest.raises(ValueError):
        quant_step_error(np.zeros(2), np.zeros(2), 0.0)
    with pytest.raises(ValueError):
        quant_step_error(np.zeros((2, 2)), np.zeros((2, 2)), np.array([1.0, 2.0]))
