"""The output comparison as an executor job: in this process, in local workers or on Ray.

Each worker opens both models once and, per sample, runs them and reduces every output pair to
its sums (`PairStats`, a few hundred bytes); the arrays never leave the worker. The driver folds
the sums into the trackers in sample order, exactly as the in-process loop does, so data-set
metrics, worst/mean values, gate tallies and per-sample rows are the same bits whatever ran them.

A sample that raises (unreadable file, inference error) stops the run with that error, in every
engine, as before. A sample whose worker died twice is reported as an error finding (MI804)
naming it; the other samples are compared and reported.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..batching import ItemFailure, batch_runtime, check_executor, fixed_shards, lost_samples_finding, shared_samples
from ..core import background
from ..core.inputs import SampleRef, SampleSet
from ..core.io_match import NameMatching
from ..core.placement import Subgraph
from ..core.runner import RuntimeConfig, Session, open_session, open_sessions
from ..diff.engine import TensorTracker
from ..diff.metrics import PairStats
from ..diff.values import layout, reduce_values
from ..errors import UsageError
from ..executor.base import Job, Runner, WorkItem
from ..executor.factory import make_executor
from ..progress import Progress
from ..results.base import Finding
from .config import CompareConfig
from .plan import ComparePlan, FileModel, run_pair

SHARD_SAMPLES = 8
WARM_MODULES = ("numpy", "onnx", "onnxruntime", "inspector_cli.compare.batch")


@dataclass(frozen=True)
class ReducedOutput:
    """One output pair on one sample: its layout, and its sums (None when the shapes differ)."""

    dtype_a: str
    dtype_b: str
    shape_a: Tuple[int, ...]
    shape_b: Tuple[int, ...]
    stats: Optional[PairStats]


@dataclass(frozen=True)
class ReducedSample:
    outputs: List[ReducedOutput]
    notes: List[str] = field(default_factory=list)
    assignment: Optional[Tuple[Optional[List[Subgraph]], Optional[List[Subgraph]]]] = None
    """Both sessions' provider partitions (core/placement.py), sent with a runner's first sample only."""


class EarlySessions:
    """Both sessions of an outputs-only comparison, built from the model files on background threads
    (`core.background`: joined before the process exits, whatever error ends the run) while this
    thread imports onnx and reads both graphs (issue 16: on two cores the builds, ~0.1-1 s
    each, overlap the planning instead of following it). onnxruntime reads the files itself, as
    `Session(path)` in `mi validate` does; the planning's checks (external data inside the model's
    folder, pairing) still run first and decide: these sessions are used only once they passed.

    A build that fails is not reported from here: the runner then opens the sessions the usual way,
    which reports the error exactly as before."""

    def __init__(self, paths: Sequence[Path], runtimes: Sequence[RuntimeConfig], labels: Sequence[str]) -> None:
        self._sessions: List[Optional[Session]] = [None] * len(paths)
        self._threads = [background.start(self._build, i, path, runtime, label, name="mi-early-session")
                         for i, (path, runtime, label) in enumerate(zip(paths, runtimes, labels))]

    def _build(self, index: int, path: Path, runtime: RuntimeConfig, label: str) -> None:
        try:
            self._sessions[index] = Session(str(path), runtime, label=label)
        except Exception:  # noqa: BLE001 - the usual path reports it (see the class docstring)
            self._sessions[index] = None

    def result(self) -> Optional[List[Session]]:
        """Both sessions, or None when any build failed."""
        for thread in self._threads:
            thread.join()
        sessions = list(self._sessions)
        return None if any(s is None for s in sessions) else sessions  # type: ignore[return-value]


def may_reference_external_data(path: Path) -> bool:
    """Whether the model file may name external data: every external-data entry holds the key
    b"location", so a file without those bytes has none (a match only costs the early start).
    Memory-mapped: a scan at disk-cache speed, nothing copied."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return False
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b"location") >= 0


