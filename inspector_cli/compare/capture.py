"""How each model's paired tensors are captured: from onnxruntime's optimised graph, or exposed.

Per model (side), before the samples run:
1. a plain session at the requested optimisation level runs the first sample (the observer
   reference) and, when it can help, saves its optimised graph;
2. `deployed` capture: the views are located in that optimised graph (optgraph.py) and read there
   with optimisation disabled, so the kernels that run are the deployed ones;
3. `instrumented` capture: the views are exposed as outputs of the model itself.
`auto` uses deployed capture for quantised and fp16 models when at least AUTO_SHARE of the
tensors can be read there, located or recomputed beside the deployed kernels (fused_side.py),
otherwise instrumented.
"""
from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx

from ..core.graph import ModelGraph
from ..core.lazyload import load_model_lazy
from ..core.quantparams import QuantSpec, dequantize
from ..core.placement import Subgraph
from ..core.runner import OptLevel, RuntimeConfig, Session, cpu_only, open_session
from ..core.types import TensorMap
from ..diff.engine import TensorTracker
from ..diff.fast_stats import Affine
from ..diff.gates import Gate
from .config import CaptureMode
from .fused_side import recover as recover_fused
from .layout import same_layout
from .pairing.match import TensorMatching, TensorPair
from .pairing.optgraph import OptimizedGraph
from .pairing.semantic import SemanticGraph, TensorView

AUTO_SHARE = 0.75
"""auto capture reads from the optimised graph when at least this share of the tensors is read there
(located, or recomputed beside the deployed kernels)."""
_QUANT_OPS = ("QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "QGemm", "MatMulInteger",
              "ConvInteger")


@dataclass(frozen=True)
class Reader:
    """Turns a fetched array into the compared value (layout restored, dequantisation parameters)."""

    expose: str
    quant: Optional[QuantSpec] = None
    perm: Optional[Tuple[int, ...]] = None

    def flat(self, raw: np.ndarray, resolver: "Union[SemanticGraph, OptimizedGraph]",
             out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, Optional[Affine]]:
        """The value in the reference layout as a flat array, plus per-tensor (scale, zero) if quantised.
        A relaid (channels-last) array is transposed into `out` when given (reused across samples)."""
        array = raw.transpose(np.argsort(self.perm)) if self.perm is not None else raw
        if self.perm is not None and out is not None and out.size == raw.size and out.dtype == raw.dtype:
            np.copyto(out.reshape(array.shape), array)
            array = out.reshape(array.shape)
        flat = np.ascontiguousarray(array).reshape(-1)
        if self.quant is None:
            return flat, None
        scale = resolver.array(self.quant.scale)
        zero = resolver.array(self.quant.zero_point) if self.quant.zero_point else None
        if scale is not None and np.size(scale) == 1 and (zero is None or np.size(zero) == 1):
            return flat, (float(np.asarray(scale).reshape(())), float(np.asarray(zero).reshape(())) if zero is not None else 0.0)
        return dequantize(np.ascontiguousarray(array), scale, zero, self.quant.axis).reshape(-1), None

    def value(self, raw: np.ndarray, resolver: "Union[SemanticGraph, OptimizedGraph]") -> np.ndarray:
        flat, affine = self.flat(raw, resolver)
        if affine is None:
            return flat.astype(np.float32, copy=False)
        return (flat.astype(np.float32) - np.float32(affine[1])) * np.float32(affine[0])


def _fits(shape: Tuple[int, ...], expected: Optional[Tuple[object, ...]]) -> bool:
    """Whether a run-time shape agrees with a (partly symbolic) declared one."""
    return expected is not None and len(shape) == len(expected) and \
        all(not isinstance(d, int) or d < 0 or d == s for d, s in zip(expected, shape))


