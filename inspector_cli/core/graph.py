"""The graph core: load a model safely and answer structural questions about it.

`ModelGraph` holds the ModelProto *without* external weights loaded (they stay references to files
inside the model's folder), so models over 2 GB load in milliseconds and can be re-serialised
cheaply for onnxruntime, which reads the weights itself from the folder.
"""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import onnx
from google.protobuf.message import DecodeError

from ..errors import ModelLoadError, UsageError
from .external_data import check_external_data, external_data_problems  # noqa: F401 (re-exported)
from .filehash import prefetch as prefetch_sha256
from .light import light_copy
from .protoutil import implicit_inputs, infer_tensor_info, iter_all_tensors, iter_subgraphs, value_info_to_tensor
from .types import TensorInfo

_EXTERNAL = onnx.TensorProto.EXTERNAL


@dataclass(frozen=True)
class NodeInfo:
    """One top-level node, with its position in topological order."""

    name: str
    op_type: str
    domain: str
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    implicit_inputs: Tuple[str, ...]
    """Outer-scope tensors read inside If/Loop/Scan bodies: real dependencies, invisible in `inputs`."""
    order: int
    original_name: str

    @property
    def all_inputs(self) -> Tuple[str, ...]:
        return tuple(t for t in self.inputs if t) + self.implicit_inputs

    @property
    def has_subgraph(self) -> bool:
        return self.op_type in ("If", "Loop", "Scan") or bool(self.implicit_inputs)


@dataclass
class ModelGraph:
    """A loaded model and its structure. Build it with `load_model` or `ModelGraph.from_proto`."""

    model: onnx.ModelProto
    path: Optional[Path] = None
    nodes: List[NodeInfo] = field(default_factory=list)
    cycle_nodes: List[str] = field(default_factory=list)
    renamed_nodes: Dict[str, str] = field(default_factory=dict)
    _tensor_info: Optional[Dict[str, TensorInfo]] = field(default=None, repr=False)
    _protos: Optional[Dict[str, onnx.NodeProto]] = field(default=None, repr=False)

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_proto(cls, model: onnx.ModelProto, path: Optional[Path] = None) -> "ModelGraph":
        graph = cls(model=model, path=path)
        graph.renamed_nodes = _assign_node_names(model.graph)
        graph.nodes, graph.cycle_nodes = _topological_nodes(model.graph, graph.renamed_nodes)
        graph._index()
        return graph

    def _index(self) -> None:
        self.node_by_name: Dict[str, NodeInfo] = {n.name: n for n in self.nodes}
        self.producer: Dict[str, NodeInfo] = {}
        self.consumers: Dict[str, List[NodeInfo]] = {}
        for node in self.nodes:
            for out in node.outputs:
                if out:
                    self.producer[out] = node
            for inp in node.all_inputs:
                self.consumers.setdefault(inp, []).append(node)
        self.initializer_names = {t.name for t in self.model.graph.initializer}
        self.input_names = [i.name for i in self.model.graph.input if i.name not in self.initializer_names]
        self.output_names = [o.name for o in self.model.graph.output]

    # ---- basic facts --------------------------------------------------------------------------
    @property
    def display_name(self) -> str:
        return str(self.path) if self.path else (self.model.graph.name or "<model>")

    @property
    def folder(self) -> Optional[Path]:
        return self.path.parent if self.path else None

    @property
    def opset(self) -> int:
        for imp in self.model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                return imp.version
        return 0

    @property
    def uses_external_data(self) -> bool:
        return any(t.data_location == _EXTERNAL for _, t in iter_all_tensors(self.model.graph))

    @property
    def inputs(self) -> List[TensorInfo]:
        return [value_info_to_tensor(v) for v in self.model.graph.input if v.name not in self.initializer_names]

    @property
    def outputs(self) -> List[TensorInfo]:
        return [value_info_to_tensor(v) for v in self.model.graph.output]

    def node_outputs(self) -> Iterator[Tuple[NodeInfo, str]]:
        """Every (node, output tensor) of the top-level graph, in topological order."""
        for node in self.nodes:
            for out in node.outputs:
                if out:
                    yield node, out

    def topo_position(self, tensor: str) -> int:
        """Position of a tensor's producer in topological order (-1 for graph inputs/initializers)."""
        node = self.producer.get(tensor)
        return node.order if node else -1

    # ---- tensor types and shapes ----------------------------------------------------------------
    def tensor_info(self, name: str) -> TensorInfo:
        """Type and shape of any tensor, from the model's declarations and ONNX shape inference."""
        if self._tensor_info is None:
            self._tensor_info = infer_tensor_info(light_copy(self.model))
        info = self._tensor_info.get(name)  # no default built per call: pairing asks ~10 times per node
        return info if info is not None else TensorInfo(name)

    def all_tensor_info(self) -> Dict[str, TensorInfo]:
        self.tensor_info("")
        assert self._tensor_info is not None
        return self._tensor_info

    def set_tensor_info(self, info: Dict[str, TensorInfo]) -> None:
        """Install tensor types computed elsewhere instead of running shape inference ({} types nothing:
        for graphs whose contrib ops defeat ONNX shape inference)."""
        self._tensor_info = info

    def node_proto(self, name: str) -> onnx.NodeProto:
        """The NodeProto of a top-level node, by (assigned) name."""
        if self._protos is None:
            self._protos = {n.name: n for n in self.model.graph.node}
        return self._protos[name]

    def node_attribute(self, node: str, attribute: str, default: object = None) -> object:
        """Value of a node's attribute (ints, floats, lists, tensors...), or `default`."""
        for attr in self.node_proto(node).attribute:
            if attr.name == attribute:
                return onnx.helper.get_attribute_value(attr)
        return default

    def initializer(self, name: str) -> Optional[onnx.TensorProto]:
        for tensor in self.model.graph.initializer:
            if tensor.name == name:
                return tensor
        return None


