"""Running a model for profiling: end-to-end timing without the profiler, then profiled sessions.

onnxruntime's profiler records at most 1,000,000 events per session ("Maximum number of events
reached" otherwise), and the installed Python API has no run-level profiling. So the profiled
runs are split over as many sessions as the event budget needs, each with its own warm-up; the
first session also saves the optimised graph (which does not change how it runs). onnxruntime's
per-node memory statistics come from a separate one-run session, so collecting them cannot slow
the measured kernels.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..core.types import tensor_shapes
from ..core.graph import ModelGraph
from ..core.placement import Subgraph
from ..core import elemtypes
from ..core.runner import RuntimeConfig, Session, open_session, provider_name
from ..core.types import TensorMap
from ..errors import InferenceError

ORT_MAX_EVENTS = 1_000_000
EVENTS_PER_NODE = 3
"""Kernel events per original node and run, with room for the nodes fusions insert (layout
reorders, the Reshapes around a MatMul+Add turned Gemm)."""
Progress = Callable[[int, Optional[int], str], None]


@dataclass
class ProfiledRuns:
    trace_files: List[Path]
    optimized_model: Optional[Path]
    memory_csv: Optional[Path]
    runs_per_session: List[int]
    warmup: int
    notes: List[str] = field(default_factory=list)
    wall_s: float = 0.0
    assignment: Optional[List[Subgraph]] = None
    """onnxruntime's provider partitions of the first profiled session (core/placement.py)."""
    providers: List[str] = field(default_factory=list)
    """The providers that session was built with, in priority order."""


