"""`mi compare --layers`: pair the tensors of two graphs, capture them streaming, compare each pair.

Steps: pair tensors (core/match.py); decide per model how they are captured (layer_capture.py);
plan chunks under the memory budget (core/capture.py); run every sample through both models,
reduce each pair to sufficient statistics at once (diff/fast_stats.py) and drop the tensors; then
optionally isolate layers (layer_isolate.py) and build the report section (layer_report.py).
Memory stays flat in the number of samples: per sample only one chunk's tensors exist, in
buffers reused from sample to sample.
"""
from __future__ import annotations

from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import background, jit
from ..core.capture import CapturePlan, CaptureTarget, estimate_sizes, plan_capture, run_capture
from ..core.graph import ModelGraph
from ..core.inputs import adapt_feeds
from ..core.io_match import rename_feeds
from ..core.placement import Subgraph
from ..core.runner import Session, cpu_count
from ..core.select import ALL, select_tensors
from ..core.types import TensorMap
from ..diff.engine import TensorTracker
from ..diff.fast_stats import Scratch, fast_pair_stats
from ..diff.gates import Gate, check_gate_targets
from ..diff.values import is_numeric_tensor, layout, numeric_value
from ..progress import Progress, no_progress
from .capture import CaptureMeasurements, LayerPlan, Reader, Side, prepare_side, settle_layout, workdir
from .config import CompareConfig, Granularity, LayerConfig
from .isolate import IsolationOutcome, run_isolation
from .layout import channels_last_perm, read_shape, same_layout
from .pairing.match import TensorMatching, TensorPair, match_tensors, parse_tensor_map
from .pairing.semantic import SemanticGraph
from .plan import ComparePlan

METRICS_THREADS = 2 if cpu_count() > 1 else 1
"""Threads reducing one sample's pairs while the next sample runs: on two cores both work whenever
onnxruntime waits for them (each pair has its own tracker, so the sums are the same bits)."""
KERNELS = "inspector_cli.diff.kernels"
"""The compiled block pass of fast_stats (numba), used on large runs (core/jit.py)."""
DEFAULT_LAYER_GATE = Gate(flag="layer-min-cosine", metric="cosine", threshold=0.99)
DOUBLE_BUFFER_BYTES = 16 << 20
"""Up to this many captured bytes per sample, both models get two buffer sets (full overlap); above
it only the smaller side does: a second set of the larger side costs more memory than a plain run's
whole working set (MobileNetV2: 28 MiB of float32 activations per set, measured)."""
_PATTERN_CHARS = set("*?[")


@dataclass(frozen=True)
class LayerRun:
    """The layer pass, in three parts each written once: what is compared (the plan), what the capture
    measured, and what `--isolate` measured (None without it)."""

    plan: LayerPlan
    measured: CaptureMeasurements
    isolation: Optional[IsolationOutcome] = None


def layer_pairs(plan: ComparePlan, lc: LayerConfig, output_map: Sequence[Tuple[str, str]]
                ) -> Tuple[SemanticGraph, SemanticGraph, TensorMatching, List[TensorPair], Counter]:
    """Pair the selected tensors of both models and apply the granularity (no inference)."""
    ga, gb = plan.graph_a, plan.graph_b
    sa, sb = SemanticGraph.build(ga), SemanticGraph.build(gb)
    chosen = select_tensors(ga, list(lc.patterns))
    forced = {sa.canonical(p) for p in lc.patterns if p != ALL and not _PATTERN_CHARS & set(p)
              and not p.startswith(("op:", "re:"))}
    selected = {sa.canonical(t) for t in chosen}
    if ALL in lc.patterns:
        selected.update(ga.input_names)  # a model input the candidate quantises gets a row too
    skipped: Counter = Counter()
    for tensor in chosen:
        root = sa.canonical(tensor)
        if root in sa.static:
            skipped["constant (weights, shapes): nothing to compare"] += 1
        elif not sa.is_data(root):
            skipped["not an activation (integer indices, masks)"] += 1
        elif root != tensor:
            skipped["same values as another compared tensor (Reshape, Flatten, Identity, Cast, Q/DQ)"] += 1
    inputs = [(p.a, p.b) for p in plan.inputs.pairs]
    matching = match_tensors(sa, sb, inputs=inputs, user_map=parse_tensor_map(output_map, ga, gb), selected=selected)
    pairs = []
    for pair in matching.pairs:
        if lc.granularity == Granularity.CHAIN and not pair.chain_end and pair.a not in forced and pair.method != "map":
            skipped["inside a fused chain (--granularity tensor compares it)"] += 1
            continue
        pairs.append(pair)
    return sa, sb, matching, pairs, skipped