# ---- loading ------------------------------------------------------------------------------------
def load_model(path: "str | os.PathLike[str]") -> ModelGraph:
    """Load an ONNX model by path, checking that external data stays inside the model's folder.

    Weights stored as external data are not read into memory: they stay references that
    onnxruntime resolves against the model's folder. Raises `UsageError` for a path that does not
    exist or is a directory, `ModelLoadError` for a file that is not a usable ONNX model.
    """
    model_path = Path(path)
    if not model_path.exists():
        raise UsageError(f"{model_path}: no such file", hint="check the model path")
    if model_path.is_dir():
        raise UsageError(f"{model_path}: is a directory, not an .onnx file", hint="pass the model file itself")
    prefetch_sha256(model_path)  # for the result's ModelRef, on the idle core meanwhile
    model = parse_model_file(model_path)
    check_external_data(model, model_path)
    return ModelGraph.from_proto(model, model_path)


def parse_model_file(model_path: Path) -> onnx.ModelProto:
    """Parse a file as a ModelProto, turning every way it can be broken into one ModelLoadError."""
    size = model_path.stat().st_size
    if size == 0:
        raise ModelLoadError(f"{model_path}: the file is empty", hint="re-export or re-copy the model")
    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelLoadError(
            f"{model_path}: not a valid ONNX protobuf ({reason})",
            hint="the file is truncated or is not an ONNX model",
        ) from exc
    bad_text = _non_utf8_name(model)
    if bad_text is not None:
        raise ModelLoadError(f"{model_path}: not a valid ONNX protobuf ({bad_text} is not UTF-8 text)",
                             hint="the file is corrupt")
    if model.ir_version <= 0 or not model.HasField("graph") or not model.opset_import:
        raise ModelLoadError(
            f"{model_path}: parsed, but holds no ONNX model (ir_version={model.ir_version}, "
            f"{len(model.graph.node)} nodes, {len(model.opset_import)} opset imports)",
            hint="the file is not an ONNX model or is truncated",
        )
    return model


