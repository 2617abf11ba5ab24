"""Acosh of an input whose minimum is exactly 0 (NaN: acosh is defined from 1 up) gets its domain
hint. `(x.min or 1) < 1` read a minimum of 0.0 as "unknown" and said nothing (found by mutation
testing, issue 15)."""
from __future__ import annotations

from inspector_cli.nanbisect.rootcause import hints_for
from inspector_cli.results.nan_bisect import TensorStats


def test_acosh_of_zero_is_outside_the_domain():
    x = TensorStats("x", "float32", [3], 3, zeros=1, min=0.0, max=2.0)
    hints = hints_for("Acosh", [x], [TensorStats("y", "float32", [3], 3, nan=1)], {})
    assert [(h.rule, h.message) for h in hints] == [("domain", "Acosh of values below 1: min of 'x' is 0")]


def test_acosh_with_no_finite_minimum_says_nothing_of_its_domain():
    x = TensorStats("x", "float32", [3], 3, nan=3)
    hints = hints_for("Acosh", [x], [TensorStats("y", "float32", [3], 3, nan=3)], {})
    assert [h.rule for h in hints] == ["unexplained"]
