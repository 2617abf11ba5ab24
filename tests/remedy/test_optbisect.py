from __future__ import annotations

import math

import numpy as np

from inspector_cli.core.runner import OptLevel, RuntimeConfig, Session
from inspector_cli.remedy.optbisect import (
    bisect_optimizers,
    minimise,
    with_disabled_optimizers,
)

from .models import dq_float_conv

DISABLE = RuntimeConfig(opt_level=OptLevel.DISABLE)
ALL = RuntimeConfig(opt_level=OptLevel.ALL)


def samples():
    rng = np.random.default_rng(2)
    return [{"x": rng.normal(0, 1, size=(1, 2, 6, 6)).astype(np.float32)} for _ in range(3)]


def test_bisection_names_the_one_transformer():
    found = bisect_optimizers(dq_float_conv().SerializeToString(), samples(), DISABLE, ALL, atol=1e-4, rtol=1e-3)
    assert found.differs and found.max_abs_diff > 0.01
    assert "WeightBiasQuantization" in found.applied
    assert found.culprits == ["WeightBiasQuantization"]
    assert not found.together
    assert found.verdict == "WeightBiasQuantization changes the outputs"
    assert "conv" in found.rewritten_nodes["WeightBiasQuantization"]
    t = len(found.applied)
    assert found.session_builds <= 2 * math.log2(t) + 2 if t > 1 else found.session_builds <= 3
    # every trial that kept WeightBiasQuantization on differed, and none without it did
    assert all(trial["differs"] == ("WeightBiasQuantization" in trial["enabled"]) for trial in found.trials)


def test_same_settings_do_not_differ():
    found = bisect_optimizers(dq_float_conv().SerializeToString(), samples(), ALL, ALL)
    assert not found.differs and found.culprits == []
    assert found.session_builds == 2
    assert found.verdict == "the outputs do not differ between the two settings"


def counting(culprit_sets):
    """differs(enabled) of a model whose outputs change when any of `culprit_sets` is fully enabled."""
    calls = []

    def differs(enabled):
        calls.append(sorted(enabled))
        return any(all(c in enabled for c in group) for group in culprit_sets)
    return differs, calls


def test_minimise_finds_one_culprit_within_the_bound():
    names = [f"T{i}" for i in range(16)]
    for culprit in names:
        differs, calls = counting([{culprit}])
        assert minimise(names, [], differs) == [culprit]
        assert len(calls) <= 2 * math.log2(16)  # + the 2 reference builds of bisect_optimizers


def test_minimise_reports_a_pair_needed_together():
    names = [f"T{i}" for i in range(8)]
    differs, calls = counting([{"T1", "T6"}])  # one in each half: neither half alone differs
    assert minimise(names, [], differs) == ["T1", "T6"]
    assert not differs(["T1"]) and not differs(["T6"])


def test_disabling_two_transformers_through_the_session_config():
    model = dq_float_conv().SerializeToString()
    feeds = samples()[0]
    plain = Session(model, DISABLE).run(feeds)["y"]
    both = with_disabled_optimizers(ALL, ["ConstantFolding", "WeightBiasQuantization"])
    assert both.session_config == (("optimization.disable_specified_optimizers",
                                    "ConstantFolding;WeightBiasQuantization"),)
    assert np.array_equal(Session(model, both).run(feeds)["y"], plain)
    assert not np.array_equal(Session(model, ALL).run(feeds)["y"], plain)
