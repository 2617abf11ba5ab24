"""diff/values.py: non-tensor values reduced to PairStats (issue 29), checked against hand-made cases."""
from __future__ import annotations

import numpy as np

from inspector_cli.diff.engine import TensorTracker
from inspector_cli.diff.metrics import compare_arrays
from inspector_cli.diff.values import layout, numbers_inside, reduce_values


def test_ragged_sequence_sums_equal_the_concatenation():
    rng = np.random.default_rng(0)
    a = [rng.standard_normal((1, n, 3)).astype(np.float32) for n in (4, 1)]
    b = [x + np.float32(0.1) * rng.standard_normal(x.shape).astype(np.float32) for x in a]
    got = reduce_values(a, b, distribution=False)
    flat = compare_arrays(np.concatenate([x.ravel() for x in a]), np.concatenate([x.ravel() for x in b]),
                          distribution=False)
    assert got.count == 15 and got.samples == 1
    for metric in ("cosine", "max_abs", "rmse", "sqnr"):
        assert abs(got.metrics()[metric] - flat.metrics()[metric]) < 1e-12, metric


def test_structure_mismatch_is_none():
    x = np.zeros((1, 2), np.float32)
    assert reduce_values([x, x], [x]) is None                       # sequence length
    assert reduce_values([x], [np.zeros((1, 3), np.float32)]) is None  # element shape
    assert reduce_values({1: 0.5, 2: 0.5}, {1: 0.5, 3: 0.5}) is None   # key set


def test_strings_first_difference_and_bytes_as_text():
    a = np.array([["cat", "dog"], ["eel", "fox"]], dtype=object)
    b = np.array([[b"cat", "dog"], ["eel", "gnu"]], dtype=object)  # bytes from an ONNX TensorProto
    stats = reduce_values(a, b)
    assert (stats.items, stats.items_unequal, stats.first_unequal) == (4, 1, ("[1][1]", "'fox'", "'gnu'"))
    assert all(v is None for v in stats.metrics().values())
    tracker = TensorTracker("label", "label")
    tracker.add("s0", a, a)
    tracker.add("s1", a, b)
    assert (tracker.total.items, tracker.total.items_unequal, tracker.unequal_samples) == (8, 1, 1)
    assert tracker.first_unequal == ("s1", "[1][1]", "'fox'", "'gnu'")


def test_zipmap_rows_keep_top1():
    a = [{0: 0.7, 1: 0.2, 2: 0.1}, {0: 0.1, 1: 0.1, 2: 0.8}]
    b = [{0: 0.2, 1: 0.7, 2: 0.1}, {0: 0.1, 1: 0.1, 2: 0.8}]
    stats = reduce_values(a, b)
    assert stats.metrics()["top1"] == 0.5 and abs(stats.max_abs - 0.5) < 1e-12
    assert layout(a) == layout(b) and layout(a).dtype == "seq(map(int64,float32))"


def test_numbers_inside():
    numbers, items = numbers_inside([np.ones((2, 2), np.float32), np.full((1, 2), 3, np.float32)])
    assert items == 2 and numbers.tolist() == [1, 1, 1, 1, 3, 3]
    assert numbers_inside(np.array(["a", "b"], dtype=object)) == (None, 2)
    assert numbers_inside({"b": 2.0, "a": 1.0})[0].tolist() == [1.0, 2.0]
