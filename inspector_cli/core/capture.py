"""Bounded-memory capture of intermediate tensors over streamed samples.

Exposing a tensor as an output makes onnxruntime allocate it separately (no buffer reuse) and
copy it to numpy, so capturing every tensor of a large model at once can need gigabytes. The
planner estimates each tensor's size from shape inference on the actual input shapes and splits
the tensors into chunks whose total fits `budget_bytes`:

- **all-at-once**: one chunk, one run per sample and model;
- **chunked**: several chunks, run chunk-major (one session alive at a time, samples re-read for
  each chunk), so peak memory is bounded by the largest chunk, not by the model.

Consumers receive each sample's tensors of one chunk (for one or several models run side by side,
e.g. the two models of a comparison) through a callback and must drop them afterwards. With
`reuse_buffers` the arrays are bound once (IOBinding) and overwritten by the next sample, which
avoids an allocation per exposed tensor and sample; consumers then copy what they keep.

A target's `graph` may be onnxruntime's own optimised graph (see optgraph.py): exposing tensors
there, with optimisation disabled, reads the tensors the deployed kernels compute without
changing which kernels run.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .binding import BoundRunner
from .graph import ModelGraph
from .inputs import SampleSet
from .memory import available_memory
from .runner import RuntimeConfig, Session, open_session
from .types import TensorMap

BYTES_PER_EXPOSED = 2
"""An exposed tensor exists twice while a run returns: onnxruntime's buffer and the numpy copy."""
DEFAULT_BUDGET_SHARE = 0.25
"""Default capture budget: this share of the memory available when the run starts."""


class Strategy(str, enum.Enum):
    ALL_AT_ONCE = "all-at-once"
    CHUNKED = "chunked"


@dataclass(frozen=True)
class CapturePlan:
    """Which tensors are captured in which run; recorded in results."""

    chunks: Tuple[Tuple[int, ...], ...]
    """Indices into the caller's tensor list, one tuple per run."""
    strategy: Strategy
    estimated_bytes: int
    """Estimated bytes of one sample's captured tensors (all chunks, times BYTES_PER_EXPOSED)."""
    budget_bytes: int
    unknown_sizes: int = 0
    largest_bytes: int = 0
    """The largest single tensor's cost (times BYTES_PER_EXPOSED): the least memory a capture can use."""

    @property
    def runs_per_sample(self) -> int:
        return len(self.chunks)

    def budget_note(self) -> Optional[str]:
        """Says so when the budget is below what one tensor needs (each such tensor then runs alone:
        the least memory that works, not more)."""
        if self.largest_bytes <= self.budget_bytes:
            return None
        return (f"memory budget {_mib(self.budget_bytes)} is below what one tensor needs "
                f"(the largest needs {_mib(self.largest_bytes)} as captured): such tensors are captured one "
                f"per run, the least memory that works")

    def to_dict(self) -> Dict[str, object]:
        return {"strategy": self.strategy.value, "runs_per_sample": self.runs_per_sample,
                "estimated_bytes": self.estimated_bytes, "budget_bytes": self.budget_bytes,
                "chunk_sizes": [len(c) for c in self.chunks], "unknown_sizes": self.unknown_sizes}


def default_budget() -> int:
    return int(available_memory() * DEFAULT_BUDGET_SHARE)


def parse_size(text: "str | int") -> int:
    """'512M', '2G', '1.5GB', '4096' -> bytes."""
    raw = str(text).strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    scale = 1
    if raw and raw[-1] in units:
        scale, raw = units[raw[-1]], raw[:-1]
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        # 'inf', 'nan' and '1e400' parse as floats; int() of them would raise OverflowError (exit 4).
        raise ValueError("not a finite, non-negative size")
    return int(value * scale)


def estimate_sizes(graph: ModelGraph, tensors: Sequence[str],
                   input_shapes: Optional[Mapping[str, Tuple[int, ...]]] = None) -> List[Optional[int]]:
    """Bytes of each tensor for one sample, from shape inference on the concrete input shapes."""
    info = graph.all_tensor_info() if not input_shapes else _concrete_info(graph, input_shapes)
    sizes: List[Optional[int]] = []
    for name in tensors:
        ti = info.get(name)
        sizes.append(ti.byte_size() if ti is not None else None)
    return sizes


