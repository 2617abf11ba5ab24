"""Negligible samples are counted one by one (mutation testing: `excused = 1` for `+= 1` survived the
single-sample tests of test_negligible.py). Values by hand."""
from __future__ import annotations

import numpy as np

from inspector_cli.diff.engine import TensorTracker
from inspector_cli.diff.gates import Gate

COSINE = Gate(flag="layer-min-cosine", metric="cosine", threshold=0.99)


def test_every_excused_sample_is_counted() -> None:
    # three samples: two of noise (max |b - a| 2e-7 <= atol 1e-5, cosine 1/3 and -1), one real
    # error (max |b - a| 1, cosine 0): two excused, one failed
    tracker = TensorTracker("t", "t", gates=[COSINE], distribution=False, keep_per_sample=False, atol=1e-5)
    tracker.add("s0", np.array([1e-7, -1e-7, 2e-7]), np.array([-1e-7, 1e-7, 2e-7]))
    tracker.add("s1", np.array([1e-7, 0.0]), np.array([-1e-7, 0.0]))
    tracker.add("s2", np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    tally = tracker.tallies[0]
    assert (tally.evaluated, tally.excused, tally.failed, tally.examples) == (3, 2, 1, ["s2"])
    assert tally.worst == -1.0  # s1: b = -a
    assert not tracker.negligible  # s2's error is 1 > atol
