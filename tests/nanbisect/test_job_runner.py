"""The nan-bisect job as the executors see it (`job.py`), driven directly: what a worker opens,
which engine it runs, records per item (an unreadable sample is an error record), and what closing
frees (issue 15, mutation testing of job.py)."""
from __future__ import annotations

import os
import pickle
from typing import Dict, List, Optional


from inspector_cli.core.graph import load_model
from inspector_cli.core.inputs import SampleRef, SampleSet
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.executor.base import WorkItem
from inspector_cli.nanbisect.config import NanBisectConfig, Simulate
from inspector_cli.nanbisect.fullscan import FullScanner
from inspector_cli.nanbisect.job import NanBisectJob
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel

from ..fixtures import nan_models as nm


def job(tmp_path, config: NanBisectConfig, **kw) -> NanBisectJob:
    path, data = nm.write(tmp_path, nm.unary("Log"), [{"x": nm.row(1, -3, 2, 4)}, {"x": nm.row(1, 2, 3, 4)}])
    specs = load_model(path).inputs
    refs = [SampleRef("x_0000.npz", "file", str(data / "x_0000.npz")), SampleRef("x_0001.npz", "file", str(data / "x_0001.npz")),
            SampleRef("missing.npz", "file", str(data / "missing.npz"))]
    samples = SampleSet(refs, specs, str(data))
    defaults = dict(model_path=str(path), label="the model", config=config, runtime=RuntimeConfig(), budget=1 << 20,
                    samples=samples, expose_all_root=False)
    defaults.update(kw)
    return NanBisectJob(**defaults)


def run_all(runner, refs: List[SampleRef], reads: List[int]) -> Dict[int, tuple]:
    out: Dict[int, tuple] = {}
    started: List[int] = []

    def finished(index: int, record, error: Optional[str]) -> None:
        assert error is None
        out[index] = (record.sample, record.status, record.origin.node if record.origin else None,
                      record.strategy, "missing.npz" in (record.error or ""))

    runner.run([WorkItem(r.id, r) for r in refs], started.append, finished)
    assert started == reads
    return out


def test_a_worker_loads_the_model_and_locates(tmp_path):
    j = job(tmp_path, NanBisectConfig())
    runner = j.open()
    assert isinstance(runner.engine, Locator) and runner.owned and runner.prepared.label == "the model"
    assert runner.engine.budget == 1 << 20 and runner.engine.checkpoints == NanBisectConfig().checkpoints
    out = run_all(runner, j.samples.refs, [0, 1, 2])  # item by item
    assert out == {0: ("x_0000.npz", "nonfinite", "target", "layered", False),
                   1: ("x_0001.npz", "clean", None, "layered", False),
                   2: ("missing.npz", "error", None, "", True)}
    runner.close()
    assert runner.engine is None


def test_a_full_scan_job_and_its_fp16_simulation(tmp_path):
    j = job(tmp_path, NanBisectConfig(all_origins=True))
    runner = j.open()
    assert isinstance(runner.engine, FullScanner) and runner.engine.all_origins and not runner.engine.fp16
    assert not runner.engine.deep and runner.engine.budget == 1 << 20
    out = run_all(runner, j.samples.refs, [0, 0, 1, 2])  # the shard: the first sample read to plan, then each
    assert out == {0: ("x_0000.npz", "nonfinite", "target", "full-scan", False),
                   1: ("x_0001.npz", "clean", None, "full-scan", False),
                   2: ("missing.npz", "error", None, "", True)}
    runner.close()
    fp16 = job(tmp_path / "b", NanBisectConfig(simulate=Simulate.FP16, deep=True)).open()
    assert fp16.engine.fp16 and fp16.engine.deep and not fp16.engine.all_origins
    fp16.close()


def test_the_callers_prepared_model_is_reused_and_never_pickled(tmp_path):
    j = job(tmp_path, NanBisectConfig())
    prepared = PreparedModel(load_model(j.model_path), RuntimeConfig(), label="mine")
    j.prepared = prepared
    runner = j.open()
    assert runner.prepared is prepared and not runner.owned and runner.prepared.label == "mine"
    runner.close()
    assert pickle.loads(pickle.dumps(j)).prepared is None and j.prepared is prepared


def test_a_remote_worker_externalises_large_weights_in_its_own_folder(tmp_path, monkeypatch):
    import inspector_cli.nanbisect.model as model

    load = model.PreparedModel.load.__func__

    def load_every_model_as_large(cls, graph, runtime, externalise_above: int = -1):  # type: ignore[no-untyped-def]
        return load(cls, graph, runtime, externalise_above)

    monkeypatch.setattr(model.PreparedModel, "load", classmethod(load_every_model_as_large))
    j = job(tmp_path, NanBisectConfig(), externalise=True)
    runner = j.open()
    workdir = runner.prepared.workdir
    assert workdir is not None and os.path.isdir(workdir) and runner.prepared.label == "the model"
    assert runner.prepared.runtime == RuntimeConfig()
    runner.close()
    assert not os.path.exists(workdir)
