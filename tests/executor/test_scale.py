"""Batches at scale: every engine gives the same result (nan-bisect JSONL and summary, compare and
probe results), a worker killed mid-run loses no sample, and samples no worker could finish are
reported as an error finding while the rest is reported."""
from __future__ import annotations

import json
import os
import signal

import pytest

from inspector_cli.executor.base import ExecutorSpec
from inspector_cli.nanbisect.config import NanBisectConfig
from inspector_cli.workflows.nan_bisect import nan_bisect

from ..fixtures import nan_models as nm
from ..fixtures.helpers import invoke

FAILING = list(range(3, 240, 7))
ENGINES = {"inline": [], "w1": ["--workers", "1"], "w2": ["--workers", "2"],
           "ray": ["--workers", "2", "--executor", "ray", "--address", "local"]}
RUN_SETTINGS = ("executor", "workers", "address", "worker_memory")


def results(path, drop=("elapsed_s", "runtime")):
    """The results of a JSON report without timings and run settings (the executor asked for, and the
    onnxruntime threads each worker was given)."""
    doc = json.loads(path.read_text())
    assert all(doc["config"].get(k) is not None or k in ("address", "worker_memory") for k in RUN_SETTINGS)
    out = {k: v for k, v in doc["results"].items() if k not in drop}
    if "plan" in out:
        out["plan"] = {k: v for k, v in out["plan"].items() if k not in ("workers", "executor")}
    return out


@pytest.fixture(scope="module")
def big_batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batch")
    return nm.write(folder, nm.log_batch(), nm.log_samples(240, FAILING))


def test_ray_gives_the_local_jsonl_and_summary_on_240_samples(ray_local, big_batch, tmp_path):
    path, data = big_batch
    runs = {}
    for name in ("w2", "ray"):
        jsonl, doc = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
        invoke(["nan-bisect", path, "--inputs", data, "--jsonl", jsonl, "--json", doc, "--max-memory", "64M",
                *ENGINES[name]], exit_code=1)
        runs[name] = (jsonl.read_text().splitlines(), results(doc, drop=("elapsed_s", "runtime", "jsonl")))
    (local_lines, local), (ray_lines, ray) = runs["w2"], runs["ray"]
    assert len(ray_lines) == 240 and sorted(ray_lines) == sorted(local_lines)
    assert ray_lines == local_lines  # outcomes come back in input order whatever the engine
    assert ray == local
    assert (ray["scanned"], ray["nonfinite"], ray["errors"]) == (240, len(FAILING), 0)
    assert ray["groups"][0]["node"] == "log" and ray["groups"][0]["samples"] == len(FAILING)
    plan = json.loads((tmp_path / "ray.json").read_text())["results"]["plan"]
    assert plan["executor"]["engine"] == "ray" and plan["executor"]["workers"] == 2
    # a run killed after 100 samples (torn last line), resumed on Ray: the uninterrupted log
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(local_lines[:100]) + "\n" + local_lines[100][:20])
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", cut, "--resume", "--json", tmp_path / "resumed.json",
            *ENGINES["ray"]], exit_code=1)
    assert cut.read_text().splitlines() == local_lines
    resumed = json.loads((tmp_path / "resumed.json").read_text())["results"]
    assert (resumed["resumed"], resumed["scanned"], resumed["nonfinite"]) == (100, 140, len(FAILING))


@pytest.fixture(scope="module")
def slow_batch(tmp_path_factory):
    """48 samples of a few milliseconds each (8 MatMuls of 384x384), and the in-process JSONL."""
    folder = tmp_path_factory.mktemp("slow")
    path, data = nm.write(folder, nm.log_batch(size=384, depth=8), nm.log_samples(48, FAILING[:7], (384, 384)))
    reference = folder / "reference.jsonl"
    nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), jsonl=str(reference)))
    return path, data, reference


class Killer:
    """Wraps a workflow's make_executor: kills one worker when the `at`-th outcome comes in."""

    def __init__(self, monkeypatch, module, at: int) -> None:
        self.at, self.executor, self.killed = at, None, []
        real = module.make_executor

        def make(spec, warm=()):
            self.executor = real(spec, warm)
            return self.executor

        monkeypatch.setattr(module, "make_executor", make)

    def progress(self, done, _total, _item) -> None:
        if done == self.at and not self.killed:
            pids = self.executor.worker_pids()
            assert pids, "no live worker to kill"
            os.kill(pids[0], signal.SIGKILL)  # mid-run: every worker has shards queued
            self.killed.append(pids[0])


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_nan_bisect_worker_killed_mid_run_loses_no_sample(request, monkeypatch, slow_batch, tmp_path, engine):
    from inspector_cli.workflows import nan_bisect as workflow

    if engine == "ray":
        request.getfixturevalue("ray_local")
    path, data, reference = slow_batch
    killer = Killer(monkeypatch, workflow, at=6)
    jsonl = tmp_path / "run.jsonl"
    config = NanBisectConfig(inputs=(str(data),), jsonl=str(jsonl),
                             executor=ExecutorSpec(engine, workers=2, address="local" if engine == "ray" else None))
    result = nan_bisect(str(path), config, progress=killer.progress)
    assert killer.killed and killer.executor.restarts >= 1
    assert jsonl.read_bytes() == reference.read_bytes()
    assert (result.scanned, result.errors, result.nonfinite) == (48, 0, 7)


def test_ctrl_c_on_ray_keeps_a_valid_jsonl_and_stops_the_actors(ray_local, monkeypatch, slow_batch, tmp_path):
    from inspector_cli.workflows import nan_bisect as workflow

    path, data, reference = slow_batch
    killer = Killer(monkeypatch, workflow, at=0)

    def interrupt(done, _total, _item):
        if done == 10:
            raise KeyboardInterrupt  # what Ctrl-C raises in the driver

    jsonl = tmp_path / "run.jsonl"
    config = NanBisectConfig(inputs=(str(data),), jsonl=str(jsonl), executor=ExecutorSpec("ray", 2, "local"))
    result = nan_bisect(str(path), config, progress=interrupt)
    assert result.interrupted and result.scanned == 10
    assert jsonl.read_text().splitlines() == reference.read_text().splitlines()[:10]
    assert killer.executor.worker_pids() == [] and ray_local.ray.is_initialized()  # ours stopped, the cluster not
