"""`mi probe` over blocks of samples: in this process, in local workers or on Ray.

The samples are cut into fixed blocks of `BLOCK_SAMPLES` in data-set order (the same cut for
every engine and worker count). A worker opens the model once and keeps its capture session; per
block it runs the usual probe (`ProbeRunner`: chunks, triggers, restarts) into fresh trackers and
sends them back: a *partial* of a few KiB per tensor (histograms travel as their non-empty
buckets). The driver merges the partials in block order, so every statistic is added in the same
order, to the same bits, whatever ran the blocks; in this process the blocks run one after another
through the same code. A trigger stops the run at the first block (in order) that met it.

A block whose worker died twice is left out and reported (MI827) with its samples.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..batching import ItemFailure, batch_runtime, check_executor, lost_samples_finding, shared_samples
from ..core.binding import BoundRunner
from ..core import jit
from ..core.capture import BYTES_PER_EXPOSED, CaptureTarget
from ..core.graph import ModelGraph, load_model
from ..core.inputs import SampleRef, SampleSet
from ..core.masks import MaskAnalysis, find_masks
from ..core.placement import Subgraph
from ..core.runner import RuntimeConfig, open_session
from ..core.types import TensorMap
from ..errors import UsageError
from ..executor.base import Job, Runner, Shard, WorkItem
from ..executor.factory import make_executor
from ..plugins import NodeView, call_plugin, load_plugin, mergeable, node_view
from ..progress import Progress
from ..results.base import Finding
from .config import ProbeConfig
from .quant import Quantizer, QuantTracker
from .runner import Consumers, Hit, Lane, ProbeRunner, halves_by_size
from .tracker import ProbeTracker, Workspace
from .triggers import Trigger, parse_triggers

BLOCK_SAMPLES = 16
WARM_MODULES = ("numpy", "onnx", "onnxruntime", "inspector_cli.probe.batch")


@dataclass(frozen=True)
class Block:
    start: int
    """Index of the block's first sample in the data set."""
    refs: Tuple[SampleRef, ...]


@dataclass
class BlockPartial:
    """What one block measured: mergeable statistics, and the trigger met in it (if any)."""

    start: int
    consumers: Consumers
    done: int
    hit: Optional[Hit] = None
    restarted: bool = False
    assignments: Dict[int, Optional[List[Subgraph]]] = field(default_factory=dict)
    """Chunk index -> the provider partition of its capture session (core/placement.py)."""
    build_seconds: float = 0.0
    """Wall time of the longest capture-session build so far (what one more session would cost)."""


@dataclass
class ProbeJob(Job):
    """Picklable: workers load the model from `model_path` and read samples by reference."""

    model_path: str
    config: ProbeConfig
    runtime: RuntimeConfig
    tensors: List[str]
    chunks: List[List[str]]
    quant: List[Quantizer]
    samples: SampleSet
    compiled: bool = False
    """Whether the statistics use the compiled kernels (a large run: core/jit.py); the same bits either way."""
    graph: Optional[ModelGraph] = field(default=None, repr=False)
    progress: Optional[Progress] = field(default=None, repr=False)
    """In this process only: per-sample progress inside a block."""

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["graph"] = state["progress"] = None
        return state

    def open(self) -> "ProbeBlockRunner":
        return ProbeBlockRunner(self, self.graph if self.graph is not None else load_model(self.model_path))


