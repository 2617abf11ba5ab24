"""The fused block reduction (sequence/fused.py) and its fold give the per-step path's values.

References: diff/metrics.compare_arrays per step and tensor, metrics.decision_of per step, the
per-tensor column fold (stats.fold_columns) of the same rows, and TimelineBuilder.add one step at a time.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.gates import parse_gate
from inspector_cli.diff.metrics import compare_arrays
from inspector_cli.sequence.batch import columns_from_rows
from inspector_cli.sequence.bundle import nonfinite_free
from inspector_cli.sequence.fused import ELEMENT, fuse
from inspector_cli.sequence.metrics import decision_of
from inspector_cli.sequence.stats import SequenceStats, TimelineBuilder


def block(steps: int = 7, seed: int = 0):
    """Per step [logits [2, 5], prob [1, 1], state [1, 1, 6]] for A and B; B = A + noise, with the edge cases
    of compare_arrays: an identical step, an all-zero step, a step where B is zero."""
    rng = np.random.default_rng(seed)
    outs_a, outs_b = [], []
    for k in range(steps):
        a = [rng.standard_normal((2, 5)).astype(np.float32), rng.random((1, 1)).astype(np.float32),
             rng.standard_normal((1, 1, 6)).astype(np.float32)]
        b = [(x + rng.standard_normal(x.shape) * 0.2).astype(np.float32) for x in a]
        if k == 1:
            b = [x.copy() for x in a]                       # identical: cosine 1, SQNR inf
        if k == 2:
            a[2][:] = 0.0
            b[2][:] = 0.0                                   # both zero: cosine 1
        if k == 3:
            b[0][:] = 0.0                                   # B zero: cosine 0
        outs_a.append(a)
        outs_b.append(b[::-1])  # B's outputs in another order: the index lists say where each is
    return outs_a, outs_b


NAMES = ["logits", "prob", "state"]


def test_fused_metrics_equal_compare_arrays_cell_by_cell():
    outs_a, outs_b = block()
    fused = fuse(outs_a, outs_b, NAMES, [0, 1, 2], [2, 1, 0], "logits")
    assert fused is not None and fused.values.shape == (len(ELEMENT), 7, 3)
    for k in range(7):
        for t in range(3):
            expected = compare_arrays(outs_a[k][t], outs_b[k][2 - t], distribution=False).metrics()
            for m, metric in enumerate(ELEMENT):
                got, want = float(fused.values[m, k, t]), expected[metric]
                assert got == want or abs(got - want) <= 1e-12 * max(1.0, abs(want)), (k, NAMES[t], metric, got, want)
    assert fused.values[0, 1, 0] == 1.0 and fused.values[5, 1, 0] == math.inf      # identical step
    assert fused.values[0, 2, 2] == 1.0 and fused.values[0, 3, 0] == 0.0            # both zero / B zero
    assert fused.decisions() == [[decision_of(outs_a[k][0]), decision_of(outs_b[k][2])] for k in range(7)]
    rows = fused.rows()
    assert set(rows[4][1]) == set(ELEMENT) and rows[4][1]["cosine"] == float(fused.values[0, 4, 1])


def test_fused_decision_of_one_value_is_thresholded():
    outs_a, outs_b = block()
    fused = fuse(outs_a, outs_b, NAMES, [0, 1, 2], [2, 1, 0], "prob")
    assert fused.decisions() == [[decision_of(outs_a[k][1]), decision_of(outs_b[k][1])] for k in range(7)]
    assert fused.differs().tolist() == [decision_of(outs_a[k][1]) != decision_of(outs_b[k][1]) for k in range(7)]


@pytest.mark.parametrize("case", ["nan", "inf", "shape", "int", "scalar"])
def test_blocks_the_fused_pass_leaves_to_the_per_tensor_path(case):
    outs_a, outs_b = block()
    if case == "nan":
        outs_b[4][0][0, 0, 0] = np.nan  # B's state (B lists its outputs reversed)
    elif case == "inf":
        outs_a[5][0][1, 1] = np.inf
    elif case == "shape":  # a dynamic axis: one step returns another shape
        outs_a[3][0] = np.zeros((3, 5), np.float32)
        outs_b[3][2] = np.zeros((3, 5), np.float32)
    elif case == "int":
        for step in outs_a:
            step[1] = np.array([[1]], np.int64)
    else:
        for step in outs_a + outs_b:
            step[1] = np.float32(0.5) * np.ones((), np.float32)
    assert fuse(outs_a, outs_b, NAMES, [0, 1, 2], [2, 1, 0], "logits") is None


def test_fused_fold_equals_the_column_fold():
    """Summaries (worst, its step, mean, last), gate tallies with their examples, first gate failure,
    first differing decision, agreement and time-line: the same from the fused block as from the rows."""
    outs_a, outs_b = block(40, seed=3)
    fused = fuse(outs_a, outs_b, NAMES, [0, 1, 2], [2, 1, 0], "logits")
    gates = (parse_gate("min-cosine", "0.99"), parse_gate("max-abs", "0.3"))
    steps = list(range(100, 140))
    first, second = (SequenceStats(["logits", "prob"], ["state"], gates, "logits", timeline_points=8) for _ in range(2))
    events = first.fold_fused(steps, fused)
    rows = fused.rows()
    columns = {n: columns_from_rows([rows[k][t] for k in range(40)]) for t, n in enumerate(NAMES)}
    expected = second.fold_columns(steps, {"logits": columns["logits"], "prob": columns["prob"]},
                                   {"state": columns["state"]}, fused.decisions())
    assert events == expected and any(failed for failed, _ in events)
    assert first.output_summaries() == second.output_summaries() and first.state_summaries() == second.state_summaries()
    assert first.gate_outcomes() == second.gate_outcomes()
    assert (first.first_gate_failure, first.first_decision_difference, first.agreement()) == \
        (second.first_gate_failure, second.first_decision_difference, second.agreement())
    assert first.timeline_result() == second.timeline_result() and first.timeline_result().bucket == 8


@pytest.mark.parametrize("size", [1, 3, 64, 256])
def test_time_line_from_blocks_equals_one_step_at_a_time(size):
    rng = np.random.default_rng(size)
    values, drift = rng.random(3000).tolist(), rng.random(3000).tolist()
    whole, blocks = TimelineBuilder("cosine", "y", capacity=64), TimelineBuilder("cosine", "y", capacity=64)
    for step in range(3000):
        whole.add(step, values[step], drift[step])
    for begin in range(0, 3000, size):
        blocks.add_many(list(range(begin, min(3000, begin + size))), values[begin:begin + size],
                        drift[begin:begin + size], clean=True)
    assert blocks.result(True) == whole.result(True) and whole.result(True).bucket == 64


def test_nonfinite_free_checks_every_float_output():
    steps = [[np.ones((1, 3), np.float32), np.array([1], np.int64)] for _ in range(5)]
    assert nonfinite_free(steps)
    steps[3][0] = np.array([[1.0, np.nan, 1.0]], np.float32)
    assert not nonfinite_free(steps)
    steps[3][0] = np.array([[1.0, 1.0, 1.0, np.inf]], np.float32)  # another shape at one step
    assert not nonfinite_free(steps)


def test_block_size_keeps_the_held_outputs_bounded():
    from inspector_cli.sequence.config import BLOCK_BYTES
    from inspector_cli.sequence.loop import _block_size

    small = [np.zeros((1, 128), np.float32)]
    assert _block_size(256, small, small) == 256                      # 1 KiB a step: the full block
    large = [np.zeros(BLOCK_BYTES // 64, np.uint8)]                    # 1/64 of the budget per model and step
    assert _block_size(256, large, large) == 32
    assert _block_size(256, [np.zeros(BLOCK_BYTES, np.uint8)], []) == 1  # one step over budget: steps one by one