def settle_layout(reader: Reader, raw: np.ndarray, expected: Optional[Tuple[object, ...]],
                  reference: Optional[Sequence[int]] = None) -> Reader:
    """The reader with its layout permutation checked against the original tensor's declared shape
    and, when given, the run-time shape of the tensor it is compared with (`reference`).

    The optimised graph's layout tracking (optgraph.py) takes a Transpose onnxruntime inserted for a
    relayout; but onnxruntime's transpose optimiser also *moves* the model's own Transposes (Swin: the
    patch embedding's Transpose pushed past the LayerNorm's Sub, re-inserted after it as
    `Transpose_token_N`), and the tensor after it is then already in the original layout. Undoing a
    permutation there compared [1, 32, 3136] element-wise with [1, 3136, 32] (cosine 0.02 where the
    truth is 0.9999996). The shapes tell: keep the permutation only if the permuted shape fits. A
    dynamic export declares every dim of that tensor symbolic, so the declared shape cannot tell; the
    reference's shape then does (the permutation is dropped when only the array as read matches it)."""
    if reader.perm is None:
        return reader

    def fits(shape: Tuple[int, ...], declared: bool = True) -> bool:
        return (not declared or expected is None or _fits(shape, expected)) and \
            (reference is None or same_layout(shape, reference))

    if len(reader.perm) != raw.ndim:
        # optgraph.py takes a channels-last kernel's output as NHWC, (0, 2, 3, 1); a 1-D Conv (OCR heads,
        # Conv1d over a sequence) gives a rank-3 array: `transpose` failed ("axes don't match array").
        # Channels-last at the array's own rank if the shapes allow it, else the array as is.
        perm = (0, *range(2, raw.ndim), 1) if raw.ndim >= 3 else None
        if perm is not None and fits(tuple(raw.shape[i] for i in np.argsort(perm))):
            return Reader(reader.expose, reader.quant, perm)
        return Reader(reader.expose, reader.quant, None)
    permuted = tuple(raw.shape[i] for i in np.argsort(reader.perm))
    if fits(permuted):
        return reader
    if fits(tuple(raw.shape)) or (not _fits(permuted, expected) and _fits(tuple(raw.shape), expected)):
        return Reader(reader.expose, reader.quant, None)
    return reader


@dataclass
class Side:
    """One model's capture set-up."""

    label: str
    graph: ModelGraph
    sem: SemanticGraph
    runtime: RuntimeConfig
    mode: str = "instrumented"
    target_graph: Optional[ModelGraph] = None
    opt: Optional[OptimizedGraph] = None
    readers: Dict[str, Reader] = field(default_factory=dict)
    unavailable: Dict[str, str] = field(default_factory=dict)
    plain: Optional[TensorMap] = None
    notes: List[str] = field(default_factory=list)
    recomputed: Dict[str, str] = field(default_factory=dict)
    """Tensors fused away in the deployed graph and read from their recomputed chain (fused_side.py) -> how."""
    plain_assignment: Optional[List[Subgraph]] = None
    """The provider partition of the model as deployed (no tensor exposed), when a plain session was built."""

    @property
    def resolver(self) -> "Union[SemanticGraph, OptimizedGraph]":
        return self.opt if self.opt is not None else self.sem

    @property
    def target_runtime(self) -> RuntimeConfig:
        return self.runtime_for_capture(spin=False)

    def runtime_for_capture(self, *, spin: bool) -> RuntimeConfig:
        """Runtime of a capture session: optimisation off for the already-optimised graph; without
        `spin`, idle onnxruntime threads sleep instead of spinning, leaving the core to the metrics
        thread that runs meanwhile."""
        runtime = self.runtime.replace(opt_level=OptLevel.DISABLE) if self.opt is not None else self.runtime
        return runtime if spin else runtime.without_spinning()


def worth_deployed_capture(sem: SemanticGraph) -> bool:
    """Quantised or fp16 models: exposing their tensors changes (and slows) what runs."""
    graph = sem.graph
    if any(n.op_type in _QUANT_OPS or n.op_type.startswith("QLinear") for n in graph.nodes):
        return True
    return any(graph.tensor_info(o).elem_type == 10 for n in graph.nodes[:200] for o in n.outputs if o)


