"""compare and probe give the same result in this process, with 1 or 2 local workers and on Ray;
a worker killed mid-run changes nothing; samples no worker could finish become an error finding
naming them, and the rest is still reported."""
from __future__ import annotations

import json

import pytest

from inspector_cli.executor.base import ExecutorSpec, InlineExecutor, Outcome

from ..fixtures.helpers import invoke
from .test_scale import ENGINES, Killer, results

COUNT = 40


@pytest.fixture(scope="module")
def many_samples(cnn_pair, tmp_path_factory):
    from inspector_cli.testing.models import image_samples, save_samples

    folder = tmp_path_factory.mktemp("many")
    save_samples(image_samples(COUNT, seed=5), folder)
    return cnn_pair[0], cnn_pair[1], folder


def run_all(tmp_path, command, engines=ENGINES):
    docs = {}
    for name, extra in engines.items():
        docs[name] = tmp_path / f"{name}.json"
        invoke([*command, "--json", docs[name], *extra], exit_code=None)
    return {name: results(path) for name, path in docs.items()}


def test_compare_is_the_same_on_every_engine(ray_local, many_samples, tmp_path):
    fp32, int8, data = many_samples
    runs = run_all(tmp_path, ["compare", fp32, int8, "--inputs", data, "--min-cosine", "0.9999"])
    assert runs["w1"] == runs["inline"] and runs["w2"] == runs["inline"] and runs["ray"] == runs["inline"]
    output = runs["inline"]["outputs"][0]
    assert output["samples"] == COUNT and len(output["per_sample"]) == COUNT
    assert 0.99 < output["dataset"]["cosine"] < 0.9999  # int8 against fp32: close, not equal
    assert runs["inline"]["gates"][0]["failed_samples"] > 0


def test_probe_is_the_same_on_every_engine(ray_local, many_samples, tmp_path):
    _, int8, data = many_samples
    command = ["probe", int8, "--inputs", data, "--quant-ranges", "--select", "all", "--per-sample", "--no-history",
               "--capture-budget", "256M"]
    runs = run_all(tmp_path, command)
    assert runs["w1"] == runs["inline"] and runs["w2"] == runs["inline"] and runs["ray"] == runs["inline"]
    probe = runs["inline"]
    assert probe["samples"] == COUNT and len(probe["per_sample"]) == COUNT * len(probe["tensors"])
    assert all(t["samples"] == COUNT for t in probe["tensors"]) and probe["quant"]


def test_probe_stops_at_the_first_trigger_on_every_engine(tmp_path):
    from ..fixtures import nan_models as nm

    path, data = nm.write(tmp_path, nm.log_batch(), nm.log_samples(COUNT, [20, 33]))  # NaN at 'log' on 20 and 33
    command = ["probe", path, "--inputs", data, "--select", "all", "--no-history", "--capture-budget", "256M",
               "--break-on", "nan"]
    runs = run_all(tmp_path, command, {k: v for k, v in ENGINES.items() if k != "ray"})
    assert runs["w2"] == runs["inline"] and runs["w1"] == runs["inline"]
    trigger = runs["inline"]["trigger"]
    assert (trigger["sample_index"], trigger["sample"], trigger["tensor"]) == (20, "x_0020.npz", "l")
    assert runs["inline"]["samples"] == 21  # statistics over the samples up to the trigger (in block 1 of 3)


def test_compare_worker_killed_mid_run_changes_nothing(ray_local, monkeypatch, many_samples, tmp_path):
    from inspector_cli.compare.config import CompareConfig
    from inspector_cli.compare import batch as compare_batch
    from inspector_cli.workflows.compare import compare_models

    fp32, int8, data = many_samples
    plain = compare_models(fp32, int8, CompareConfig(inputs=(str(data),)))
    killer = Killer(monkeypatch, compare_batch, at=5)
    config = CompareConfig(inputs=(str(data),), executor=ExecutorSpec("ray", 2, "local"))
    killed = compare_models(fp32, int8, config, progress=killer.progress)
    assert killer.killed and killer.executor.restarts >= 1
    assert killed.outputs == plain.outputs and not killed.findings


