"""Probe statistics against numpy on the same tensors: exact moments, bounded percentiles."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.probe.sketch import ABS_ERROR_SUBNORMAL, REL_ERROR, LogHistogram, KeyBuffer
from inspector_cli.probe.tracker import ProbeTracker

from ..fixtures.helpers import invoke, read_json, save_npz
from ..fixtures.probe_models import scale_relu

QS = (0.1, 1, 50, 99, 99.9)


def assert_percentiles_within_bound(percentiles, values):
    for q in QS:
        true = float(np.percentile(values, q, method="inverted_cdf"))
        got = percentiles[f"p{q:g}"]
        assert abs(got - true) <= REL_ERROR * abs(true) + ABS_ERROR_SUBNORMAL, (q, got, true)


def test_tracker_matches_numpy_on_awkward_data():
    rng = np.random.default_rng(0)
    # Large offset against a small spread (catastrophic cancellation for naive sum of squares),
    # heavy tails, exact zeros, negative values.
    samples = [(1000 + rng.standard_t(3, (2, 8, 33)) * 0.01).astype(np.float32) for _ in range(4)]
    samples.append(np.where(rng.random((2, 8, 33)) < 0.5, 0, samples[0]).astype(np.float32))
    tracker = ProbeTracker("t")
    for i, s in enumerate(samples):
        tracker.update(str(i), s)
    stats = tracker.finish()
    allv = np.concatenate([s.ravel() for s in samples]).astype(np.float64)
    assert stats.min == allv.min() and stats.max == allv.max() and stats.absmax == np.abs(allv).max()
    assert stats.mean == pytest.approx(allv.mean(), rel=1e-7)  # float32 rounding of the data itself: ~6e-8
    assert stats.std == pytest.approx(allv.std(), rel=1e-6)
    assert stats.count == allv.size and stats.zero_frac == np.count_nonzero(allv == 0) / allv.size
    assert sum(stats.histogram) == allv.size
    assert_percentiles_within_bound(stats.percentiles, allv)
    outliers = np.count_nonzero(np.abs(allv - allv.mean()) > 3 * allv.std()) / allv.size
    low, high = stats.outlier_bounds
    assert low <= outliers <= high and low <= stats.outlier_ratio <= high


def test_nan_inf_are_counted_and_left_out():
    x = np.array([[1.0, np.nan, -2.0, np.inf], [0.0, -np.inf, np.nan, 3.0]], np.float32)
    tracker = ProbeTracker("t")
    row = tracker.update("s", x)
    assert (row.nan, row.inf, row.count, row.min, row.max, row.zeros) == (2, 2, 4, -2.0, 3.0, 1)
    stats = tracker.finish()
    assert (stats.nan, stats.inf, stats.mean) == (2, 2, pytest.approx(0.5))


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.float64, np.int64])
def test_other_dtypes(dtype):
    x = (np.arange(-20, 40).reshape(3, 20) * 3).astype(dtype)
    tracker = ProbeTracker("t", channel_axis=None)
    tracker.update("s", x)
    stats = tracker.finish()
    ref = x.astype(np.float64)
    assert (stats.min, stats.max, stats.mean) == (ref.min(), ref.max(), pytest.approx(ref.mean()))
    assert stats.dtype == np.dtype(dtype).name
    assert_percentiles_within_bound(stats.percentiles, ref)


def test_subnormals_and_signed_zero_buckets():
    values = np.array([0.0, -0.0, 1e-42, -1e-41, 1e-30, 5.0], np.float32)
    hist = LogHistogram()
    hist.add_keys(KeyBuffer().keys(values))
    assert hist.zero_bucket_count() == 4  # +-0 and the two subnormals below ~9.2e-41
    p = hist.percentiles((50, 100))
    assert p["p50"] == 0.0 and abs(p["p100"] - 5.0) <= 5.0 * REL_ERROR


def test_probe_cli_statistics_equal_numpy_on_captured_tensors(cnn_pair, tmp_path):
    """The CLI's numbers for every tensor of a real CNN against numpy on the very same captured tensors."""
    from inspector_cli.core.capture import CaptureTarget, run_capture
    from inspector_cli.core.graph import load_model
    from inspector_cli.core.inputs import discover_samples
    from inspector_cli.core.runner import RuntimeConfig
    from inspector_cli.core.select import select_tensors

    fp32, _, data = cnn_pair
    invoke(["probe", fp32, "--inputs", data, "--select", "all", "--no-history", "--json", tmp_path / "r.json"])
    doc = read_json(tmp_path / "r.json")
    graph = load_model(fp32)
    names = select_tensors(graph, ["all"])
    captured = {n: [] for n in names}
    run_capture([CaptureTarget(graph, RuntimeConfig(), [names])], discover_samples([str(data)], graph.inputs),
                lambda sid, c, outs: [captured[n].append(outs[0][n].copy()) for n in names])
    tensors = {t["name"]: t for t in doc["results"]["tensors"]}
    assert list(tensors) == names and doc["results"]["samples"] == 6
    for name in names:
        ref = np.concatenate([a.ravel() for a in captured[name]]).astype(np.float64)
        t = tensors[name]
        assert t["min"] == ref.min() and t["max"] == ref.max(), name
        assert t["mean"] == pytest.approx(ref.mean(), rel=1e-6, abs=1e-7 * np.abs(ref).max())
        assert t["std"] == pytest.approx(ref.std(), rel=1e-6)
        assert t["zero_frac"] == np.count_nonzero(ref == 0) / ref.size
        assert t["count"] == ref.size and t["nan"] == 0 and sum(t["histogram"]) == ref.size
        assert_percentiles_within_bound(t["percentiles"], ref)


