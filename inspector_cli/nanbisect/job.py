"""The nan-bisect job for the executors: what a worker opens, and how it analyses one sample."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

from ..core.graph import load_model
from ..core.inputs import SampleRef, SampleSet
from ..core.runner import RuntimeConfig
from ..errors import MiError
from ..executor.base import Finished, Job, Runner, Started, WorkItem
from ..results.nan_bisect import SampleRecord
from .config import NanBisectConfig, Simulate
from .fullscan import FullScanner, error_record
from .locate import Locator
from .model import PreparedModel


@dataclass
class NanBisectJob(Job):
    """Picklable: a worker loads the model from `model_path` and reads samples by reference."""

    model_path: str
    label: str
    config: NanBisectConfig
    runtime: RuntimeConfig
    budget: int
    samples: SampleSet
    """Specs and reader options only (no refs): items carry their own `SampleRef`."""
    expose_all_root: bool
    prepared: Optional[PreparedModel] = field(default=None, repr=False)
    externalise: bool = False
    """Load the original model and externalise its large weights in the worker's own temporary folder
    (Ray workers, possibly on other machines); otherwise `model_path` is already prepared."""
    """The caller's already-prepared model, reused when the job is opened in the same process."""
    expected_samples: int = 0
    """Samples the opened runner will analyse (in-process runs): with enough of them, the likely first
    replay's session is built in the background while clean samples run (`nanbisect.prebuild`)."""

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["prepared"] = None  # sessions and temporary folders stay in their process
        return state

    def open(self) -> "NanBisectRunner":
        prepared, owned = self.prepared, self.prepared is None
        if prepared is None:
            graph = load_model(self.model_path)
            prepared = PreparedModel.load(graph, self.runtime) if self.externalise else \
                PreparedModel(graph, self.runtime, label=self.label)
            prepared.label = self.label
        return NanBisectRunner(self, prepared, owned=owned)


class NanBisectRunner(Runner):
    def __init__(self, job: NanBisectJob, prepared: PreparedModel, *, owned: bool = False) -> None:
        self.job = job
        self.prepared = prepared
        self.owned = owned
        config = job.config
        if config.full_scan:
            self.engine: Any = FullScanner(prepared, job.budget, all_origins=config.all_origins, deep=config.deep,
                                           fp16=config.simulate == Simulate.FP16)
        else:
            self.engine = Locator(prepared, job.budget, config.checkpoints, expose_all_root=job.expose_all_root,
                                  expected_samples=job.expected_samples)
            self.engine.adopt_sessions()

    def run(self, items: Sequence[WorkItem], started: Started, finished: Finished) -> None:
        if isinstance(self.engine, FullScanner):
            refs: List[SampleRef] = [item.payload for item in items]
            self.engine.run_shard([item.key for item in items], lambda i: self.job.samples.load(refs[i]),
                                  started, finished)
        else:
            super().run(items, started, finished)

    def run_item(self, item: WorkItem) -> SampleRecord:
        ref: SampleRef = item.payload
        try:
            feeds = self.job.samples.load(ref)
            return self.engine.analyse(item.key, feeds)
        except MiError as exc:
            return error_record(item.key, str(exc))

    def close(self) -> None:
        if isinstance(self.engine, Locator):
            self.engine.close()  # a background build may read the temporary folder removed below
        self.engine = None
        if self.owned:
            self.prepared.close()  # its temporary folder, when it externalised weights


