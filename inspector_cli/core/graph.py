"""The graph core: load a model safely and answer structural questions about it.

`ModelGraph` holds the ModelProto *without* external weights loaded (they stay references to files
inside the model's folder), so models over 2 GB load in milliseconds and can be re-serialised
cheaply for onnxruntime, which reads the weights itself from the folder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Dict, Iterable, Iterator, List, Optional, Tuple

import onnx
from google.protobuf.message import DecodeError

from ..errors import ModelLoadError, UsageError
from .external_data import check_external_data, external_data_problems, rebase_symlinked_data  # noqa: F401 (re-exported)
from .filehash import prefetch as prefetch_sha256
from .light import light_copy
from .protoutil import (AttributeKinds, add_initializer_types, attribute_kinds, external_tensors, fully_declared, infer_tensor_info, iter_subgraphs,
                        value_info_to_tensor)
from .topology import NodeInfo, NotText, assign_node_names, subgraph_flags, topological_nodes  # noqa: F401 (NodeInfo re-exported)
from .typefork import PendingTypes, start as start_type_child
from .types import TensorInfo

_EXTERNAL = onnx.TensorProto.EXTERNAL


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
    data_folder: Optional[Path] = field(default=None, repr=False)
    """Where external-data locations are resolved when not the model's own folder (a model reached
    through symlinks: `core/external_data.rebase_symlinked_data`)."""
    _pending_types: Optional[PendingTypes] = field(default=None, repr=False)
    """A child process computing the tensor types since the load (`load_model(early_types=True)`)."""

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_proto(cls, model: onnx.ModelProto, path: Optional[Path] = None,
                   kinds: Optional[AttributeKinds] = None) -> "ModelGraph":
        """`kinds`: `protoutil.attribute_kinds(model.graph)` when the caller holds it."""
        graph = cls(model=model, path=path)
        flags = subgraph_flags(model.graph, kinds)
        graph.renamed_nodes = assign_node_names(model.graph, flags=flags)
        try:
            graph.nodes, graph.cycle_nodes = topological_nodes(model.graph, graph.renamed_nodes, flags)
        except NotText:  # checked here, on the lists the topology reads anyway, not in a pass of its own
            raise ModelLoadError(f"{path or 'the model'}: not a valid ONNX protobuf "
                                 f"({_non_utf8_name(model, quick=False) or 'a node name'} is not UTF-8 text)",
                                 hint="the file is corrupt") from None
        graph._index()
        return graph

    def _index(self) -> None:
        self.node_by_name: Dict[str, NodeInfo] = {n.name: n for n in self.nodes}
        producer: Dict[str, NodeInfo] = {}
        consumers: Dict[str, List[NodeInfo]] = {}
        get = consumers.get  # not setdefault: it made a list per edge to throw away (100,000 at 50,000 nodes)
        for node in self.nodes:
            for out in node.outputs:
                if out:
                    producer[out] = node
            for inp in node.all_inputs:
                readers = get(inp)
                if readers is None:
                    consumers[inp] = [node]
                else:
                    readers.append(node)
        self.producer, self.consumers = producer, consumers
        self.initializer_names = {t.name for t in self.model.graph.initializer}
        self.input_names = [i.name for i in self.model.graph.input if i.name not in self.initializer_names]
        self.output_names = [o.name for o in self.model.graph.output]

    # ---- basic facts --------------------------------------------------------------------------
    @property
    def display_name(self) -> str:
        return str(self.path) if self.path else (self.model.graph.name or "<model>")

    @property
    def folder(self) -> Optional[Path]:
        """The folder external-data locations are relative to (the model's own, unless rebased)."""
        if self.data_folder is not None:
            return self.data_folder
        return self.path.parent if self.path else None

    @property
    def opset(self) -> int:
        for imp in self.model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                return imp.version
        return 0

    @property
    def uses_external_data(self) -> bool:
        return bool(external_tensors(self.model.graph))

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

    def duplicate_node_names(self) -> Dict[str, List[str]]:
        """Node names that more than one node of one graph (If/Loop bodies included) carries: the name ->
        the names mi gave the later ones in memory. onnxruntime refuses such a file ("two nodes with same
        node name"); `core/refusals.py` says so before anything runs the renamed copy."""
        duplicates: Dict[str, List[str]] = {}
        for new, original in self.renamed_nodes.items():
            if original:  # an unnamed node got a name too; onnxruntime accepts those
                duplicates.setdefault(original, []).append(new)
        return duplicates

    def topo_position(self, tensor: str) -> int:
        """Position of a tensor's producer in topological order (-1 for graph inputs/initializers)."""
        node = self.producer.get(tensor)
        return node.order if node else -1

    def producer_through(self, tensor: str, skipped: Collection[str]) -> Optional[NodeInfo]:
        """The producer of `tensor`, looking through nodes of the `skipped` op types (their first input):
        the node that computed a value a chain of Q/DQ pairs or Casts only carries."""
        node = self.producer.get(tensor)
        while node is not None and node.op_type in skipped and node.inputs:
            node = self.producer.get(node.inputs[0])
        return node

    # ---- tensor types and shapes ----------------------------------------------------------------
    def tensor_info(self, name: str) -> TensorInfo:
        """Type and shape of any tensor, from the model's declarations and ONNX shape inference."""
        if self._tensor_info is None and self._pending_types is not None:
            pending, self._pending_types = self._pending_types, None
            initializers: Dict[str, TensorInfo] = {}
            add_initializer_types(self.model.graph, initializers)  # while the child may still be working
            info = pending.result()  # None: the child did not deliver; computed below, as without it
            if info is not None:
                info.update(initializers)  # last, as `infer_tensor_info` adds them
                self._tensor_info = info
        if self._tensor_info is None:
            # a model saved with every node output typed needs no inference, hence no weight-less copy
            # either (0.2-0.3 s at 50,000 nodes); the node outputs come from the topology's tuples
            declared = fully_declared(self.model.graph, (out for node in self.nodes for out in node.outputs))
            self._tensor_info = infer_tensor_info(self.model if declared else light_copy(self.model), declared)
        info = self._tensor_info.get(name)  # no default built per call: pairing asks ~10 times per node
        return info if info is not None else TensorInfo(name)

    def all_tensor_info(self) -> Dict[str, TensorInfo]:
        self.tensor_info("")
        assert self._tensor_info is not None
        return self._tensor_info

    def set_tensor_info(self, info: Dict[str, TensorInfo]) -> None:
        """Install tensor types computed elsewhere instead of running shape inference ({} types nothing:
        for graphs whose contrib ops defeat ONNX shape inference)."""
        if self._pending_types is not None:
            self._pending_types.cancel()
            self._pending_types = None
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
def load_model(path: "str | os.PathLike[str]", early_types: bool = False) -> ModelGraph:
    """Load an ONNX model by path, checking that external data stays inside the model's folder.

    Weights stored as external data are not read into memory: they stay references that
    onnxruntime resolves against the model's folder. Raises `UsageError` for a path that does not
    exist or is a directory, `ModelLoadError` for a file that is not a usable ONNX model.

    `early_types`: for a caller that will ask for the tensor types; on Linux a child process computes
    them while the graph is indexed (`core/typefork.py`; same types, same errors).
    """
    model_path = Path(path)
    if not model_path.exists():
        raise UsageError(f"{model_path}: no such file", hint="check the model path")
    if model_path.is_dir():
        raise UsageError(f"{model_path}: is a directory, not an .onnx file", hint="pass the model file itself")
    if not early_types:
        prefetch_sha256(model_path)  # for the result's ModelRef, on the idle core meanwhile
    model, kinds = _parse(model_path)
    # the child starts before the external-data guard: shape inference reads no external data (onnx's
    # C++ refuses to: "Cannot parse data from external tensors"), and a refused model stops the child
    pending = start_type_child(model, len(model.graph.node)) if early_types else None
    if early_types:
        prefetch_sha256(model_path)  # after the fork: the child must start with one thread
    try:
        stored = external_tensors(model.graph, kinds)  # one pass for both the guard and the rebase
        check_external_data(model, model_path, stored)
        graph = ModelGraph.from_proto(model, model_path, kinds)
        graph.data_folder = rebase_symlinked_data(model, model_path, stored)
    except BaseException:
        if pending is not None:
            pending.cancel()
        raise
    graph._pending_types = pending
    return graph


def parse_model_file(model_path: Path) -> onnx.ModelProto:
    """Parse a file as a ModelProto, turning every way it can be broken into one ModelLoadError."""
    return _parse(model_path)[0]


def _parse(model_path: Path) -> Tuple[onnx.ModelProto, AttributeKinds]:
    """`parse_model_file`, and the top-level nodes' attribute kinds it reads (for the guard and topology)."""
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
    kinds = attribute_kinds(model.graph) if model.HasField("graph") else []
    bad_text = _non_utf8_name(model, kinds=kinds)
    if bad_text is not None:
        raise ModelLoadError(f"{model_path}: not a valid ONNX protobuf ({bad_text} is not UTF-8 text)",
                             hint="the file is corrupt")
    if model.ir_version <= 0 or not model.HasField("graph") or not model.opset_import:
        raise ModelLoadError(
            f"{model_path}: parsed, but holds no ONNX model (ir_version={model.ir_version}, "
            f"{len(model.graph.node)} nodes, {len(model.opset_import)} opset imports)",
            hint="the file is not an ONNX model or is truncated",
        )
    return model, kinds


def _all_text(model: onnx.ModelProto, kinds: Optional[AttributeKinds] = None) -> bool:
    """True when every name of the model outside its top-level nodes is `str`: one C-level join per
    field kind raises TypeError on the first `bytes` (a per-name isinstance test cost 0.35 s at 50,000
    nodes). The top-level nodes' names are checked by `ModelGraph.from_proto`, which reads them anyway."""
    try:
        "".join([vi.name for items in (model.graph.input, model.graph.output, model.graph.value_info,
                                       model.graph.initializer) for vi in items])
        for graph in iter_subgraphs(model.graph, kinds):
            nodes = graph.node
            "".join([vi.name for items in (graph.input, graph.output, graph.value_info, graph.initializer)
                     for vi in items])
            "".join([n.name for n in nodes] + [n.op_type for n in nodes] + [n.domain for n in nodes])
            "".join([t for n in nodes for t in n.input] + [t for n in nodes for t in n.output])
        "".join([opset.domain for opset in model.opset_import])
    except TypeError:
        return False
    return True


def _non_utf8_name(model: onnx.ModelProto, quick: bool = True, kinds: Optional[AttributeKinds] = None) -> Optional[str]:
    """Where a string field holds bytes that are not UTF-8 (protobuf then hands back `bytes`, and
    every later use of the name would fail), or None. `quick` leaves the top-level nodes to
    `ModelGraph.from_proto`."""
    if quick and _all_text(model, kinds):
        return None
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


def tensors_in_order(graph: ModelGraph, names: Iterable[str]) -> List[str]:
    """Sort tensor names by their producer's topological position (inputs first), stably."""
    return sorted(dict.fromkeys(names), key=graph.topo_position)