class HeldProbeRunner(ProbeRunner):
    """A `ProbeRunner` whose capture sessions outlive it (held by the worker between blocks).

    With `stats` (a one-thread executor), each sample's statistics are computed on that thread while
    the next sample runs (onnxruntime and the statistics release the GIL): the tensors of two samples
    are alive at once instead of one. A tracker still sees the samples one after another, in order, so
    every statistic is the same; a trigger met on a sample stops the chunk before the next sample's
    statistics (that sample's run is dropped)."""

    def __init__(self, held: "HeldSessions", *args: Any, stats: Optional[ThreadPoolExecutor] = None,
                 lane: Optional[Lane] = None, workspace: Optional[Workspace] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held = held
        self.stats = stats
        self.lane, self.workspace = lane, workspace
        """A second statistics thread with its own workspace: each sample's tensors split by size between
        it and the statistics thread (a tracker always on the same one, the halves joined before the next
        sample's statistics)."""
        self._halves: Dict[Tuple[str, ...], Tuple[List[str], List[str]]] = {}

    def _consume(self, sample_id: str, position: int, names: List[str], tensors: TensorMap,
                 triggers: Sequence[Trigger]) -> Optional[Hit]:
        lane = self.lane
        if lane is None or self.workspace is None or self.masks or self.consumers.plugins or len(names) < 2:
            return super()._consume(sample_id, position, names, tensors, triggers)
        mine, theirs = self._split(names, tensors)
        other = lane.pool.submit(self._consume_part, lane.workspace, sample_id, position, theirs, tensors, triggers)
        try:
            found = self._consume_part(self.workspace, sample_id, position, mine, tensors, triggers)
        finally:
            found_other = other.result()  # never leave the other half running into the next sample
        if found is None or found_other is None:
            return found if found_other is None else found_other
        # both halves met a trigger: the one on the tensor first in capture order, as one pass would report
        order = {name: i for i, name in enumerate(names)}
        return min(found, found_other, key=lambda hit: order[hit.stats.tensor])

    def _consume_part(self, workspace: Workspace, sample_id: str, position: int, names: List[str],
                      tensors: TensorMap, triggers: Sequence[Trigger]) -> Optional[Hit]:
        """`_consume` of some of a sample's tensors, their trackers reading with `workspace` (a thread's)."""
        workspace.settle()
        trackers = self.consumers.trackers
        for name in names:
            if name in trackers:
                trackers[name].workspace = workspace
        return self._update(sample_id, position, names, tensors, triggers)

    def _split(self, names: List[str], tensors: TensorMap) -> Tuple[List[str], List[str]]:
        key = tuple(names)
        if key not in self._halves:  # fixed at a chunk's first sample: a tracker stays on its thread
            self._halves[key] = halves_by_size(names, tensors)
        return self._halves[key]

    def _capture(self, index: int, target: CaptureTarget, samples: SampleSet,
                 on_chunk: Callable[[str, int, List[TensorMap]], None],
                 progress: Callable[[int, Optional[int], str], None]) -> None:
        runner = self.held.get(index, target.chunks[0])
        # samples that follow the run (a sequence's steps: the state) read their next sample from its outputs
        observe = getattr(samples, "observe", None)
        fed = self.masks.needs(target.chunks[0]) if self.masks else []
        if self.masks:  # an empty reduction's input: its size says whether the reduction's infinities are intended
            fed += [self.masks.empty[t].data for t in target.chunks[0] if t in self.masks.empty]
        fed = [t for t in fed if t in self.graph.input_names]  # a mask's condition given as a graph input
        # plugins are user code: called on this thread, as before
        pool = self.stats if not self.consumers.plugins else None
        pending: Optional[Future] = None
        try:
            for position, (sample_id, feeds) in enumerate(samples, start=1):
                outputs = runner.run(feeds, sample=sample_id)
                if observe is not None:
                    observe(outputs)
                if fed:
                    outputs = {**{t: feeds[t] for t in fed if t in feeds}, **outputs}
                if pool is None:
                    on_chunk(sample_id, 0, [outputs])
                else:
                    if pending is not None:
                        pending.result()  # the previous sample's statistics (a trigger's _Stop is raised here)
                    pending = pool.submit(on_chunk, sample_id, 0, [outputs])
                del outputs
                progress(position, len(samples), sample_id)
            if pending is not None:
                pending.result()
        finally:
            if pending is not None:
                wait([pending])  # never leave statistics running into the next chunk or a restart


class HeldSessions:
    """One capture session per chunk, created once; with several chunks only the last one used is
    kept (so memory stays bounded by one chunk, as in a single-process run)."""

    def __init__(self, graph: ModelGraph, runtime: RuntimeConfig, chunks: int) -> None:
        self.graph, self.runtime, self.chunks = graph, runtime, chunks
        self._runners: Dict[int, BoundRunner] = {}
        self.assignments: Dict[int, Optional[List[Subgraph]]] = {}
        """Chunk index -> its session's provider partition (read once, free: recorded at the build)."""
        self.build_seconds = 0.0

    def get(self, index: int, names: Sequence[str]) -> BoundRunner:
        if index not in self._runners:
            self._runners.clear()
            started = time.perf_counter()
            session = open_session(self.graph, self.runtime, extra_outputs=list(names), keep_outputs=False,
                                   label=self.graph.display_name)
            self.build_seconds = max(self.build_seconds, time.perf_counter() - started)
            self.assignments.setdefault(index, session.assignment())
            self._runners[index] = BoundRunner(session, list(names), reuse=False)
        return self._runners[index]


class ProbeBlockRunner(Runner):
    def __init__(self, job: ProbeJob, graph: ModelGraph) -> None:
        self.job, self.graph = job, graph
        self.nodes: Dict[str, Optional[NodeView]] = {t: node_view(graph, t) for t in job.tensors}
        self.triggers = parse_triggers(job.config.break_on)
        self.workspace = Workspace()
        self.held = HeldSessions(graph, job.runtime, len(job.chunks))
        self.block_start = 0
        self.masks = find_masks(graph)
        self.chunks = [mask_chunk(self.masks, graph, chunk) for chunk in job.chunks]
        """Each chunk with the tensors its masks' positions need (captured, not probed)."""
        self.stats = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mi-stats")
        """Each sample's statistics while the next sample runs (HeldProbeRunner)."""
        self.lane: Optional[Lane] = None
        if job.compiled:
            self.workspace.want_kernels()
            if job.graph is not None:  # this process (not a worker beside others): a second statistics thread
                self.lane = Lane(ThreadPoolExecutor(max_workers=1, thread_name_prefix="mi-stats-2"), Workspace())
                self.lane.workspace.want_kernels()

    def consumers(self) -> Consumers:
        """Fresh trackers, quantiser checks and plugins for one block."""
        config = self.job.config
        trackers = {}
        for name in self.job.tensors:
            node = self.graph.producer.get(name)
            trackers[name] = ProbeTracker(name, op_type=node.op_type if node else "(input)",
                                           node=node.name if node else "", channel_axis=config.channel_axis,
                                           keep_rows=config.per_sample, workspace=self.workspace,
                                           hist_sample=config.hist_sample)
            trackers[name].first_index = self.block_start
        quant: Dict[str, List[QuantTracker]] = {}
        for spec in self.job.quant:
            if spec.source != "weight":
                quant.setdefault(spec.tensor, []).append(QuantTracker(spec))
        plugins = [load_plugin(spec) for spec in config.plugins]
        accepted = [(p, frozenset(t for t in self.job.tensors if call_plugin(p, "accepts", t, self.nodes.get(t))))
                    for p in plugins]
        return Consumers(trackers, quant, accepted)

    def run_item(self, item: WorkItem) -> Any:
        try:
            return self._run_block(item.payload)
        except Exception as exc:  # noqa: BLE001 - re-raised by the driver, as in a single-process run
            return ItemFailure.of(exc, item.key)

    def _run_block(self, block: Block) -> BlockPartial:
        self.block_start = block.start
        samples = self.job.samples.subset(list(block.refs))
        if not self.job.chunks:
            return BlockPartial(block.start, self.consumers(), len(block.refs))
        report = self.job.progress
        runs = len(self.job.chunks) * len(block.refs)

        def progress(done: int, _total: Optional[int], sample: str) -> None:
            if report is not None:
                report(block.start + (done * len(block.refs)) // runs, None, sample)

        follow = list(getattr(samples, "follow", ()))  # outputs such samples need back (not probed unless selected)
        chunks = [list(dict.fromkeys([*chunk, *follow])) for chunk in self.chunks]
        runner = HeldProbeRunner(self.held, self.graph, self.job.runtime, chunks, samples, self.consumers,
                                 self.nodes, self.triggers, progress=progress, masks=self.masks, stats=self.stats,
                                 lane=self.lane, workspace=self.workspace)
        hit = runner.run()
        return BlockPartial(block.start, runner.consumers, runner.samples_done, hit, runner.restarted,
                            dict(self.held.assignments), self.held.build_seconds)

    def close(self) -> None:
        self.held = HeldSessions(self.graph, self.job.runtime, 0)
        self.stats.shutdown(wait=True)
        if self.lane is not None:
            self.lane.pool.shutdown(wait=True)


def mask_chunk(masks: MaskAnalysis, graph: ModelGraph, chunk: Sequence[str]) -> List[str]:
    """`chunk` plus what telling its masked values apart needs: the tensors their positions are carried
    from, and the input of each probed Softmax output that ends a mask (its fully masked rows)."""
    if not masks:
        return list(chunk)
    softmax = masks.softmax_inputs()
    extra = [softmax[masks.rows_of[t]] for t in chunk if masks.rows_of.get(t) in softmax]
    extra += [t for t in masks.needs([*chunk, *extra]) if t in graph.producer]  # graph inputs come with the sample
    return list(dict.fromkeys([*chunk, *extra]))


def merge_consumers(into: Consumers, other: Consumers) -> None:
    """Fold a later block's statistics into `into` (same tensors, quantisers and plugins)."""
    for name, tracker in into.trackers.items():
        tracker.merge(other.trackers[name])
    for name, trackers in into.quant.items():
        for mine, theirs in zip(trackers, other.quant[name]):
            mine.merge(theirs)
    for (mine, _), (theirs, _) in zip(into.plugins, other.plugins):
        call_plugin(mine, "merge", theirs)


@dataclass
class BlockRun:
    """The merged outcome of every block."""

    consumers: Consumers
    done: int
    hit: Optional[Hit] = None
    restarted: bool = False
    lost: List[Tuple[str, str]] = field(default_factory=list)
    assignments: Dict[int, Optional[List[Subgraph]]] = field(default_factory=dict)
    """Chunk index -> provider partition of its capture session, as the first block to build it read it."""
    build_seconds: float = 0.0


def probe_blocks(graph: ModelGraph, plan: Any, config: ProbeConfig, progress: Progress) -> BlockRun:
    """Probe every block through the configured executor and merge the partials in block order."""
    spec = config.executor
    check_executor(spec)
    plugins = [load_plugin(s) for s in config.plugins]
    single = [p.name for p in plugins if not mergeable(p)]
    if single and not spec.in_process:
        raise UsageError(f"--plugin {single[0]} has no merge(): it runs in this process only",
                         hint="leave --workers and --executor out, or give the plugin a merge method")
    if not spec.in_process and graph.path is None:
        raise UsageError("--workers needs the model as a file", hint="save it, or leave --workers out")
    samples: SampleSet = plan.samples if spec.in_process else shared_samples(plan.samples)
    # a plugin that cannot merge sees every sample in one block (this process only)
    size = max(1, len(samples.refs)) if single else BLOCK_SAMPLES
    blocks = [Block(start, tuple(samples.refs[start:start + size])) for start in range(0, len(samples.refs), size)]
    total = len(samples.refs)
    job = ProbeJob(model_path=str(graph.path.resolve()) if graph.path else "", config=config,
                   runtime=batch_runtime(config.runtime, spec), tensors=list(plan.tensors),
                   chunks=[list(c) for c in plan.chunks], quant=list(plan.quant), samples=samples.subset([]),
                   compiled=len(plan.chunks) == 1 and jit.worth(_values(plan) * len(samples.refs)),
                   graph=graph if spec.in_process else None,
                   progress=(lambda done, _total, sample: progress(done, total, sample)) if spec.in_process else None)
    executor = make_executor(spec, WARM_MODULES)
    merged: Optional[BlockRun] = None
    lost: List[Tuple[str, str]] = []
    try:
        for index, outcome in enumerate(executor.map(job, [Shard(i, (WorkItem(f"block {i}", b),))
                                                           for i, b in enumerate(blocks)])):
            block = blocks[index]
            if not outcome.ok:
                lost.extend((ref.id, outcome.error or "failed") for ref in block.refs)
                continue
            if isinstance(outcome.value, ItemFailure):
                raise outcome.value.error()
            partial: BlockPartial = outcome.value
            if merged is None:
                merged = BlockRun(partial.consumers, 0)
            else:
                merge_consumers(merged.consumers, partial.consumers)
            merged.done += partial.done
            for chunk, assignment in partial.assignments.items():
                merged.assignments.setdefault(chunk, assignment)
            merged.build_seconds = max(merged.build_seconds, partial.build_seconds)
            merged.restarted = merged.restarted or partial.restarted
            progress(min(total, block.start + len(block.refs)), total, block.refs[-1].id)
            if partial.hit is not None:
                hit = partial.hit
                merged.hit = Hit(hit.trigger, hit.stats, block.start + hit.sample_index)
                executor.abort()  # the run stops at the first trigger, in sample order: later blocks are moot
                break
    except BaseException:
        executor.abort()
        raise
    finally:
        executor.close()
    if merged is None:  # no block survived: empty statistics
        merged = BlockRun(ProbeBlockRunner(replace(job, graph=graph), graph).consumers(), 0)
    merged.lost = lost
    return merged


def _values(plan: Any) -> int:
    """Tensor values one sample's capture holds (from the plan's size estimate, 4-byte values)."""
    estimated = int(plan.capture.get("estimated_bytes", 0) or 0) if isinstance(plan.capture, dict) else 0
    return estimated // BYTES_PER_EXPOSED // 4


def lost_finding(lost: Sequence[Tuple[str, str]]) -> Finding:
    """MI827: samples of blocks no worker could finish (the others are probed and reported)."""
    return lost_samples_finding("MI827", lost, "probed")