def prepare_side(label: str, graph: ModelGraph, sem: SemanticGraph, runtime: RuntimeConfig, views: Sequence[TensorView],
                 mode: CaptureMode, first: Optional[TensorMap], *, observer: bool, workdir: Path) -> Side:
    """Decide how `views` of one model are captured and run the plain reference sample."""
    side = Side(label, graph, sem, runtime)
    want_opt = mode != CaptureMode.INSTRUMENTED and OptLevel(runtime.opt_level) != OptLevel.DISABLE and \
        (mode == CaptureMode.DEPLOYED or worth_deployed_capture(sem)) and _small_enough(graph)
    optimised = workdir / f"{label.lower()}_optimised.onnx"

    def hook(options: object) -> None:
        if want_opt:
            options.optimized_model_filepath = str(optimised)  # type: ignore[attr-defined]

    # The plain partition is needed beside the instrumented one only where a provider other than CPU
    # may take nodes (exposing a tensor cannot move a node between providers when CPU is the only one).
    wants_partition = not cpu_only(runtime)
    if want_opt or (observer and first is not None) or wants_partition:
        session = _plain_session(graph, runtime, label, hook, want_opt)
        side.plain_assignment = session.assignment()
        if observer and first is not None:
            side.plain = {k: v.copy() for k, v in session.run(first).items()}
        del session
        release_freed_memory()
    if want_opt and optimised.is_file():
        _use_optimised(side, optimised, views, mode, first)
    if side.opt is None:
        side.mode, side.target_graph = "instrumented", graph
        side.readers = {v.expose: Reader(v.expose, v.quant) for v in views}
    return side


def _recompute(side: Side, views: Sequence[TensorView], first: Optional[TensorMap]) -> None:
    """Read the tensors deployed capture could not locate from their recomputed chains (fused_side.py)."""
    assert side.opt is not None  # deployed capture
    found, failure = recover_fused(side.graph, side.opt, [v for v in views if v.expose in side.unavailable],
                                   side.target_runtime, side.label, first)
    if failure:
        side.notes.append(failure)
    if found is None:
        return
    side.opt, side.target_graph = found.opt, found.graph
    for name, (expose, quant) in found.reads.items():
        side.readers[name], side.recomputed[name] = Reader(expose, quant), found.how[name]
        del side.unavailable[name]


def release_freed_memory() -> None:
    """Hand memory freed by a closed session back to the OS (glibc keeps it otherwise), so the
    capture sessions start from the same footprint as a plain run would."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _plain_session(graph: ModelGraph, runtime: RuntimeConfig, label: str, hook: object, save: bool) -> Session:
    """The model as deployed. To save the optimised graph, from its file: onnxruntime then writes
    the weights inside (our in-memory copy refers to the weights in the original file, which
    onnxruntime maps instead of copying: less memory when nothing is saved)."""
    if save and graph.path is not None and not _external_weights(graph):
        return Session(str(graph.path), runtime, label=f"{label} {graph.display_name}", options_hook=hook)
    return open_session(graph, runtime, label=f"{label} {graph.display_name}", options_hook=hook)


def _external_weights(graph: ModelGraph) -> bool:
    """Whether the model file keeps weights in other files (not only lazy references into itself)."""
    own = graph.path.name if graph.path is not None else None
    for tensor in graph.model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = next((e.value for e in tensor.external_data if e.key == "location"), "")
            if location != own:
                return True
    return False


def _small_enough(graph: ModelGraph) -> bool:
    """Deployed capture saves the optimised model: only for files onnxruntime can save in one piece."""
    return graph.path is None or (graph.path.stat().st_size < (1 << 30) and not _external_weights(graph))


def reload_problem(model: onnx.ModelProto) -> Optional[str]:
    """Why onnxruntime's saved optimised graph would not load again, or None: a node of the ONNX domain
    with an attribute its opset's schema lacks (issue 29: DequantizeLinear `axis`, written into an opset-11
    graph, which onnxruntime then refuses). Ops without an ONNX schema at that opset (onnxruntime's own
    LayerNormalization, SimplifiedLayerNormalization in the ONNX domain) are onnxruntime's to judge."""
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if version is None:
        return None
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or not node.attribute:
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, version, "")
        except onnx.defs.SchemaError:
            continue
        unknown = [a.name for a in node.attribute if a.name not in schema.attributes]
        if unknown:
            return f"{node.op_type} '{node.name}': Unrecognized attribute: {unknown[0]} for operator {node.op_type}"
    return None