def test_dead_channel_and_all_zero_samples(tmp_path):
    model = scale_relu(tmp_path / "m.onnx", np.array([1, 0, 1, -1], np.float32).reshape(1, 4, 1, 1))
    rng = np.random.default_rng(0)
    xs = [rng.uniform(0.1, 1, (1, 4, 2, 2)).astype(np.float32) for _ in range(3)] + [np.zeros((1, 4, 2, 2), np.float32)]
    save_npz(tmp_path / "data", [{"x": x} for x in xs])
    invoke(["probe", model, "--inputs", tmp_path / "data", "--no-history", "--json", tmp_path / "r.json"])
    doc = read_json(tmp_path / "r.json")
    tensors = {t["name"]: t for t in doc["results"]["tensors"]}
    # m = x * [1, 0, 1, -1]: channel 1 is always 0; y = relu(m) also kills channel 3 (x > 0).
    assert tensors["m"]["channels"] == {"axis": 1, "channels": 4, "dead": [1]}
    assert tensors["y"]["channels"]["dead"] == [1, 3]
    assert tensors["y"]["zero_samples"] == 1 and tensors["y"]["zero_sample_ids"] == ["s003.npz"]
    rules = sorted((f["rule"], f["tensor"]) for f in doc["results"]["findings"])
    assert rules == [("MI822", "m"), ("MI822", "y"), ("MI823", "m"), ("MI823", "y")]
    assert doc["verdict"]["passed"] is True  # observations, not defects


def test_channel_axis_option_and_per_sample_rows(tmp_path):
    model = scale_relu(tmp_path / "m.onnx", np.array([1, 0, 1, 1], np.float32).reshape(1, 4, 1, 1))
    save_npz(tmp_path / "data", [{"x": np.full((1, 4, 2, 2), v, np.float32)} for v in (1.0, 2.0)])
    invoke(["probe", model, "--inputs", tmp_path / "data", "--select", "m", "--channel-axis", "-1", "--per-sample",
            "--no-history", "--json", tmp_path / "r.json"])
    res = read_json(tmp_path / "r.json")["results"]
    assert res["tensors"][0]["channels"] == {"axis": 3, "channels": 2, "dead": []}
    rows = [(r["sample"], r["max"], r["zero_frac"]) for r in res["per_sample"]]
    assert rows == [("s000.npz", 1.0, 0.25), ("s001.npz", 2.0, 0.25)]
    assert not math.isnan(res["tensors"][0]["std"])


def test_hist_sample_keeps_exact_moments_and_approximates_percentiles():
    rng = np.random.default_rng(1)
    samples = [np.maximum(rng.normal(0, 1, (1, 16, 64, 64)), 0).astype(np.float32) for _ in range(6)]
    tracker = ProbeTracker("t", hist_sample=4096)
    for i, s in enumerate(samples):
        tracker.update(str(i), s)
    stats = tracker.finish()
    allv = np.concatenate([s.ravel() for s in samples]).astype(np.float64)
    assert stats.min == allv.min() and stats.max == allv.max()
    assert stats.mean == pytest.approx(allv.mean(), rel=1e-6) and stats.std == pytest.approx(allv.std(), rel=1e-6)
    assert stats.zero_frac == np.count_nonzero(allv == 0) / allv.size  # exact even though zeros are sampled
    assert sum(stats.histogram) == pytest.approx(allv.size, rel=1e-3)
    assert any("1-in-16 sample" in n for n in stats.notes)
    for q in (1, 50, 99):  # a 1-in-16 sample of 393,216 values: ranks within a fraction of a percent
        got = stats.percentiles[f"p{q:g}"]
        below, upto = (np.count_nonzero(allv < got) / allv.size * 100, np.count_nonzero(allv <= got) / allv.size * 100)
        assert below - 0.5 <= q <= upto + 0.5, (q, below, upto)


def test_non_numeric_and_empty_tensors_are_noted_not_measured():
    tracker = ProbeTracker("t")
    tracker.update("a", np.array(["x", "y"], dtype=object))
    tracker.update("b", np.zeros((0, 3), np.float32))
    stats = tracker.finish()
    assert stats.samples == 2 and stats.count == 0 and stats.min is None and stats.percentiles == {}
    assert any("not numeric" in n for n in stats.notes)


def test_channels_found_alive_stay_alive_and_merge_back_in_order():
    from inspector_cli.probe.channels import ChannelTracker

    x = np.zeros((1, 3, 2, 2), np.float32)
    first, later = ChannelTracker(1), ChannelTracker(1)
    x[0, 0, 1, 1] = 2.0
    first.update(x, zeros=int((x == 0).sum()))
    assert first.dead() == [1, 2] and not first.all_alive
    x[0, 1, 0, 0] = -1.0
    x[0, 2, 0, 1] = 3.0
    first.update(x, zeros=int((x == 0).sum()))
    assert first.dead() == [] and first.all_alive
    first.update(np.zeros((1, 3, 2, 2), np.float32), zeros=12)  # an all-zero sample cannot kill a channel
    assert first.dead() == []
    y = np.zeros((1, 3, 2, 2), np.float32)
    y[0, 2] = 1.0
    later.update(y, zeros=8)
    assert later.dead() == [0, 1]
    later.merge(first)
    assert later.dead() == [] and later.all_alive
    fresh = ChannelTracker(1)
    fresh.merge(later)
    assert fresh.all_alive and fresh.dead() == []