def run_layers(plan: ComparePlan, config: CompareConfig, progress: Progress = no_progress) -> LayerRun:
    """Capture and compare every pair over all samples (see the module doc)."""
    lc = config.layers or LayerConfig()
    sa, sb, matching, pairs, skipped = layer_pairs(plan, lc, config.output_map)
    check_gate_targets(lc.gates, [p.a for p in pairs], what="layer")
    gates = tuple(lc.gates) or (DEFAULT_LAYER_GATE,)
    first_id, first = next(iter(plan.samples))

    def adapt_b(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return adapt_feeds(rename_feeds(feeds, plan.inputs.pairs), side_b_dtypes)[0]

    with workdir() as tmp:
        side_b_dtypes = _input_dtypes(plan.graph_b)
        # Both models' plain sessions are built in parallel: onnxruntime releases the GIL meanwhile
        # (one graph object cannot be serialised by two threads at once: then one after the other).
        # On core.background's threads: a Ctrl-C is raised at once, the builds left to the exit path.
        prepare = [partial(prepare_side, "A", plan.graph_a, sa, config.runtime_a, [p.view_a for p in pairs],
                           lc.capture, first, observer=lc.observer_check, workdir=Path(tmp)),
                   partial(prepare_side, "B", plan.graph_b, sb, config.runtime_of_b, [p.view_b for p in pairs],
                           lc.capture, adapt_b(first), observer=lc.observer_check, workdir=Path(tmp))]
        if plan.graph_a is not plan.graph_b:
            side_a, side_b = background.run_all(prepare, name="mi-prepare")
        else:
            side_a, side_b = background.run_all([lambda: [side() for side in prepare]], name="mi-prepare")[0]
        usable, unavailable = [], []
        for pair in pairs:
            reason = side_a.unavailable.get(pair.view_a.expose) or side_b.unavailable.get(pair.view_b.expose)
            if reason:
                unavailable.append((pair, reason))
            else:
                usable.append(pair)
        layers = LayerPlan(sa, sb, matching, tuple(usable), side_a, side_b, gates, not lc.gates, skipped,
                           tuple(unavailable))
        measured = LayerCapture(layers, plan, config, adapt_b, first_id).run(progress)
        layers, measured = _drop_incomparable(layers, measured)
        isolation = run_isolation(layers, measured.trackers, plan, config, adapt_b) if lc.isolate else None
    return LayerRun(layers, measured, isolation)


def _drop_incomparable(layers: LayerPlan, measured: CaptureMeasurements) -> Tuple[LayerPlan, CaptureMeasurements]:
    """Pairs whose captured layouts differ leave the table for the not-compared list, with the reason."""
    if not measured.incomparable:
        return layers, measured
    keep = [i for i in range(len(layers.pairs)) if i not in measured.incomparable]
    unavailable = layers.unavailable + tuple((layers.pairs[i], why) for i, why in sorted(measured.incomparable.items()))
    return (replace(layers, pairs=tuple(layers.pairs[i] for i in keep), unavailable=unavailable),
            replace(measured, trackers=[measured.trackers[i] for i in keep], incomparable={}))


def _input_dtypes(graph: ModelGraph) -> Dict[str, Optional[np.dtype]]:
    return {t.name: t.numpy_dtype for t in graph.inputs}


class LayerCapture:
    """The capture loop: every sample through both models, each pair reduced to sums at once.

    Steps: `_chunks` plans chunks under the memory budget, `_targets` sets up both models'
    capture (which one runs first, buffer sets), then per sample `_on_chunk` feeds the output
    trackers and hands the chunk to the metrics thread (`_reduce_chunk`), while `_before_run`
    keeps the second model from overwriting a single buffer set still being read.
    """

    def __init__(self, layers: LayerPlan, plan: ComparePlan, config: CompareConfig,
                 adapt_b: Callable[[TensorMap], TensorMap], first_id: str) -> None:
        self.layers, self.plan, self.config, self.adapt_b, self.first_id = layers, plan, config, adapt_b, first_id
        self.a_inputs = set(plan.graph_a.input_names)  # read from the sample itself, not from a session
        atol = (config.layers or LayerConfig()).atol
        self.trackers = [TensorTracker(p.a, p.b, gates=list(layers.gates), distribution=False, keep_per_sample=False,
                                       atol=atol) for p in layers.pairs]
        self.output_trackers = [TensorTracker(p.a, p.b, gates=list(config.gates), topk=config.topk,
                                              keep_per_sample=config.per_sample) for p in plan.outputs.pairs]
        self.captured_first: Dict[str, Dict[str, np.ndarray]] = {}
        self.current_feeds: TensorMap = {}
        self.lanes = [_Lane() for _ in range(METRICS_THREADS)]
        """Each metrics thread's buffers (fast_stats scratch, channels-last transposes)."""
        self.parts: List[List[int]] = []
        """Each chunk's pairs split between the metrics threads, by size (after the first sample)."""
        self.kernels = False
        self.incomparable: Dict[int, str] = {}
        self.pending: List[Future] = []
        self.instrumented: Dict[str, List[Optional[List[Subgraph]]]] = {}

    def _chunks(self) -> Tuple[CapturePlan, int, int]:
        lc, pairs, plan = self.config.layers or LayerConfig(), self.layers.pairs, self.plan
        shapes = {k: tuple(v.shape) for k, v in next(iter(plan.samples))[1].items()}
        sizes_a = estimate_sizes(plan.graph_a, [p.view_a.expose for p in pairs], shapes)
        shapes_b = {p.b: shapes[p.a] for p in plan.inputs.pairs if p.a in shapes}
        sizes_b = estimate_sizes(plan.graph_b, [p.view_b.expose for p in pairs], shapes_b)
        sizes = [None if x is None or y is None else x + y for x, y in zip(sizes_a, sizes_b)]
        return plan_capture(sizes, lc.max_memory), sum(s or 0 for s in sizes_a), sum(s or 0 for s in sizes_b)

    def _targets(self, capture_plan: CapturePlan, bytes_a: int, bytes_b: int) -> List[CaptureTarget]:
        pairs, side_a, side_b = self.layers.pairs, self.layers.side_a, self.layers.side_b
        chunks_a = [[side_a.readers[pairs[i].view_a.expose].expose for i in c
                     if pairs[i].view_a.expose not in self.a_inputs] for c in capture_plan.chunks]
        chunks_b = [[side_b.readers[pairs[i].view_b.expose].expose for i in c] for c in capture_plan.chunks]
        # The metrics of a sample are reduced in a worker thread while onnxruntime runs the next sample
        # (numpy and onnxruntime release the GIL). The model whose tensors are smaller runs first with two
        # alternating buffer sets, so its next run overlaps the metrics; the larger one gets a second set
        # only when that is cheap, otherwise it waits for the metrics before overwriting its buffers.
        self.small_first = bytes_b <= bytes_a
        double_both = (bytes_a + bytes_b) // max(1, capture_plan.runs_per_sample) <= DOUBLE_BUFFER_BYTES
        # Neither model spins idle onnxruntime threads: the one that runs while the metrics thread works
        # would take its core, and the one that runs after waiting for the metrics (single buffer set)
        # kept spinning through the metrics of the next sample: MobileNetV2 int8, 64 samples, whole
        # process 13.0-14.3 CPU s with it spinning vs 9.0-9.8 without (same values; wall no worse).
        sets_a = 2 if double_both or not self.small_first else 1
        sets_b = 2 if double_both or self.small_first else 1
        graph_a, graph_b = side_a.target_graph, side_b.target_graph
        assert graph_a is not None and graph_b is not None  # set by prepare_side
        target_a = CaptureTarget(graph_a, side_a.runtime_for_capture(spin=False), chunks_a,
                                 adapt=self._keep_feeds, keep_outputs=True, label=f"A {self.plan.graph_a.display_name}",
                                 reuse_buffers=True, buffer_sets=sets_a, options_hook=_capture_options,
                                 on_session=self._partition_reader(side_a))
        target_b = CaptureTarget(graph_b, side_b.runtime_for_capture(spin=False), chunks_b,
                                 adapt=self.adapt_b, keep_outputs=True, label=f"B {self.plan.graph_b.display_name}",
                                 reuse_buffers=True, buffer_sets=sets_b, options_hook=_capture_options,
                                 on_session=self._partition_reader(side_b))
        return [target_b, target_a] if self.small_first else [target_a, target_b]

    def _partition_reader(self, side: Side) -> Callable[[int, Session], None]:
        """Keeps the provider partition of each capture session of a side (free to read), to compare
        with the plain session's where tensors are exposed (capture honesty: docs/providers.md)."""
        found = self.instrumented.setdefault(side.label, [])
        return lambda chunk, session: found.append(session.assignment())

    def run(self, progress: Progress) -> CaptureMeasurements:
        capture_plan, bytes_a, bytes_b = self._chunks()
        self.capture_plan = capture_plan
        note = capture_plan.budget_note()
        if note is not None and note not in self.layers.side_a.notes:
            self.layers.side_a.notes.append(note)  # reported with the capture's notes (CaptureInfo.notes)
        self.targets = self._targets(capture_plan, bytes_a, bytes_b)
        # not under a memory budget that splits the capture: numba itself holds ~160 MB (docs/memory.md)
        self.kernels = capture_plan.runs_per_sample == 1 and jit.worth((bytes_a + bytes_b) // 4 * len(self.plan.samples))
        if self.kernels:
            jit.prefetch(KERNELS)  # loads while the capture sessions build
        self.worker = ThreadPoolExecutor(max_workers=len(self.lanes), thread_name_prefix="mi-metrics")
        try:
            runs = run_capture(self.targets, self.plan.samples, self._on_chunk, progress=progress,
                               before_run=self._before_run)
            self._wait()
        finally:
            self.worker.shutdown(wait=True)
        return CaptureMeasurements(self.trackers, self.output_trackers, self.captured_first, self.first_id,
                                   capture_plan.strategy.value, capture_plan.runs_per_sample, runs,
                                   capture_plan.estimated_bytes, capture_plan.budget_bytes, dict(self.incomparable),
                                   dict(self.instrumented))

    def _keep_feeds(self, feeds: TensorMap) -> TensorMap:
        self.current_feeds = feeds
        return feeds

    def _wait(self) -> None:
        while self.pending:
            self.pending.pop().result()

    def _before_run(self, index: int, sample: str) -> None:
        if index == 1 and self.targets[1].buffer_sets == 1:
            self._wait()  # the second model's single buffer set is still being read

    def _on_chunk(self, sample: str, chunk: int, outputs: List[TensorMap]) -> None:
        out_a, out_b = (outputs[1], outputs[0]) if self.small_first else (outputs[0], outputs[1])
        out_a = {**out_a, **{k: v for k, v in self.current_feeds.items() if k in self.a_inputs}}
        if chunk == 0:
            for tracker in self.output_trackers:
                tracker.add(sample, out_a[tracker.name], out_b[tracker.name_b])
            if sample == self.first_id:
                self.captured_first = {
                    "A": {k: out_a[k].copy() for k in self.plan.graph_a.output_names if k in out_a},
                    "B": {k: out_b[k].copy() for k in self.plan.graph_b.output_names if k in out_b}}
        self._wait()
        indices = self.capture_plan.chunks[chunk]
        if len(self.lanes) > 1 and all(self.trackers[i].dtype_a or i in self.incomparable for i in indices):
            # every pair's layout settled on an earlier sample: the pairs are independent (one tracker each)
            parts = self._parts(chunk)
            self.pending.extend(self.worker.submit(self._reduce_chunk, sample, part, out_a, out_b, lane)
                                for part, lane in zip(parts, self.lanes) if part)
        else:
            self.pending.append(self.worker.submit(self._reduce_chunk, sample, indices, out_a, out_b, self.lanes[0]))

    def _parts(self, chunk: int) -> List[List[int]]:
        """The pairs of `chunk` split between the metrics threads with about the same number of elements
        each (largest first, each to the lighter share)."""
        while len(self.parts) <= chunk:
            order = sorted(self.capture_plan.chunks[len(self.parts)], key=lambda i: -_elements(self.trackers[i]))
            shares: List[List[int]] = [[] for _ in self.lanes]
            loads = [0] * len(self.lanes)
            for index in order:
                lightest = loads.index(min(loads))
                shares[lightest].append(index)
                loads[lightest] += _elements(self.trackers[index])
            self.parts.append(shares)  # type: ignore[arg-type]
        return self.parts[chunk]  # type: ignore[return-value]

    def _reduce_chunk(self, sample: str, indices: Sequence[int], out_a: TensorMap, out_b: TensorMap,
                      lane: "_Lane") -> None:
        if self.kernels and not lane.ready:
            lane.scratch.kernels, lane.ready = jit.kernels(KERNELS), True
        for index in indices:
            self._compare_pair(index, sample, out_a, out_b, lane)

    def _compare_pair(self, index: int, sample: str, out_a: TensorMap, out_b: TensorMap, lane: "_Lane") -> None:
        pair, tracker = self.layers.pairs[index], self.trackers[index]
        side_a, side_b = self.layers.side_a, self.layers.side_b
        reader_a = side_a.readers.get(pair.view_a.expose) or Reader(pair.view_a.expose)
        reader_b = side_b.readers[pair.view_b.expose]
        # bfloat16/float8/int4 layers: measured on their exact values in a numpy type (diff/values.numeric)
        stored_a, stored_b = out_a[reader_a.expose], out_b[reader_b.expose]
        raw_a, raw_b = numeric_value(stored_a), numeric_value(stored_b)
        if index in self.incomparable:
            return
        if not (is_numeric_tensor(raw_a) and is_numeric_tensor(raw_b)):
            tracker.add(sample, raw_a, raw_b)  # strings, sequences, maps: diff/values.py
            return
        if not tracker.dtype_a:  # first sample: check relaid readers against the declared shapes
            reader_a = self._settled(side_a, pair.view_a.expose, reader_a, raw_a)
            shape_a = read_shape(raw_a.shape, reader_a.perm)
            reader_b = self._settled(side_b, pair.view_b.expose, reader_b, raw_b, shape_a)
            shape_b = read_shape(raw_b.shape, reader_b.perm)
            if raw_a.size == raw_b.size and not same_layout(shape_a, shape_b) and side_b.mode == "deployed":
                reader_b = self._channels_last(side_b, pair.view_b.expose, reader_b, raw_b, shape_a)
                shape_b = read_shape(raw_b.shape, reader_b.perm)
            if raw_a.size == raw_b.size and not same_layout(shape_a, shape_b):
                self.incomparable[index] = self._incomparable(shape_a, shape_b)
                return
        flat_a, affine_a = reader_a.flat(raw_a, side_a.resolver, lane.layout_buffer("a", reader_a, raw_a))
        flat_b, affine_b = reader_b.flat(raw_b, side_b.resolver, lane.layout_buffer("b", reader_b, raw_b))
        if not tracker.dtype_a:
            tracker.dtype_a, tracker.dtype_b = _dtype(stored_a, affine_a), _dtype(stored_b, affine_b)
            tracker.shape_a, tracker.shape_b = list(shape_a), list(shape_b)
        if flat_a.size != flat_b.size:
            tracker.add(sample, flat_a, flat_b)  # counted as a shape mismatch
            return
        tracker.samples += 1
        tracker.add_stats(sample, fast_pair_stats(flat_a, flat_b, lane.scratch, affine_a=affine_a, affine_b=affine_b))

    @staticmethod
    def _settled(side: Side, name: str, reader: Reader, raw: np.ndarray,
                 reference: Optional[Tuple[int, ...]] = None) -> Reader:
        settled = settle_layout(reader, raw, side.sem.graph.tensor_info(name).shape, reference)
        if settled is not reader:
            side.readers[name] = settled  # later samples (and --isolate) read it this way too
        return settled

    @staticmethod
    def _channels_last(side: Side, name: str, reader: Reader, raw: np.ndarray, reference: Tuple[int, ...]) -> Reader:
        """The reader of an array that onnxruntime's NHWC transformer relaid where optgraph.py could not
        follow it (a Pad between channels-last int8 convolutions: [1, 113, 113, 48] for [1, 48, 113, 113])."""
        perm = channels_last_perm(reference, raw.shape)
        if perm is None:
            return reader
        relaid = Reader(reader.expose, reader.quant, perm)
        side.readers[name] = relaid  # later samples (and --isolate) read it this way too
        return relaid

    def _incomparable(self, shape_a: Tuple[int, ...], shape_b: Tuple[int, ...]) -> str:
        deployed = [s.label for s in (self.layers.side_a, self.layers.side_b) if s.mode == "deployed"]
        hint = (f"; model {' and '.join(deployed)} was read from onnxruntime's optimised graph, which may hold it "
                "in another layout: --capture instrumented reads it as exported") if deployed else ""
        return (f"not compared: shapes {list(shape_a)} (A) and {list(shape_b)} (B) are not one layout (not equal "
                f"up to size-1 dims or a reshape), so element-wise metrics would pair unrelated values{hint}")


class _Lane:
    """One metrics thread's reused buffers."""

    def __init__(self) -> None:
        self.scratch = Scratch()
        self.layout_buffers: Dict[Tuple[str, str], np.ndarray] = {}
        self.ready = False
        """Whether the compiled kernels (if wanted) were put in `scratch`."""

    def layout_buffer(self, side: str, reader: Reader, raw: np.ndarray) -> Optional[np.ndarray]:
        """An array to transpose a channels-last tensor into, one per side and dtype, grown to the largest
        such tensor and reused for every pair and sample (a metrics thread reads one pair at a time and
        drops its flat arrays before the next; one buffer per pair held them all at once)."""
        if reader.perm is None:
            return None
        key = (side, raw.dtype.str)
        buffer = self.layout_buffers.get(key)
        if buffer is None or buffer.size < raw.size:
            buffer = self.layout_buffers[key] = np.empty(raw.size, dtype=raw.dtype)
        return buffer[: raw.size]


def _elements(tracker: TensorTracker) -> int:
    return int(np.prod(tracker.shape_a)) if tracker.shape_a else 0


def _capture_options(options: object) -> None:
    # Exposed outputs cannot share memory, which defeats onnxruntime's memory-pattern planning: without
    # it the arena stays ~20-30% smaller for an instrumented model, at the same speed (measured).
    options.enable_mem_pattern = False  # type: ignore[attr-defined]


def _dtype(raw: np.ndarray, affine: object) -> str:
    name = layout(raw).dtype  # ONNX's name for a type numpy lacks ('bfloat16', 'float8e4m3fn')
    return f"{name} (dequantised)" if affine is not None else name
