"""`mi compare --layers`: pair the tensors of two graphs, capture them streaming, compare each pair.

Steps: pair tensors (core/match.py); decide per model how they are captured (layer_capture.py);
plan chunks under the memory budget (core/capture.py); run every sample through both models,
reduce each pair to sufficient statistics at once (diff/fast_stats.py) and drop the tensors; then
optionally isolate layers (layer_isolate.py) and build the report section (layer_report.py).
Memory stays flat in the number of samples: per sample only one chunk's tensors exist, in
buffers reused from sample to sample.
"""
from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..config.compare import CompareConfig, LayerConfig
from ..core.capture import CaptureTarget, estimate_sizes, plan_capture, run_capture
from ..core.inputs import adapt_feeds
from ..core.io_match import rename_feeds
from ..core.match import TensorMatching, TensorPair, match_tensors, parse_tensor_map
from ..core.select import ALL, select_tensors
from ..core.semantic import SemanticGraph
from ..diff.engine import TensorTracker
from ..diff.fast_stats import Scratch, fast_pair_stats
from ..diff.gates import Gate
from . import Progress, no_progress
from .layer_capture import Side, prepare_side, workdir

DEFAULT_LAYER_GATE = Gate(flag="layer-min-cosine", metric="cosine", threshold=0.99)
_PATTERN_CHARS = set("*?[")


@dataclass
class LayerRun:
    """Everything the layer pass measured, before it becomes a result section."""

    sem_a: SemanticGraph
    sem_b: SemanticGraph
    matching: TensorMatching
    pairs: List[TensorPair]
    trackers: List[TensorTracker]
    output_trackers: List[TensorTracker]
    side_a: Side
    side_b: Side
    gates: Tuple[Gate, ...]
    default_gates: bool
    skipped: Counter = field(default_factory=Counter)
    unavailable: List[Tuple[TensorPair, str]] = field(default_factory=list)
    captured_first: Dict[str, Dict[str, np.ndarray]] = field(default_factory=dict)
    first_sample: str = ""
    strategy: str = "all-at-once"
    chunks: int = 1
    runs: int = 0
    estimated_bytes: int = 0
    budget_bytes: int = 0
    isolation: Optional[Dict[str, object]] = None
    iso_trackers: Dict[str, TensorTracker] = field(default_factory=dict)
    noise_trackers: Dict[str, TensorTracker] = field(default_factory=dict)
    isolation_runs: int = 0


def layer_pairs(plan, lc: LayerConfig, output_map: Sequence[Tuple[str, str]]  # type: ignore[no-untyped-def]
                ) -> Tuple[SemanticGraph, SemanticGraph, TensorMatching, List[TensorPair], Counter]:
    """Pair the selected tensors of both models and apply the granularity (no inference)."""
    ga, gb = plan.graph_a, plan.graph_b
    sa, sb = SemanticGraph.build(ga), SemanticGraph.build(gb)
    chosen = select_tensors(ga, list(lc.patterns))
    forced = {sa.canonical(p) for p in lc.patterns if p != ALL and not _PATTERN_CHARS & set(p)
              and not p.startswith(("op:", "re:"))}
    selected = {sa.canonical(t) for t in chosen}
    skipped: Counter = Counter()
    aliases = sum(1 for t in chosen if sa.canonical(t) != t)
    if aliases:
        skipped["same values as another tensor (Identity, Cast, Reshape, Q/DQ): compared once"] = aliases
    inputs = [(p.a, p.b) for p in plan.inputs.pairs]
    matching = match_tensors(sa, sb, inputs=inputs, user_map=parse_tensor_map(output_map, ga, gb), selected=selected)
    pairs = []
    for pair in matching.pairs:
        if lc.granularity == "chain" and not pair.chain_end and pair.a not in forced and pair.method != "map":
            skipped["inside a fused chain (--granularity tensor compares it)"] += 1
            continue
        pairs.append(pair)
    return sa, sb, matching, pairs, skipped


