"""Negligible pairs (issue 14, zoo: Swin's LayerNorm mean, values ~6e-8 beside inputs ~3, read cosine 0.1 and
was named the first divergence of healthy fp16 and int8 models): a sample whose max |b - a| is at most the
tracker's `atol` passes every gate but max_abs; the pair is negligible when every sample is."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.engine import TensorTracker
from inspector_cli.diff.gates import Gate

COSINE = Gate(flag="layer-min-cosine", metric="cosine", threshold=0.99)
SQNR = Gate(flag="layer-min-sqnr", metric="sqnr", threshold=20.0)
MAX_ABS = Gate(flag="layer-max-abs", metric="max_abs", threshold=1e-7)

# noise against noise: a = [1, -1, 2] e-7, b = [-1, 1, 2] e-7
NOISE_A = np.array([1e-7, -1e-7, 2e-7], np.float64)
NOISE_B = np.array([-1e-7, 1e-7, 2e-7], np.float64)


def _tracker(atol: float, *gates: Gate) -> TensorTracker:
    return TensorTracker("t", "t", gates=list(gates), distribution=False, keep_per_sample=False, atol=atol)


def test_noise_pair_passes_scale_free_gates_and_is_negligible() -> None:
    tracker = _tracker(1e-5, COSINE, SQNR)
    metrics = tracker.add("s0", NOISE_A, NOISE_B)
    assert metrics is not None
    # cosine (-1 - 1 + 4) / 6 = 1/3; SQNR 10 log10(6 / 8); max |b - a| = 2e-7
    assert metrics["cosine"] == pytest.approx(1 / 3, abs=1e-12)
    assert metrics["sqnr"] == pytest.approx(10 * math.log10(6 / 8), abs=1e-9)
    assert metrics["max_abs"] == pytest.approx(2e-7, rel=1e-12)
    assert [(t.gate.metric, t.evaluated, t.failed, t.excused) for t in tracker.tallies] == [("cosine", 1, 0, 1),
                                                                                            ("sqnr", 1, 0, 1)]
    assert tracker.negligible
    # the worst value seen is still recorded: the metric is reported, only not judged
    assert tracker.tallies[0].worst == pytest.approx(1 / 3, abs=1e-12)


def test_without_atol_the_same_pair_fails() -> None:
    tracker = _tracker(0.0, COSINE)
    tracker.add("s0", NOISE_A, NOISE_B)
    assert (tracker.tallies[0].failed, tracker.tallies[0].excused, tracker.tallies[0].examples) == (1, 0, ["s0"])
    assert not tracker.negligible


def test_max_abs_gate_still_applies_to_a_negligible_pair() -> None:
    tracker = _tracker(1e-5, COSINE, MAX_ABS)
    tracker.add("s0", NOISE_A, NOISE_B)
    assert [(t.gate.metric, t.failed, t.excused) for t in tracker.tallies] == [("cosine", 0, 1), ("max_abs", 1, 0)]


def test_error_just_above_atol_is_judged() -> None:
    # a = [3e-5, 0], b = [0, 3e-5]: orthogonal, max |b - a| 3e-5 > 1e-5
    tracker = _tracker(1e-5, COSINE)
    metrics = tracker.add("s0", np.array([3e-5, 0.0]), np.array([0.0, 3e-5]))
    assert metrics is not None and metrics["cosine"] == 0.0 and metrics["max_abs"] == pytest.approx(3e-5)
    assert tracker.tallies[0].failed == 1
    assert not tracker.negligible


def test_atol_is_inclusive() -> None:
    tracker = _tracker(2e-7, COSINE)  # max |b - a| is exactly 2e-7
    tracker.add("s0", NOISE_A, NOISE_B)
    assert tracker.tallies[0].failed == 0 and tracker.negligible


def test_one_sample_above_atol_makes_the_pair_count() -> None:
    tracker = _tracker(1e-5, COSINE)
    tracker.add("quiet", NOISE_A, NOISE_B)
    tracker.add("loud", np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))  # cosine 0, |b - a| 1
    tally = tracker.tallies[0]
    assert (tally.evaluated, tally.failed, tally.excused, tally.examples) == (2, 1, 1, ["loud"])
    assert not tracker.negligible
    assert tracker.dataset_metrics()["max_abs"] == 1.0


def test_nonfinite_mismatch_is_never_negligible() -> None:
    tracker = _tracker(1e-5, COSINE)
    tracker.add("s0", np.array([np.nan, 1e-7]), np.array([0.0, 1e-7]))
    assert tracker.total.nonfinite_mismatch == 1 and tracker.total.max_abs == 0.0
    assert (tracker.tallies[0].failed, tracker.tallies[0].excused) == (1, 0)
    assert not tracker.negligible


def test_passing_sample_is_not_excused() -> None:
    tracker = _tracker(1e-5, COSINE)
    tracker.add("s0", np.array([1e-7, 2e-7]), np.array([1e-7, 2e-7]))  # identical: cosine 1, nothing to excuse
    assert (tracker.tallies[0].failed, tracker.tallies[0].excused) == (0, 0) and tracker.negligible


def test_shape_mismatch_is_never_negligible() -> None:
    tracker = _tracker(1e-5, COSINE)
    assert tracker.add("s0", np.zeros(3), np.zeros(4)) is None
    assert tracker.tallies[0].failed == 1
    assert not tracker.negligible


def test_no_sample_is_not_negligible() -> None:
    assert not _tracker(1e-5, COSINE).negligible
