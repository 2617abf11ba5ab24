"""Isolated error: the candidate's own computation of a layer, fed with the reference's inputs.

For a paired layer, the candidate model's *producing subgraph* is the set of its nodes between
the tensors that are paired (the cut) and the layer's tensor. Running that subgraph on the
reference's values of the cut tensors gives the layer's output as the candidate would compute
it from perfect inputs; compared with the reference, that is the error the layer itself adds.
The accumulated error (the ordinary layer comparison) minus it is what the layer inherited.

All isolated layers go into one model (each subgraph's internal tensors prefixed, the cut
tensors and weights shared), so one session and one run per sample isolate every layer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import onnx
from onnx import helper

from ..core.expose import nodes_between
from ..core.quantparams import QuantSpec
from .pairing.match import TensorPair
from .pairing.semantic import FLOAT_TYPES, SemanticGraph

NOT_A_TENSOR = -1
"""The run-time type (isoshapes.runtime_types) of a value that is a sequence or a map: never fed."""


@dataclass(frozen=True)
class IsolationFeed:
    """One input of the isolation model: which reference tensor supplies it, and in what form."""

    name: str
    source: str
    """The reference (A) tensor whose captured value is fed (a paired layer or a model input)."""
    elem_type: int
    shape: Optional[Tuple[Optional[int], ...]]
    """Declared shape; None for a dimension (or the whole shape) that is symbolic in the candidate.
    Exports with dynamic batch/sequence axes have such dims everywhere: they are bound at run time
    from the captured reference value (`feed_value`), since the samples fix them."""
    quant: Optional[QuantSpec] = None
    """Set when the candidate consumes integers here (QOperator models): the value is quantised."""


@dataclass
class IsolationPlan:
    model: onnx.ModelProto
    feeds: List[IsolationFeed]
    outputs: Dict[str, str]
    """Reference layer -> isolation-model output holding the candidate's isolated value of it."""
    skipped: Dict[str, str] = field(default_factory=dict)
    untyped: List[str] = field(default_factory=list)
    """Cut tensors that shape inference could not type (ai.onnx.ml ops, some re-exports): a run of the
    candidate types them (`runtime_types`), and the plan is built again with those types."""

    @property
    def sources(self) -> List[str]:
        return list(dict.fromkeys(f.source for f in self.feeds))


