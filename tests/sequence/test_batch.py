"""Block reduction gives exactly the per-step metrics, edge cases included."""
from __future__ import annotations

import math

import numpy as np

from inspector_cli.diff.metrics import compare_arrays
from inspector_cli.sequence.batch import batch_decisions, batch_metrics
from inspector_cli.sequence.metrics import KEEP, decision_of, step_metrics


def test_block_rows_equal_compare_arrays_row_by_row():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 1, 5)).astype(np.float32)
    b = (a + rng.standard_normal((6, 1, 5)) * 0.1).astype(np.float32)
    b[1] = a[1]                      # identical: cosine 1, SQNR inf
    a[2], b[2] = 0.0, 0.0            # both zero: cosine 1 by definition
    b[3] = 0.0                       # one side zero: cosine 0
    b[4, 0, 2] = np.nan              # NaN: the exact path, with its counts
    pairs = [(a[i], b[i]) for i in range(6)]
    rows = batch_metrics(pairs, step_metrics)
    for i, row in enumerate(rows):
        expected = {k: v for k, v in compare_arrays(a[i], b[i], distribution=False).metrics().items()
                    if k in KEEP and v is not None}
        assert set(expected) <= set(row)
        for key, value in expected.items():
            same = row[key] == value or (math.isnan(value) and math.isnan(row[key]))
            assert same or abs(row[key] - value) <= 1e-12 * max(1.0, abs(value)), (i, key, row[key], value)
    assert rows[1]["cosine"] == 1.0 and rows[1]["sqnr"] == math.inf
    assert rows[2]["cosine"] == 1.0 and rows[3]["cosine"] == 0.0
    assert rows[4]["nonfinite_b"] == 1 and rows[4]["nonfinite_mismatch"] == 1 and "nonfinite_a" not in rows[4]


def test_block_decisions_equal_per_step_decisions():
    rng = np.random.default_rng(1)
    logits = [rng.standard_normal((2, 7)).astype(np.float32) for _ in range(5)]
    assert batch_decisions(logits) == [decision_of(v) for v in logits]
    probs = [np.array([[p]], np.float32) for p in (0.2, 0.7, 0.5)]
    assert batch_decisions(probs) == [[0], [1], [0]] == [decision_of(v) for v in probs]


def test_block_fold_equals_a_step_by_step_fold():
    """Worst (first occurrence, NaN worst), its step and the left-to-right mean of finite values (NaN/inf when a step disagrees so), for a
    block folded at once and for the same steps folded one by one, against a plain Python fold."""
    from inspector_cli.sequence.batch import columns_from_rows
    from inspector_cli.sequence.stats import SequenceStats

    rows = [{"cosine": 0.9, "max_abs": 0.5, "sqnr": 20.0}, {"cosine": 0.7, "max_abs": math.inf, "sqnr": 30.0},
            {"cosine": 0.7, "max_abs": 0.25, "sqnr": math.nan}, {"cosine": 0.95, "max_abs": 2.0, "sqnr": -math.inf}]
    steps = [10, 11, 12, 13]
    block = SequenceStats(["y"], [], (), None)
    block.fold_columns(steps, {"y": columns_from_rows(rows)}, {}, [None] * 4)
    one_by_one = SequenceStats(["y"], [], (), None)
    for step, row in zip(steps, rows):
        one_by_one.fold_columns([step], {"y": columns_from_rows([row])}, {}, [None])
    for stats in (block, one_by_one):
        summary = stats.output_summaries()[0]
        assert summary.worst == {"cosine": 0.7, "max_abs": math.inf, "sqnr": summary.worst["sqnr"]}
        assert math.isnan(summary.worst["sqnr"])
        assert summary.worst_step == {"cosine": 11, "max_abs": 11, "sqnr": 12}
        assert summary.mean["cosine"] == (((0.9 + 0.7) + 0.7) + 0.95) / 4
        # a step's +inf error / NaN SQNR makes the mean that too (issue 30: never read as agreement)
        assert summary.mean["max_abs"] == math.inf and math.isnan(summary.mean["sqnr"])
        assert summary.last == rows[-1]