def runs_per_session(nodes: int, warmup: int, max_events: int = ORT_MAX_EVENTS) -> int:
    """How many measured runs one profiled session can hold within the event budget (at least 1)."""
    per_run = EVENTS_PER_NODE * max(nodes, 1) + 8
    return max(1, int(0.9 * max_events) // per_run - warmup)


COMPILING_PROVIDERS = frozenset({
    "OpenVINOExecutionProvider", "TensorrtExecutionProvider", "NvTensorRTRTXExecutionProvider", "QNNExecutionProvider",
    "CoreMLExecutionProvider", "MIGraphXExecutionProvider", "VitisAIExecutionProvider", "NnapiExecutionProvider"})
"""Providers that compile their partitions into kernels onnxruntime cannot serialise."""


def compiles(runtime: RuntimeConfig) -> bool:
    """Whether any provider of `runtime` compiles its partitions (no optimised graph can be saved)."""
    return any(provider_name(p) in COMPILING_PROVIDERS for p in runtime.providers)


def _run(session: Session, feeds: TensorMap, label: str) -> None:
    try:
        if session.typed_outputs or any(elemtypes.is_typed(v) for v in feeds.values()):
            # bfloat16/float8/int4 feeds or outputs: onnxruntime's plain run refuses them (core/elemtypes.py)
            elemtypes.run(session.ort_session, session.output_names, feeds, session.typed_outputs)
        else:
            session.ort_session.run(None, feeds)
    except Exception as exc:  # onnxruntime raises its own types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InferenceError(f"{session.label}: inference failed on {label}: {first[:300]}") from exc


def time_runs(sessions: Sequence[Session], feeds: Sequence[Sequence[TensorMap]], runs: int, warmup: int,
              progress: Optional[Progress] = None) -> List[List[float]]:
    """End-to-end latency (µs) of `runs` runs per session, without the profiler.

    With several sessions (a model and the one it is compared with) runs alternate between them,
    so drift on a busy machine hits both alike.
    """
    for s, session in enumerate(sessions):
        for r in range(warmup):
            _run(session, feeds[s][r % len(feeds[s])], f"warm-up run {r}")
    latencies: List[List[float]] = [[] for _ in sessions]
    clock = time.perf_counter_ns
    for r in range(runs):
        for s, session in enumerate(sessions):
            sample = feeds[s][r % len(feeds[s])]
            start = clock()
            _run(session, sample, f"run {r}")
            latencies[s].append((clock() - start) / 1000.0)
        if progress is not None:
            progress(r + 1, runs, "timing")
    return latencies


def profile_runs(graph: ModelGraph, runtime: RuntimeConfig, feeds: Sequence[TensorMap], runs: int, warmup: int,
                 workdir: Path, *, label: str, max_events: int = ORT_MAX_EVENTS, save_optimized: bool = True,
                 memory_stats: bool = True, progress: Optional[Progress] = None) -> ProfiledRuns:
    """Profiled runs of `graph`: Chrome-trace files, the optimised graph and node memory stats."""
    workdir.mkdir(parents=True, exist_ok=True)
    per_session = runs_per_session(len(graph.nodes), warmup, max_events)
    plan: List[int] = []
    left = runs
    while left > 0:
        plan.append(min(per_session, left))
        left -= plan[-1]
    result = ProfiledRuns(trace_files=[], optimized_model=None, memory_csv=None, runs_per_session=plan, warmup=warmup)
    if len(plan) > 1:
        result.notes.append(f"{runs} profiled runs exceed onnxruntime's profiler event limit for one session; "
                            f"they ran in {len(plan)} sessions of up to {per_session} runs, each with {warmup} "
                            "warm-up run(s)")
    if save_optimized and compiles(runtime):
        save_optimized = False  # onnxruntime refuses: "Unable to serialize model as it contains compiled nodes"
        result.notes.append("a compiling execution provider ran the model: its optimised graph cannot be saved, "
                            "kernels were mapped to original nodes by name")
    started = time.perf_counter()
    done = 0
    for index, count in enumerate(plan):
        first = index == 0
        optimized = workdir / "optimized.onnx" if first and save_optimized else None
        hook = _profiling_hook(workdir / f"session{index}", optimized)
        session = open_session(graph, runtime, label=label, options_hook=hook)
        if first:
            result.assignment, result.providers = session.assignment(), session.providers
        try:
            for r in range(warmup + count):
                _run(session, feeds[r % len(feeds)], f"profiled run {r}")
                if r >= warmup:
                    done += 1
                    if progress is not None:
                        progress(done, runs, "profiling")
        finally:
            path = session.end_profiling()
        result.trace_files.append(Path(path))
        if first:
            result.optimized_model = optimized if optimized is not None and optimized.is_file() else None
    result.wall_s = time.perf_counter() - started
    if memory_stats:
        result.memory_csv = node_memory_stats(graph, runtime, feeds[0], workdir / "node_memory.csv", label)
    return result


def node_memory_stats(graph: ModelGraph, runtime: RuntimeConfig, feeds: TensorMap, path: Path,
                      label: str) -> Optional[Path]:
    """onnxruntime's per-node memory CSV from one run of a dedicated session (None if not written)."""
    def hook(options: Any) -> None:
        options.add_session_config_entry("session.collect_node_memory_stats_to_file", str(path))

    session = open_session(graph, runtime, label=label, options_hook=hook)
    _run(session, feeds, "the memory-statistics run")
    del session
    return path if path.is_file() else None


def _profiling_hook(prefix: Path, optimized: Optional[Path]) -> Callable[[Any], None]:
    def hook(options: Any) -> None:
        options.enable_profiling = True
        options.profile_file_prefix = str(prefix)
        if optimized is not None:
            options.optimized_model_filepath = str(optimized)
    return hook


def open_timing_session(graph: ModelGraph, runtime: RuntimeConfig, label: str) -> Session:
    """A plain session (no profiler, nothing saved) for end-to-end timing."""
    return open_session(graph, runtime, label=label)


def input_shapes(feeds: Sequence[TensorMap]) -> Dict[str, tuple]:
    """Shapes of the first sample's inputs (what shape inference is run with)."""
    return tensor_shapes(feeds[0]) if feeds else {}