def build_isolation(b: SemanticGraph, pairs: Sequence[TensorPair], targets: Sequence[TensorPair],
                    input_sources: Dict[str, str], runtime_types: Optional[Dict[str, int]] = None) -> IsolationPlan:
    """The isolation model of `targets` in candidate graph `b`.

    `pairs` are every compared pair (their candidate tensors form the cut); `input_sources` maps the
    candidate's graph inputs to the reference's; `runtime_types` are the element types of cut tensors
    as a run of the candidate produced them (for those shape inference leaves untyped).
    """
    runtime_types = runtime_types or {}
    untyped: List[str] = []
    from_inputs = set(input_sources.values())
    graph = b.graph
    owner: Dict[str, str] = {}
    for pair in pairs:
        for name in b.names_of(pair.b):
            owner.setdefault(name, pair.a)
    for b_input, a_input in input_sources.items():
        for name in b.names_of(b.canonical(b_input)):
            owner.setdefault(name, a_input)
    protos = {n.name: n for n in graph.model.graph.node}
    nodes: List[onnx.NodeProto] = []
    feeds: Dict[str, IsolationFeed] = {}
    outputs: Dict[str, str] = {}
    skipped: Dict[str, str] = {}
    used_inits: Set[str] = set()
    for index, target in enumerate(targets):
        if target.op_a == "input":
            skipped[target.a] = "a model input: its own error is the candidate's input quantisation (Q/DQ noise)"
            continue
        own = set(b.names_of(target.b))
        cut = {name for name in owner if name not in own}
        names = nodes_between(graph, cut, [target.view_b.expose])
        if not names:
            skipped[target.a] = "nothing of the candidate lies between it and the paired tensors"
            continue
        produced = {o for n in names for o in graph.node_by_name[n].outputs if o}
        needed = [t for n in names for t in graph.node_by_name[n].all_inputs if t and t not in produced]
        missing = [t for t in needed if t not in cut and t not in graph.initializer_names]
        if missing:
            skipped[target.a] = f"its subgraph reads '{missing[0]}', which has no counterpart"
            continue
        sequences = [t for t in needed if runtime_types.get(t) == NOT_A_TENSOR]
        if sequences:
            skipped[target.a] = f"its subgraph reads '{sequences[0]}', a sequence or map: isolation feeds tensors only"
            continue
        new_feeds, unfed = {}, []
        for tensor in dict.fromkeys(needed):
            if tensor in graph.initializer_names or tensor in feeds:
                continue
            feed = _feed(b, tensor, owner[tensor], runtime_types.get(tensor, 0), owner[tensor] in from_inputs)
            if feed is None:
                unfed.append(tensor)
            else:
                new_feeds[tensor] = feed
        if not unfed:
            feeds.update(new_feeds)
            prefix = f"iso{index}/"
            for name in names:
                nodes.append(_renamed(protos[name], prefix, produced))
            used_inits.update(t for t in needed if t in graph.initializer_names)
            outputs[target.a] = prefix + target.view_b.expose
            continue
        unknown = [t for t in unfed if not _elem_type(b, t, runtime_types.get(t, 0))]
        untyped.extend(t for t in unknown if t not in untyped)
        skipped[target.a] = (f"the type of '{unknown[0]}', an input of its subgraph, is unknown" if unknown else
                             f"its subgraph reads integers '{unfed[0]}' of the candidate's own making, with no "
                             "scale to quantise the reference's values into")
    initializers = [t for t in graph.model.graph.initializer if t.name in used_inits]
    inputs = [helper.make_tensor_value_info(f.name, f.elem_type, None if f.shape is None else list(f.shape))
              for f in feeds.values()]
    sub = helper.make_graph(nodes, "mi_isolation", inputs, [onnx.ValueInfoProto(name=o) for o in outputs.values()],
                            initializers)
    model = helper.make_model(sub, opset_imports=list(graph.model.opset_import), ir_version=graph.model.ir_version)
    model.functions.extend(graph.model.functions)
    return IsolationPlan(model, list(feeds.values()), outputs, skipped, untyped)


def _elem_type(b: SemanticGraph, tensor: str, observed: int) -> int:
    """The tensor's element type: inferred, a QOperator output's zero point's, or seen at run time (0: unknown)."""
    return b.graph.tensor_info(tensor).elem_type or _quantised_type(b, tensor) or observed


def _feed(b: SemanticGraph, tensor: str, source: str, observed: int = 0,
          from_input: bool = False) -> Optional[IsolationFeed]:
    """How the isolation model reads cut tensor `tensor` (None: it cannot be fed). `from_input`: its
    values are a model input's (the input itself, or an Unsqueeze/Reshape/Cast of it: ids, masks)."""
    info = b.graph.tensor_info(tensor)
    elem_type = _elem_type(b, tensor, observed)
    if not elem_type:
        return None
    quant = b.quant_of.get(tensor) if elem_type not in FLOAT_TYPES else None
    if elem_type not in FLOAT_TYPES and quant is None and not from_input and tensor not in b.graph.input_names:
        return None  # integers of the candidate's own making, with no scale to read them as floats
    shape = None if info.shape is None else \
        tuple(int(d) if isinstance(d, int) and d >= 0 else None for d in info.shape)
    return IsolationFeed(tensor, source, elem_type, shape, quant)


def _quantised_type(b: SemanticGraph, tensor: str) -> int:
    """Element type of a QOperator output that shape inference left unknown (com.microsoft ops such as
    QLinearAdd defeat it): its zero point's type (uint8 when the zero point is omitted)."""
    spec = b.quant_of.get(tensor)
    if spec is None:
        return 0
    zero = b.array(spec.zero_point) if spec.zero_point else None
    if zero is None:
        return onnx.TensorProto.UINT8 if not spec.zero_point else 0
    return int(helper.np_dtype_to_tensor_dtype(np.asarray(zero).dtype))


