"""fast_pair_stats when the candidate's peak alone changes the read scale: a's peak (2^20) is in the
safe range (factor 1), b's (2^40) is not, so the block pass runs again with factor 2^-41 once b's
extent is known (scripts/mutation.sh diff: that second pass was reached by no unit test)."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.diff.fast_stats import Scratch, fast_pair_stats
from inspector_cli.diff.metrics import compare_arrays


@pytest.mark.parametrize("block", [5, 1 << 16])
def test_a_candidate_peak_outside_the_safe_range_reads_both_again_at_its_scale(block: int) -> None:
    a = np.array([2.0 ** 20, 3.0, -5.0, 0.5, 1.0e-3, 7.0, -2.0 ** 19, 11.0], np.float32)
    b = a.copy()
    b[0] = 2.0 ** 40  # off by about 2^40: one huge error, the rest exact
    b[3] = 0.75
    fast = fast_pair_stats(a, b, Scratch(block)).metrics()
    exact = compare_arrays(a, b, distribution=False).metrics()
    assert fast["max_abs"] == pytest.approx(2.0 ** 40 - 2.0 ** 20, rel=1e-6)
    assert exact["max_abs"] == pytest.approx(2.0 ** 40 - 2.0 ** 20, rel=1e-6)
    for name in ("max_abs", "mean_abs", "rmse", "max_rel", "mean_rel", "sqnr", "cosine"):
        assert fast[name] == pytest.approx(exact[name], rel=1e-5), name