def _use_optimised(side: Side, path: Path, views: Sequence[TensorView], mode: CaptureMode,
                   first: Optional[TensorMap]) -> None:
    """Deployed capture of `views` from the optimised graph saved at `path`: each located there, or
    recomputed beside the deployed kernels when fused away. In auto mode, if fewer than AUTO_SHARE of
    them can be read that way, the side is left to instrumented capture (side.opt stays None)."""
    opt_graph = load_model_lazy(path)
    problem = reload_problem(opt_graph.model)
    if problem is not None:  # our round trip's defect, not the model's: read it as exported instead
        side.notes.append(f"model {side.label}: onnxruntime's optimised graph does not reload ({problem}); "
                          f"its layers are captured instrumented")
        return
    opt_graph.set_tensor_info({})  # the optimised graph's contrib ops defeat ONNX shape inference: skip it
    opt = OptimizedGraph(opt_graph, {n.name for n in side.graph.nodes} | {n.original_name for n in side.graph.nodes},
                         set(side.graph.producer) | set(side.graph.input_names))
    located = {v.expose: opt.locate(side.sem, v) for v in views}
    side.mode, side.opt, side.target_graph = "deployed", opt, opt_graph
    for view in views:
        where = located[view.expose]
        if where is None:
            side.unavailable[view.expose] = (
                f"not materialised in model {side.label} as onnxruntime runs it (fused into a kernel at "
                f"opt level {OptLevel(side.runtime.opt_level).value}); --capture instrumented exposes it")
        else:
            side.readers[view.expose] = Reader(where.expose, where.quant, where.perm)
    if side.unavailable:  # fused away as deployed: recomputed beside the deployed kernels
        _recompute(side, views, first)
    # Counted after recomputation: an fp16 EfficientNet has 74 of 101 tensors located (its SiLU's
    # Sigmoid and Mul fused) and all 101 once recomputed; exposing them instead would disable the fusions.
    read = len(side.readers)
    if mode == CaptureMode.AUTO and views and read / len(views) < AUTO_SHARE:
        side.notes[:] = [f"model {side.label}: only {read} of {len(views)} tensors can be read in onnxruntime's "
                         f"optimised graph; captured by exposing them in the model instead"]
        side.mode, side.opt, side.target_graph = "instrumented", None, None
        side.readers, side.unavailable, side.recomputed = {}, {}, {}


def workdir() -> "tempfile.TemporaryDirectory[str]":
    return tempfile.TemporaryDirectory(prefix="mi-layers-")


@dataclass(frozen=True)
class LayerPlan:
    """What the layer pass compares, decided before the first sample: the pairs and how each model's
    tensors are read."""

    sem_a: SemanticGraph
    sem_b: SemanticGraph
    matching: TensorMatching
    pairs: Tuple[TensorPair, ...]
    side_a: Side
    side_b: Side
    gates: Tuple[Gate, ...]
    default_gates: bool
    skipped: Counter = field(default_factory=Counter)
    unavailable: Tuple[Tuple[TensorPair, str], ...] = ()


@dataclass(frozen=True)
class CaptureMeasurements:
    """What the capture pass measured over every sample (one tracker per pair, in `pairs` order)."""

    trackers: List[TensorTracker]
    output_trackers: List[TensorTracker]
    captured_first: Dict[str, Dict[str, np.ndarray]]
    first_sample: str
    strategy: str
    chunks: int
    runs: int
    estimated_bytes: int
    budget_bytes: int
    incomparable: Dict[int, str] = field(default_factory=dict)
    """Pairs (index into `pairs`) whose captured shapes are not the same layout: not compared, and why."""
    instrumented: Dict[str, List[Optional[List[Subgraph]]]] = field(default_factory=dict)
    """'A' / 'B' -> the provider partition of each chunk's capture session, for a side read by exposing tensors."""