def _renamed(node: onnx.NodeProto, prefix: str, produced: Set[str]) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = prefix + node.name
    for i, name in enumerate(copy.input):
        if name in produced:
            copy.input[i] = prefix + name
    for i, name in enumerate(copy.output):
        if name:
            copy.output[i] = prefix + name
    return copy


def feed_shape(feed: IsolationFeed, size: int, observed: Optional[Tuple[int, ...]],
               exact: bool = False) -> Tuple[int, ...]:
    """The concrete shape of a feed for one sample: the declared static shape, or the reference
    tensor's run-time shape where the candidate's is symbolic (checked against the static dims).
    `exact`: `observed` is the candidate's own run-time shape of the tensor (isoshapes.ShapeProbe).
    A feed of unknown rank is bound only by an exact shape (the paired tensor may be a flattened view)."""
    if feed.shape is not None and all(d is not None for d in feed.shape):
        return tuple(int(d) for d in feed.shape)  # type: ignore[arg-type]
    if observed is not None and int(np.prod(observed, dtype=np.int64)) == size and (
            (feed.shape is None and exact) or (feed.shape is not None and len(observed) == len(feed.shape)
                                   and all(d is None or d == o for d, o in zip(feed.shape, observed)))):
        return tuple(observed)
    if feed.shape is not None and sum(d is None for d in feed.shape) == 1:
        known = int(np.prod([d for d in feed.shape if d is not None], dtype=np.int64))
        if known > 0 and size % known == 0:  # one free dim: the size fixes it
            return tuple(size // known if d is None else int(d) for d in feed.shape)
    raise ValueError(f"cannot bind the symbolic shape of isolation input '{feed.name}' "
                     f"({feed.shape}) to {size} values of shape {observed}")


def feed_value(value: np.ndarray, feed: IsolationFeed, sem: SemanticGraph,
               observed: Optional[Tuple[int, ...]] = None, exact: bool = False) -> np.ndarray:
    """The reference's value (float) in the form the candidate consumes at this cut tensor; `observed`
    is the reference tensor's shape in this sample (binds the candidate's symbolic dims)."""
    from ..core.types import numpy_dtype_for

    dtype = numpy_dtype_for(feed.elem_type)
    flat = np.asarray(value)
    if feed.quant is not None or not np.issubdtype(flat.dtype, np.integer):
        flat = flat.astype(np.float32, copy=False)  # integer inputs (ids, masks) stay exact
    shaped = flat.reshape(feed_shape(feed, flat.size, observed, exact))
    if feed.quant is None:
        return shaped.astype(dtype, copy=False)
    scale = np.asarray(sem.array(feed.quant.scale), dtype=np.float32)
    zero = sem.array(feed.quant.zero_point) if feed.quant.zero_point else np.zeros((), dtype)
    info = np.iinfo(dtype)  # type: ignore[arg-type]
    quantised = np.rint(shaped / scale) + np.asarray(zero, dtype=np.float32)
    return np.clip(quantised, info.min, info.max).astype(dtype)


def qdq_noise_affine(sem: SemanticGraph, spec: QuantSpec) -> Optional[Tuple[float, float, int, int]]:
    """(scale, zero point, qmin, qmax) of a per-tensor quantisation, for the pure Q/DQ noise."""
    scale, zero = sem.array(spec.scale), sem.array(spec.zero_point) if spec.zero_point else None
    if scale is None or np.size(scale) != 1:
        return None
    dtype = zero.dtype if zero is not None else np.dtype(np.uint8)
    info = np.iinfo(dtype)
    return float(np.asarray(scale).reshape(())), float(np.asarray(zero if zero is not None else 0).reshape(())), \
        int(info.min), int(info.max)


def fake_quantize(values: np.ndarray, affine: Tuple[float, float, int, int], out: np.ndarray) -> np.ndarray:
    """DQ(Q(values)) with the given per-tensor parameters, in float32 (written to `out`)."""
    scale, zero, lo, hi = affine
    np.divide(values, np.float32(scale), out=out)
    np.rint(out, out=out)
    np.add(out, np.float32(zero), out=out)
    np.clip(out, lo, hi, out=out)
    np.subtract(out, np.float32(zero), out=out)
    np.multiply(out, np.float32(scale), out=out)
    return out