def early_sessions(model_a: Any, model_b: Any, config: CompareConfig) -> Optional[EarlySessions]:
    """Start building both sessions now, when the comparison is outputs-only, in this process,
    and both models are plain files without external data; None otherwise."""
    spec = config.executor
    if config.layers is not None or config.golden or not spec.in_process:
        return None
    if not all(isinstance(m, (str, os.PathLike)) and Path(m).is_file() for m in (model_a, model_b)):
        return None
    paths = [Path(model_a), Path(model_b)]
    if any(may_reference_external_data(path) for path in paths):
        return None  # onnxruntime would read those files before mi's external-data check has passed
    runtimes = [outputs_runtime(config.runtime_a, spec), outputs_runtime(config.runtime_of_b, spec)]
    return EarlySessions(paths, runtimes, [f"A {paths[0]}", f"B {paths[1]}"])


def outputs_runtime(runtime: RuntimeConfig, spec: Any) -> RuntimeConfig:
    """The runtime of an outputs-only comparison's sessions: the batch's (batching.batch_runtime); in
    this process, where A and B take turns, idle threads spin only inside a run (issue 45)."""
    runtime = batch_runtime(runtime, spec)
    return runtime.spinning_only_in_runs() if spec.in_process else runtime


@dataclass
class CompareJob(Job):
    """Picklable: workers load both models from their paths and read samples by reference."""

    model_a: str
    model_b: str
    runtime_a: RuntimeConfig
    runtime_b: RuntimeConfig
    outputs: NameMatching
    inputs: NameMatching
    samples: SampleSet
    """Specs and reader options only; items carry their own `SampleRef`."""
    topk: Tuple[int, ...]
    plan: Optional[ComparePlan] = field(default=None, repr=False)
    """The caller's `ComparePlan` (graphs already loaded), used when opened in the same process."""
    early: Optional[EarlySessions] = field(default=None, repr=False)
    """Sessions already being built from the files (`early_sessions`), in the same process only."""

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["plan"] = state["early"] = None
        return state

    def open(self) -> "CompareRunner":
        plan = self.plan
        if plan is None:
            from ..core.lazyload import load_model_lazy  # workers only: imports onnx

            plan = ComparePlan(load_model_lazy(self.model_a), load_model_lazy(self.model_b), self.outputs,
                               self.inputs, self.samples)
        return CompareRunner(self, plan)


class CompareRunner(Runner):
    def __init__(self, job: CompareJob, plan: ComparePlan) -> None:
        self.job, self.plan = job, plan
        labels = (f"A {plan.graph_a.display_name}", f"B {plan.graph_b.display_name}")
        early = job.early.result() if job.early is not None else None
        if early is not None:
            self.session_a, self.session_b = early
        elif isinstance(plan.graph_a, FileModel) or isinstance(plan.graph_b, FileModel):
            # planned from the headers only when both early sessions were built (workflows/compare.py)
            raise AssertionError("a plan of FileModels needs its early sessions")
        elif plan.graph_a is plan.graph_b:  # one proto cannot be serialised by two threads at once
            self.session_a = open_session(plan.graph_a, job.runtime_a, label=labels[0])
            self.session_b = open_session(plan.graph_b, job.runtime_b, label=labels[1])
        else:
            # Built side by side: onnxruntime releases the GIL while it builds, on one core each.
            self.session_a, self.session_b = open_sessions([(plan.graph_a, job.runtime_a, labels[0]),
                                                            (plan.graph_b, job.runtime_b, labels[1])])
        self._assignment_sent = False

    def run_item(self, item: WorkItem) -> Any:
        ref: SampleRef = item.payload
        try:
            feeds = self.job.samples.load(ref)
            out_a, out_b, notes = run_pair(self.session_a, self.session_b, self.plan, feeds, item.key)
            reduced = [_reduce(out_a[p.a], out_b[p.b], self.job.topk) for p in self.plan.outputs.pairs]
        except Exception as exc:  # noqa: BLE001 - re-raised by the driver, as in a single-process run
            return ItemFailure.of(exc, item.key)
        assignment = None
        if not self._assignment_sent:  # read once per runner: free (recorded while the sessions were built)
            assignment, self._assignment_sent = (self.session_a.assignment(), self.session_b.assignment()), True
        return ReducedSample(reduced, list(notes), assignment)

    def close(self) -> None:
        self.session_a = self.session_b = None  # type: ignore[assignment]


