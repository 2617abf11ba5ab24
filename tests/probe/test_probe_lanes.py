"""probe's two statistics threads (probe/batch.py `HeldProbeRunner`, issue 45): a compiled run in this
process splits each sample's tensors by size between them, every tracker always on the same thread, and
reports what one thread reports: the same statistics, the same trigger (sample and tensor)."""
from __future__ import annotations

import json
import threading
from collections import defaultdict

import numpy as np
import pytest

from inspector_cli.probe.runner import halves_by_size
from inspector_cli.probe.tracker import ProbeTracker
from inspector_cli.results.codec import to_jsonable

from ..fixtures.helpers import invoke, read_json
from ..fixtures.probe_models import cnn_with_samples, scale_relu, trigger_samples

pytest.importorskip("inspector_cli.probe.kernels", reason="numba (the fast extra) is not installed")


def test_halves_by_size_balances_the_values_and_keeps_capture_order():
    tensors = {name: np.zeros(size, np.float32) for name, size in
               (("a", 10), ("b", 1), ("c", 9), ("d", 2), ("e", 8))}
    # largest first to the lighter half: a->0 (10), c->1 (9), e->1 (17), d->0 (12), b->0 (13)
    assert halves_by_size(list(tensors), tensors) == (["a", "b", "d"], ["c", "e"])
    assert halves_by_size(["only"], {"only": np.zeros(3)}) == (["only"], [])


def test_a_compiled_probe_reads_each_samples_tensors_on_two_threads(tmp_path, monkeypatch):
    """Every tracker update runs off the calling thread, on two statistics threads, each tensor always on
    the same one; the numbers are those of a run without the kernels (one statistics thread)."""
    from inspector_cli.probe.config import ProbeConfig
    from inspector_cli.workflows.probe import probe_model

    path, data = cnn_with_samples(tmp_path)
    threads = defaultdict(set)
    update = ProbeTracker.update

    def recording(self, sample, array, *args, **kwargs):
        threads[self.name].add(threading.current_thread().name)
        return update(self, sample, array, *args, **kwargs)

    monkeypatch.setattr(ProbeTracker, "update", recording)
    results = {}
    for setting in ("0", "always"):
        monkeypatch.setenv("MI_JIT", setting)
        threads.clear()
        results[setting] = json.dumps(to_jsonable(probe_model(str(path), ProbeConfig(inputs=(str(data),))))["tensors"],
                                      sort_keys=True)
        used = {name for names in threads.values() for name in names}
        assert all(len(names) == 1 for names in threads.values()), threads  # a tracker stays on its thread
        assert threading.main_thread().name not in used
        assert len(used) == (2 if setting == "always" else 1), used
    assert results["0"] == results["always"]


@pytest.mark.parametrize("conditions, sample, tensor", [
    (["nan"], 3, "m"),
    (["absmax>1e4"], 1, "m"),          # m and y (on the other thread) both meet it on sample 1: m comes first
    (["y:absmax>1e4"], 1, "y"),
    (["zero_frac>0.9"], 2, "y"),
])
def test_a_trigger_is_the_same_with_two_statistics_threads(tmp_path, monkeypatch, conditions, sample, tensor):
    model = scale_relu(tmp_path / "m.onnx", 2.0)
    trigger_samples(tmp_path / "data")
    args = [a for c in conditions for a in ("--break-on", c)]
    reports = []
    for setting in ("0", "always"):
        monkeypatch.setenv("MI_JIT", setting)
        out = tmp_path / f"r{setting}.json"
        invoke(["probe", model, "--inputs", tmp_path / "data", "--no-history", "--json", out, *args], exit_code=1)
        res = read_json(out)["results"]
        trig = res["trigger"]
        assert (trig["sample_index"], trig["tensor"]) == (sample, tensor)
        assert res["samples"] == sample + 1
        reports.append(json.dumps([res["trigger"], res["tensors"]], sort_keys=True))
    assert reports[0] == reports[1]
