"""Probe statistics merge: the samples of two partials merged give what one tracker over all the
samples gives (counts, extremes, histograms, channels, rows exactly; moments to rounding), also
after a trip between processes (histograms pickled as their non-empty buckets)."""
from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from inspector_cli.probe.attention_entropy import AttentionEntropy
from inspector_cli.probe.quant import Quantizer, QuantTracker
from inspector_cli.probe.tracker import ProbeTracker


def samples():
    rng = np.random.default_rng(3)
    out = []
    for i in range(6):
        x = rng.normal(i * 0.1, 1.0 + i, size=(1, 4, 8, 8)).astype(np.float32)
        x[:, 2] = 0.0  # channel 2 is dead on every sample
        if i == 4:
            x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
        if i == 1:
            x[:] = 0.0  # an all-zero sample
        out.append((f"s{i}", x))
    return out


def tracker():
    return ProbeTracker("t", op_type="Relu", node="relu", channel_axis=1, keep_rows=True)


def test_two_partials_merge_into_the_whole():
    whole, first, second = tracker(), tracker(), tracker()
    for i, (name, x) in enumerate(samples()):
        whole.update(name, x)
        (first if i < 3 else second).update(name, x)
    second = pickle.loads(pickle.dumps(second))  # as it comes back from a worker
    merged = first.merge(second).finish()
    expected = whole.finish()
    assert merged.mean == pytest.approx(expected.mean, rel=1e-12) and merged.std == pytest.approx(expected.std, rel=1e-12)
    exact = ["samples", "count", "nan", "inf", "min", "max", "absmax", "percentiles", "zero_frac", "histogram",
             "zero_samples", "zero_sample_ids", "channels", "notes", "outlier_ratio", "outlier_bounds"]
    assert {k: getattr(merged, k) for k in exact} == {k: getattr(expected, k) for k in exact}
    assert (merged.nan, merged.inf, merged.zero_sample_ids, merged.channels.dead) == (1, 2, ["s1"], [2])
    assert [r.sample for r in first.rows] == [f"s{i}" for i in range(6)]
    assert len(pickle.dumps(second.hist)) < 20_000  # non-empty buckets only, not 512 KiB


def test_a_shape_change_between_partials_is_noted_once():
    first, second = tracker(), tracker()
    first.update("a", np.ones((1, 4, 2, 2), np.float32))
    second.update("b", np.ones((1, 4, 3, 3), np.float32))
    second.update("c", np.ones((1, 4, 5, 5), np.float32))
    first.merge(second)
    assert [n for n in first.notes if "shape varies" in n] == ["shape varies between samples ([1, 4, 2, 2] then "
                                                               "[1, 4, 3, 3])"]


def test_quantiser_and_attention_plugin_merge_exactly():
    spec = Quantizer(node="q", op_type="QuantizeLinear", tensor="x", source="activation", scale=np.array([0.02]),
                     zero_point=np.array([0.0]), axis=None, qtype="int8", qmin=-128, qmax=127)
    whole, first, second = QuantTracker(spec), QuantTracker(spec), QuantTracker(spec)
    plugin_whole, plugin_a, plugin_b = AttentionEntropy(), AttentionEntropy(), AttentionEntropy()
    rng = np.random.default_rng(9)
    for i in range(6):
        x = rng.normal(0, 1.5, size=(2, 16)).astype(np.float32)
        probs = np.exp(x * (i + 1)) / np.exp(x * (i + 1)).sum(axis=-1, keepdims=True)
        whole.update(x)
        (first if i < 2 else second).update(x)
        plugin_whole.process_tensor("p", probs, None)
        (plugin_a if i < 2 else plugin_b).process_tensor("p", probs, None)
    first.merge(second)
    assert first.finish() == whole.finish() and whole.finish()["saturated"] > 0
    plugin_a.merge(plugin_b)
    got, want = plugin_a.summary()["p"], plugin_whole.summary()["p"]
    assert got["mean_entropy"] == pytest.approx(want["mean_entropy"], rel=1e-12)
    assert {k: v for k, v in got.items() if k != "mean_entropy"} == {k: v for k, v in want.items() if k != "mean_entropy"}
    assert got["rows"] == 12 and not math.isnan(got["min_entropy"])


def test_hist_sample_phase_follows_the_data_set_index_across_blocks():
    whole = ProbeTracker("t", channel_axis=None, hist_sample=37)
    first, second = (ProbeTracker("t", channel_axis=None, hist_sample=37) for _ in range(2))
    second.first_index = 3  # the second block starts at sample 3
    for i, (name, x) in enumerate(samples()):
        whole.update(name, x)
        (first if i < 3 else second).update(name, x)
    first.merge(second)
    assert np.array_equal(first.hist.counts, whole.hist.counts) and whole.max_stride == 7  # 256 values / 37
    assert first.finish().percentiles == whole.finish().percentiles
