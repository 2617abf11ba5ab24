"""probe's compiled statistics (probe/kernels.py, numba) are the numpy path's, to the bit, and a probe
pipelines its statistics with the next run without changing any number.

The sum of squared deviations reproduces numpy's pairwise float32 summation (its blocks of 128 with 8
accumulators, halves cut at multiples of 8), so it is checked against `np.sum` on every size up to
300 and on large odd sizes; the tracker's whole sample (extremes, histogram, zeros, NaN/Inf, moments,
-0.0 against +0.0 extremes) against a tracker without the kernels.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from inspector_cli.probe.tracker import ProbeTracker, Workspace
from inspector_cli.results.codec import to_jsonable

kernels = pytest.importorskip("inspector_cli.probe.kernels", reason="numba (the fast extra) is not installed")


@pytest.mark.parametrize("sizes", [range(0, 300), [1023, 4097, 65543, 1_000_003]])
def test_squared_deviations_are_numpys_pairwise_sum(sizes):
    rng = np.random.default_rng(45)
    for n in sizes:
        x = (rng.standard_normal(n) * np.exp(rng.uniform(-12, 12, n))).astype(np.float32)
        shift = np.float32(x.mean()) if n else np.float32(0.0)
        want = np.square(x - shift).sum(dtype=np.float32)
        assert np.float32(kernels.squared_deviations(x, shift)).tobytes() == np.float32(want).tobytes(), n


def _tensors():
    rng = np.random.default_rng(3)
    for n in (1, 7, 8, 9, 128, 129, 1000, 70001):
        x = (rng.standard_normal(n) * np.exp(rng.uniform(-30, 30, n))).astype(np.float32)
        yield x
        yield np.maximum(x, 0).reshape(1, -1)  # ReLU: half zeros
        mixed = x.copy()
        mixed[::3] = 0.0
        mixed[1::3] = -0.0  # +0 and -0: numpy decides which one min/max return
        yield mixed
        yield np.full(n, -0.0, np.float32)
        bad = x.copy()
        bad[n // 2] = np.nan
        bad[0] = np.inf
        yield bad
        yield np.full(n, np.nan, np.float32)
        yield (x * np.float32(1e-40)).astype(np.float32)  # subnormals: the zero buckets
        yield np.clip(x, -6e4, 6e4).astype(np.float16)


@pytest.mark.parametrize("index", range(64))
def test_a_trackers_statistics_are_the_same_with_the_kernels(index):
    x = list(_tensors())[index]
    plain, compiled = Workspace(), Workspace()
    compiled.use_kernels(kernels)
    one = ProbeTracker("t", workspace=plain, channel_axis=None)
    two = ProbeTracker("t", workspace=compiled, channel_axis=None)
    for sample in ("s0", "s1"):
        assert repr(one.update(sample, x)) == repr(two.update(sample, x))
    assert np.array_equal(one.hist.counts, two.hist.counts)
    assert json.dumps(to_jsonable(one.finish())) == json.dumps(to_jsonable(two.finish()))


def test_a_large_probe_reports_the_same_numbers_with_and_without_kernels(tmp_path, monkeypatch):
    """The whole result of `probe --select all` on a CNN: compiled kernels forced (MI_JIT=always) against
    MI_JIT=0; the statistics thread pipelines the samples in both."""
    from inspector_cli.probe.config import ProbeConfig
    from inspector_cli.workflows.probe import probe_model

    from ..fixtures.probe_models import cnn_with_samples

    path, data = cnn_with_samples(tmp_path)
    config = ProbeConfig(inputs=(str(data),))
    results = []
    for setting in ("0", "always"):
        monkeypatch.setenv("MI_JIT", setting)
        result = to_jsonable(probe_model(str(path), config))
        results.append(json.dumps(result["tensors"], sort_keys=True))
    assert results[0] == results[1]