def _non_utf8_name(model: onnx.ModelProto) -> Optional[str]:
    """Where a string field holds bytes that are not UTF-8 (protobuf then hands back `bytes`, and
    every later use of the name would fail), or None."""
    for graph in [model.graph, *iter_subgraphs(model.graph)]:
        for kind, items in (("input", graph.input), ("output", graph.output), ("value_info", graph.value_info),
                            ("initializer", graph.initializer)):
            for item in items:
                if isinstance(item.name, bytes):
                    return f"the name of graph {kind} {item.name!r}"
        for index, node in enumerate(graph.node):
            for field_name in ("name", "op_type", "domain"):
                if isinstance(getattr(node, field_name), bytes):
                    return f"node {index}'s {field_name}"
            for name in [*node.input, *node.output]:
                if isinstance(name, bytes):
                    return f"tensor name {name!r} of node {index}"
    for opset in model.opset_import:
        if isinstance(opset.domain, bytes):
            return "an opset domain"
    return None


def load_external_tensor(graph: ModelGraph, tensor: onnx.TensorProto) -> onnx.TensorProto:
    """A copy of `tensor` with its external data read in (the location was checked at load)."""
    if tensor.data_location != _EXTERNAL:
        return tensor
    if graph.folder is None:
        raise ModelLoadError(f"tensor '{tensor.name}' uses external data but the model has no folder")
    loaded = onnx.TensorProto()
    loaded.CopyFrom(tensor)
    onnx.external_data_helper.load_external_data_for_tensor(loaded, str(graph.folder.resolve()))
    return loaded


def _assign_node_names(graph: onnx.GraphProto, prefix: str = "") -> Dict[str, str]:
    """Give unnamed or duplicate-named nodes deterministic unique names: `<OpType>_<index>`.

    Returns new name -> original name ('' when it had none). Names are written into the proto so
    onnxruntime's profiler and our reports use the same names.
    """
    renamed: Dict[str, str] = {}
    taken = {n.name for n in graph.node if n.name}
    seen: set[str] = set()
    for index, node in enumerate(graph.node):
        original = node.name
        if not original or original in seen:
            base = f"{prefix}{original or node.op_type}_{index}"
            name, k = base, 1
            while name in taken or name in seen:
                name, k = f"{base}_{k}", k + 1
            node.name = name
            renamed[name] = original
        seen.add(node.name)
        for attr in node.attribute:
            subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subs:
                renamed.update(_assign_node_names(sub, prefix=f"{node.name}/"))
    return renamed


def _topological_nodes(graph: onnx.GraphProto, renamed: Dict[str, str]) -> Tuple[List[NodeInfo], List[str]]:
    """Kahn's algorithm, ties broken by file order, so a sorted file keeps its order exactly."""
    protos = list(graph.node)
    implicit = [implicit_inputs(n) for n in protos]
    producer: Dict[str, int] = {}
    for i, node in enumerate(protos):
        for out in node.output:
            if out:
                producer.setdefault(out, i)
    deps: List[set[int]] = []
    dependents: List[List[int]] = [[] for _ in protos]
    for i, node in enumerate(protos):
        d = {producer[t] for t in (*node.input, *implicit[i]) if t and t in producer and producer[t] != i}
        deps.append(d)
        for j in d:
            dependents[j].append(i)
    remaining = [len(d) for d in deps]
    heap = [i for i, r in enumerate(remaining) if r == 0]
    heapq.heapify(heap)
    order: List[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for j in dependents[i]:
            remaining[j] -= 1
            if remaining[j] == 0:
                heapq.heappush(heap, j)
    placed = set(order)
    cycle = [protos[i].name for i in range(len(protos)) if i not in placed]
    order.extend(i for i in range(len(protos)) if i not in placed)
    nodes = [
        NodeInfo(name=protos[i].name, op_type=protos[i].op_type, domain=protos[i].domain,
                 inputs=tuple(protos[i].input), outputs=tuple(protos[i].output),
                 implicit_inputs=implicit[i], order=pos,
                 original_name=renamed.get(protos[i].name, protos[i].name))
        for pos, i in enumerate(order)
    ]
    return nodes, cycle


def tensors_in_order(graph: ModelGraph, names: Iterable[str]) -> List[str]:
    """Sort tensor names by their producer's topological position (inputs first), stably."""
    return sorted(dict.fromkeys(names), key=graph.topo_position)