def _concrete_info(graph: ModelGraph, input_shapes: Mapping[str, Tuple[int, ...]]) -> Dict[str, object]:
    import onnx

    from .protoutil import infer_tensor_info

    model = onnx.ModelProto()
    model.ParseFromString(_without_weights(graph))
    for vi in model.graph.input:
        if vi.name in input_shapes:
            dims = vi.type.tensor_type.shape.dim
            for dim, size in zip(dims, input_shapes[vi.name]):
                dim.ClearField("dim_param")
                dim.dim_value = int(size)
    return infer_tensor_info(model)  # type: ignore[return-value]


def _without_weights(graph: ModelGraph) -> bytes:
    """The model with initializer data stripped (dims kept): cheap to copy for shape inference."""
    import onnx

    stripped = onnx.ModelProto()
    stripped.CopyFrom(graph.model)
    for tensor in stripped.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL and tensor.dims and int(np.prod(tensor.dims)) > 64:  # keep small ones: shape inputs of Reshape etc.
            for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
                tensor.ClearField(name)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            entry = tensor.external_data.add()
            entry.key, entry.value = "location", "__stripped__"
    return stripped.SerializeToString()


def plan_capture(sizes: Sequence[Optional[int]], budget_bytes: Optional[int] = None) -> CapturePlan:
    """Split tensors (given their sizes, in capture order) into chunks that fit the budget.

    Unknown sizes count as the largest known size. A tensor larger than the budget on its own gets
    a chunk to itself (it cannot be captured in less).
    """
    budget = int(budget_bytes if budget_bytes is not None else default_budget())
    known = [s for s in sizes if s is not None]
    fallback = max(known) if known else 1 << 20
    costs = [(s if s is not None else fallback) * BYTES_PER_EXPOSED for s in sizes]
    total = sum(costs)
    if total <= budget or not costs:
        chunks: List[Tuple[int, ...]] = [tuple(range(len(costs)))]
    else:
        chunks, current, used = [], [], 0
        for index, cost in enumerate(costs):
            if current and used + cost > budget:
                chunks.append(tuple(current))
                current, used = [], 0
            current.append(index)
            used += cost
        if current:
            chunks.append(tuple(current))
    strategy = Strategy.ALL_AT_ONCE if len(chunks) == 1 else Strategy.CHUNKED
    return CapturePlan(tuple(chunks), strategy, total, budget, unknown_sizes=len(sizes) - len(known),
                       largest_bytes=max(costs, default=0))


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size < 10 << 20 else f"{size / 2**20:.0f} MiB"


@dataclass
class CaptureTarget:
    """One model taking part in a capture, with the tensor names of each chunk."""

    graph: ModelGraph
    runtime: RuntimeConfig
    chunks: List[List[str]]
    adapt: Callable[[TensorMap], TensorMap] = field(default=lambda feeds: feeds)
    keep_outputs: bool = False
    label: str = ""
    reuse_buffers: bool = False
    """Bind outputs to arrays reused across samples (handed-out arrays are overwritten next sample)."""
    buffer_sets: int = 1
    """With reuse_buffers: 2 alternates two sets, so one sample's arrays live until the next but one run."""
    options_hook: Optional[Callable[[Any], None]] = None
    """Called with the onnxruntime SessionOptions of each capture session (e.g. memory settings)."""
    on_session: Optional[Callable[[int, Session], None]] = None
    """Called with the chunk index and each capture session once built (e.g. to read its placement)."""


ChunkCallback = Callable[[str, int, List[TensorMap]], None]
"""on_chunk(sample_id, chunk_index, [tensors of each target]) for every sample and chunk."""
BeforeRun = Callable[[int, str], None]
"""before_run(target_index, sample_id): called just before a target runs (to wait for readers of its buffers)."""