def test_probe_worker_killed_mid_run_changes_nothing(monkeypatch, many_samples, tmp_path):
    from inspector_cli.probe.config import ProbeConfig
    from inspector_cli.testing.models import image_samples, save_samples
    from inspector_cli.probe import batch as probe_batch
    from inspector_cli.workflows.probe import probe_model

    _, int8, _ = many_samples
    save_samples(image_samples(96, seed=7), tmp_path / "data")  # 6 blocks: after the first, both workers hold work
    base = dict(inputs=(str(tmp_path / "data"),), history=False, capture_budget=256 << 20, per_sample=True)
    plain = probe_model(int8, ProbeConfig(**base))
    killer = Killer(monkeypatch, probe_batch, at=16)
    killed = probe_model(int8, ProbeConfig(**base, executor=ExecutorSpec("local", 2)), progress=killer.progress)
    assert killer.killed and killer.executor.restarts >= 1
    assert killed.tensors == plain.tensors and killed.per_sample == plain.per_sample and killed.samples == 96


class Losing(InlineExecutor):
    """Runs in this process, but reports the items in `lose` as a worker death would (twice)."""

    def __init__(self, lose):
        super().__init__()
        self.lose = lose

    def map(self, job, shards):
        for outcome in super().map(job, shards):
            if outcome.key in self.lose:
                outcome = Outcome(outcome.key, None, "the worker process died (killed by SIGKILL) while running "
                                                     "this item, 2 time(s)", attempts=2)
            yield outcome


def test_samples_no_worker_could_finish_are_an_error_finding(monkeypatch, many_samples, tmp_path):
    from inspector_cli.compare import batch as compare_batch
    from inspector_cli.probe import batch as probe_batch

    fp32, int8, data = many_samples
    monkeypatch.setattr(compare_batch, "make_executor", lambda spec, warm=(): Losing({"sample_0003.npz"}))
    doc = json.loads(invoke(["compare", fp32, int8, "--inputs", data, "--json", "-"], exit_code=1).stdout)
    finding = doc["results"]["findings"][-1]
    assert finding["rule"] == "MI804" and finding["severity"] == "error"
    assert finding["message"].startswith("1 sample(s) not compared: the worker process died") and \
        "(sample_0003.npz)" in finding["message"]
    assert doc["results"]["outputs"][0]["samples"] == COUNT - 1

    monkeypatch.setattr(probe_batch, "make_executor", lambda spec, warm=(): Losing({"block 1"}))
    doc = json.loads(invoke(["probe", int8, "--inputs", data, "--no-history", "--json", "-"], exit_code=1).stdout)
    finding = doc["results"]["findings"][-1]
    assert finding["rule"] == "MI827" and finding["message"].startswith("16 sample(s) not probed")
    assert "sample_0016.npz, sample_0017.npz" in finding["message"] and doc["results"]["samples"] == COUNT - 16


def test_what_runs_in_this_process_only_says_so(many_samples, tmp_path):
    fp32, int8, data = many_samples
    result = invoke(["compare", fp32, int8, "--inputs", data, "--layers", "all", "--workers", "2"], exit_code=2)
    assert "--layers runs in this process" in result.stderr
    plugin = ["probe", int8, "--inputs", data, "--no-history", "--select", "all", "--plugin", "tests.fixtures.executor_jobs:NoMerge"]
    result = invoke([*plugin, "--workers", "2"], exit_code=2)
    assert "--plugin no-merge has no merge(): it runs in this process only" in result.stderr
    doc = json.loads(invoke([*plugin, "--json", "-"], exit_code=None).stdout)  # in this process: one block
    assert doc["results"]["plugins"][0]["rows"] == {"calls": {"n": COUNT * len(doc["results"]["tensors"])}}
    result = invoke(["compare", fp32, int8, "--inputs", data, "--address", "auto"], exit_code=2)
    assert "--address is for --executor ray" in result.stderr