def run_layers(plan, config: CompareConfig, progress: Progress = no_progress) -> LayerRun:  # type: ignore[no-untyped-def]
    """Capture and compare every pair over all samples (see the module doc)."""
    lc = config.layers or LayerConfig()
    sa, sb, matching, pairs, skipped = layer_pairs(plan, lc, config.output_map)
    gates = tuple(lc.gates) or (DEFAULT_LAYER_GATE,)
    first_id, first = next(iter(plan.samples))

    def adapt_b(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return adapt_feeds(rename_feeds(feeds, plan.inputs.pairs), side_b_dtypes)[0]

    with workdir() as tmp:
        from pathlib import Path

        side_a = prepare_side("A", plan.graph_a, sa, config.runtime_a, [p.view_a for p in pairs], lc.capture, first,
                              observer=lc.observer_check, workdir=Path(tmp))
        side_b_dtypes = _input_dtypes(plan.graph_b)
        side_b = prepare_side("B", plan.graph_b, sb, config.runtime_of_b, [p.view_b for p in pairs], lc.capture,
                              adapt_b(first), observer=lc.observer_check, workdir=Path(tmp))
        run = LayerRun(sa, sb, matching, [], [], [], side_a, side_b, gates, not lc.gates, skipped)
        for pair in pairs:
            reason = side_a.unavailable.get(pair.view_a.expose) or side_b.unavailable.get(pair.view_b.expose)
            if reason:
                run.unavailable.append((pair, reason))
            else:
                run.pairs.append(pair)
        _capture(run, plan, config, adapt_b, first_id, progress)
        if lc.isolate:
            from .layer_isolate import run_isolation

            run_isolation(run, plan, config, adapt_b)
    return run


def _input_dtypes(graph) -> Dict[str, Optional[np.dtype]]:  # type: ignore[no-untyped-def]
    return {t.name: t.numpy_dtype for t in graph.inputs}


def _capture(run: LayerRun, plan, config: CompareConfig, adapt_b, first_id: str,  # type: ignore[no-untyped-def]
             progress: Progress) -> None:
    lc = config.layers or LayerConfig()
    pairs, side_a, side_b = run.pairs, run.side_a, run.side_b
    shapes = {k: tuple(v.shape) for k, v in next(iter(plan.samples))[1].items()}
    sizes_a = estimate_sizes(plan.graph_a, [p.view_a.expose for p in pairs], shapes)
    shapes_b = {p.b: shapes[p.a] for p in plan.inputs.pairs if p.a in shapes}
    sizes_b = estimate_sizes(plan.graph_b, [p.view_b.expose for p in pairs], shapes_b)
    sizes = [None if x is None or y is None else x + y for x, y in zip(sizes_a, sizes_b)]
    capture_plan = plan_capture(sizes, lc.max_memory)
    run.strategy, run.chunks = capture_plan.strategy.value, capture_plan.runs_per_sample
    run.estimated_bytes, run.budget_bytes = capture_plan.estimated_bytes, capture_plan.budget_bytes
    chunks_a = [[side_a.readers[pairs[i].view_a.expose].expose for i in c] for c in capture_plan.chunks]
    chunks_b = [[side_b.readers[pairs[i].view_b.expose].expose for i in c] for c in capture_plan.chunks]
    targets = [
        CaptureTarget(side_a.target_graph, side_a.target_runtime, chunks_a, keep_outputs=True,  # type: ignore[arg-type]
                      label=f"A {plan.graph_a.display_name}", reuse_buffers=True),
        CaptureTarget(side_b.target_graph, side_b.target_runtime, chunks_b, adapt=adapt_b, keep_outputs=True,  # type: ignore[arg-type]
                      label=f"B {plan.graph_b.display_name}", reuse_buffers=True),
    ]
    run.trackers = [TensorTracker(p.a, p.b, gates=list(run.gates), distribution=False, keep_per_sample=False)
                    for p in pairs]
    run.output_trackers = [TensorTracker(p.a, p.b, gates=list(config.gates), topk=config.topk,
                                         keep_per_sample=config.per_sample) for p in plan.outputs.pairs]
    scratch = Scratch()
    run.first_sample = first_id

    def on_chunk(sample: str, chunk: int, outputs: List[Dict[str, np.ndarray]]) -> None:
        out_a, out_b = outputs
        if chunk == 0:
            for tracker in run.output_trackers:
                tracker.add(sample, out_a[tracker.name], out_b[tracker.name_b])
            if sample == first_id:
                run.captured_first = {"A": {k: out_a[k].copy() for k in plan.graph_a.output_names if k in out_a},
                                      "B": {k: out_b[k].copy() for k in plan.graph_b.output_names if k in out_b}}
        for index in capture_plan.chunks[chunk]:
            _compare_pair(run, index, sample, out_a, out_b, scratch)

    run.runs = run_capture(targets, plan.samples, on_chunk, progress=progress)


def _compare_pair(run: LayerRun, index: int, sample: str, out_a: Dict[str, np.ndarray], out_b: Dict[str, np.ndarray],
                  scratch: Scratch) -> None:
    pair, tracker = run.pairs[index], run.trackers[index]
    reader_a, reader_b = run.side_a.readers[pair.view_a.expose], run.side_b.readers[pair.view_b.expose]
    raw_a, raw_b = out_a[reader_a.expose], out_b[reader_b.expose]
    flat_a, affine_a = reader_a.flat(raw_a, run.side_a.resolver)
    flat_b, affine_b = reader_b.flat(raw_b, run.side_b.resolver)
    if not tracker.dtype_a:
        tracker.dtype_a, tracker.dtype_b = _dtype(raw_a, affine_a), _dtype(raw_b, affine_b)
        tracker.shape_a = list(raw_a.transpose(np.argsort(reader_a.perm)).shape if reader_a.perm else raw_a.shape)
        tracker.shape_b = list(raw_b.transpose(np.argsort(reader_b.perm)).shape if reader_b.perm else raw_b.shape)
    if flat_a.size != flat_b.size:
        tracker.add(sample, flat_a, flat_b)  # counted as a shape mismatch
        return
    tracker.samples += 1
    tracker.add_stats(sample, fast_pair_stats(flat_a, flat_b, scratch, affine_a=affine_a, affine_b=affine_b))


def _dtype(raw: np.ndarray, affine: object) -> str:
    return f"{raw.dtype} (dequantised)" if affine is not None else str(raw.dtype)


def select_isolated(spec: Sequence[str], pairs: Sequence[TensorPair], trackers: Sequence[TensorTracker]) -> List[int]:
    """Indices of the layers `--isolate` names: all, worst:N (lowest cosine), or names/globs."""
    chosen: List[int] = []
    for item in spec:
        if item == "all":
            chosen.extend(range(len(pairs)))
        elif item.startswith("worst:"):
            count = int(item.split(":", 1)[1])
            ranked = sorted(range(len(pairs)), key=lambda i: (trackers[i].dataset_metrics().get("cosine") or 0.0,
                                                               trackers[i].dataset_metrics().get("sqnr") or 0.0))
            chosen.extend(ranked[:count])
        else:
            chosen.extend(i for i, p in enumerate(pairs) if p.a == item or fnmatch.fnmatchcase(p.a, item))
    return sorted(set(chosen))