def run_capture(targets: Sequence[CaptureTarget], samples: SampleSet, on_chunk: ChunkCallback,
                *, progress: Optional[Callable[[int, Optional[int], str], None]] = None,
                before_run: Optional[BeforeRun] = None) -> int:
    """Run every chunk on every sample for all targets side by side; returns the number of runs.

    Chunk-major: the sessions of one chunk are created, every sample flows through them, and they
    are released before the next chunk, so only one chunk's buffers are ever alive.
    """
    n_chunks = len(targets[0].chunks)
    if any(len(t.chunks) != n_chunks for t in targets):
        raise ValueError("every capture target needs the same number of chunks")
    total = n_chunks * len(samples)
    runs = 0
    from concurrent.futures import ThreadPoolExecutor

    # One pool for every chunk: its threads (and so glibc's arenas) are reused by each chunk's
    # sessions instead of new threads spreading the next sessions over new arenas.
    from . import background

    background.import_native_first()
    pool = ThreadPoolExecutor(max_workers=max(1, len(targets)), thread_name_prefix="mi-session")
    try:
        for index in range(n_chunks):
            runs += _run_chunk(targets, index, samples, on_chunk, pool,
                               lambda done, sample_id, base=index * len(samples):
                               progress(base + done, total, sample_id) if progress is not None else None,
                               before_run)
            # The chunk's sessions are gone (they lived in _run_chunk only) before the next are built.
            _return_freed_memory()
    except BaseException:
        # Ctrl-C or an error: a build still running in the pool is not waited for (seconds of a
        # wasted build, and a second Ctrl-C inside that wait left a worker unseen inside onnxruntime):
        # the CLI's exit point ends the process without finalising while it runs (issue 40).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return runs


def _run_chunk(targets: Sequence[CaptureTarget], index: int, samples: SampleSet, on_chunk: ChunkCallback,
               pool: Any, progress: Callable[[int, str], None], before_run: Optional[BeforeRun]) -> int:
    """Every sample through the sessions of chunk `index`; they are freed when this returns."""
    runners = _runners(targets, index, pool)
    runs = 0
    for position, (sample_id, feeds) in enumerate(samples, start=1):
        outputs = []
        for position_t, (target, runner) in enumerate(zip(targets, runners)):
            if before_run is not None:
                before_run(position_t, sample_id)
            outputs.append(runner.run(target.adapt(feeds), sample=sample_id) if runner is not None else {})
            runs += runner is not None
        on_chunk(sample_id, index, outputs)
        del outputs
        progress(position, sample_id)
    return runs


def _return_freed_memory() -> None:
    """Give the memory of the sessions just freed back to the system (glibc's malloc_trim).

    A session's weights and prepacked kernels are many allocations below glibc's mmap threshold,
    spread over the arenas of the threads that built them; freed, they stay in the process, and the
    next chunk's sessions, built on other threads, do not always reuse them. Measured on two 32 MB
    models in 16 chunks: peak RSS 353 MB without trimming, 180 MB with (one chunk: 176 MB).
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:  # pragma: no cover - no C library to load (not Linux)
        return
    if trim is not None:
        trim(0)


def _runners(targets: Sequence[CaptureTarget], index: int, pool: Any) -> "List[Optional[BoundRunner]]":
    """The runners of one chunk; distinct models' sessions are created in parallel threads
    (onnxruntime releases the GIL while it optimises a graph)."""
    distinct = len({id(t.graph) for t in targets}) == len(targets)
    if len(targets) < 2 or not distinct:
        return [_runner(t, index) for t in targets]
    return list(pool.map(lambda t: _runner(t, index), targets))


def _runner(target: CaptureTarget, index: int) -> "Optional[BoundRunner]":
    """The runner of one target for one chunk (None when the target has nothing to fetch in it)."""
    chunk = target.chunks[index]
    if not chunk and not target.keep_outputs:
        return None
    session: Session = open_session(target.graph, target.runtime, extra_outputs=chunk,
                                    keep_outputs=target.keep_outputs, label=target.label or target.graph.display_name,
                                    options_hook=target.options_hook)
    if target.on_session is not None:
        target.on_session(index, session)
    names = list(dict.fromkeys([*chunk, *(session.output_names if target.keep_outputs else [])]))
    return BoundRunner(session, names, reuse=target.reuse_buffers, sets=target.buffer_sets)