def _reduce(a: Any, b: Any, topk: Sequence[int]) -> ReducedOutput:
    """One output pair to its layouts and sums: tensors, or strings, sequences and maps (diff/values.py)."""
    a = np.asarray(a) if isinstance(a, np.generic) else a
    b = np.asarray(b) if isinstance(b, np.generic) else b
    layout_a, layout_b = layout(a), layout(b)
    return ReducedOutput(layout_a.dtype, layout_b.dtype, layout_a.shape, layout_b.shape,
                         reduce_values(a, b, topk=topk))


def fold(tracker: TensorTracker, sample: str, out: ReducedOutput) -> None:
    """Add one reduced sample to a tracker: the same updates as `TensorTracker.add` on the arrays."""
    if not tracker.dtype_a:
        tracker.dtype_a, tracker.dtype_b = out.dtype_a, out.dtype_b
        tracker.shape_a, tracker.shape_b = list(out.shape_a), list(out.shape_b)
    tracker.samples += 1
    if out.stats is None:
        tracker.add_mismatch(sample)
        return
    tracker.add_stats(sample, out.stats)


@dataclass
class OutputRun:
    """What running the samples gave besides the trackers' sums."""

    notes: List[str] = field(default_factory=list)
    """Input casts and the like, each once."""
    lost: List[Tuple[str, str]] = field(default_factory=list)
    """Samples lost to worker deaths, with why."""
    assignment: Optional[Tuple[Optional[List[Subgraph]], Optional[List[Subgraph]]]] = None
    """Sessions A and B's provider partitions, as the first runner to report them read them."""


def compare_outputs(plan: ComparePlan, config: CompareConfig, trackers: Sequence[TensorTracker], progress: Progress,
                    early: Optional[EarlySessions] = None) -> OutputRun:
    """Run every sample on both models through the configured executor, folding into `trackers`
    (with the sessions of `early` when they were built).

    Returns the notes (input casts), the samples lost to worker deaths and both sessions' placement.
    """
    spec = config.executor
    check_executor(spec)
    if not spec.in_process and (plan.graph_a.path is None or plan.graph_b.path is None):
        raise UsageError("--workers needs both models as files", hint="save them, or leave --workers out")
    executor = make_executor(spec, WARM_MODULES)
    samples: SampleSet = plan.samples if spec.in_process else shared_samples(plan.samples)
    job = CompareJob(
        model_a=str(plan.graph_a.path.resolve()) if plan.graph_a.path else "",
        model_b=str(plan.graph_b.path.resolve()) if plan.graph_b.path else "",
        runtime_a=outputs_runtime(config.runtime_a, spec), runtime_b=outputs_runtime(config.runtime_of_b, spec),
        outputs=plan.outputs, inputs=plan.inputs, samples=samples.subset([]), topk=tuple(config.topk),
        plan=plan if spec.in_process else None, early=early if spec.in_process else None)
    run = OutputRun()
    total = len(samples)
    items = (WorkItem(ref.id, ref) for ref in samples.refs)
    try:
        for done, outcome in enumerate(executor.map(job, fixed_shards(items, SHARD_SAMPLES)), start=1):
            _take(outcome, trackers, run)
            progress(done, total, outcome.key)
    except BaseException:
        executor.abort()
        raise
    finally:
        executor.close()
    return run


def _take(outcome: Any, trackers: Sequence[TensorTracker], run: OutputRun) -> None:
    if not outcome.ok:
        run.lost.append((outcome.key, outcome.error or "failed"))
        return
    value = outcome.value
    if isinstance(value, ItemFailure):
        raise value.error()
    for tracker, out in zip(trackers, value.outputs):
        fold(tracker, outcome.key, out)
    run.notes.extend(n for n in value.notes if n not in run.notes)
    if run.assignment is None and value.assignment is not None:
        run.assignment = value.assignment


def lost_finding(lost: Sequence[Tuple[str, str]]) -> Finding:
    """MI804: the samples no worker could finish (the others are compared and reported)."""
    return lost_samples_finding("MI804", lost, "compared")

