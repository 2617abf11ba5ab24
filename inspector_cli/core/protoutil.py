"""Helpers over raw ONNX protos: nested graphs, stored tensors, value infos and shape inference."""
from __future__ import annotations

from itertools import chain
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import onnx

from .types import Dim, TensorInfo
from .wire import read_varint  # noqa: F401 (re-exported: the one varint reader, onnx-free in wire.py)
from .wiretypes import fill_type_table, read_value_types

try:  # what `onnx.shape_inference.infer_shapes` calls (model bytes, check_type, strict_mode, data_prop -> bytes)
    from onnx.onnx_cpp2py_export.shape_inference import infer_shapes as _infer_shapes_bytes  # isort: skip
except ImportError:  # pragma: no cover - an onnx without this binding: the public call below
    _infer_shapes_bytes = None


def _inferred_bytes(data: bytes) -> bytes:
    """The serialised model `onnx.shape_inference.infer_shapes(data, check_type=False, strict_mode=False,
    data_prop=True)` returns, without its parse into a ModelProto where onnx's binding allows (a private
    module: any other onnx falls back to the public call)."""
    if _infer_shapes_bytes is not None:
        try:
            return _infer_shapes_bytes(data, False, False, True)
        except TypeError:  # another signature in another onnx release
            pass
    return onnx.shape_inference.infer_shapes(data, check_type=False, strict_mode=False,
                                             data_prop=True).SerializeToString()


AttributeKinds = List[Tuple[int, onnx.NodeProto, Tuple[int, ...]]]
"""(position, node, its attributes' types) of each node of a graph that has attributes, in file order."""
_GRAPH_KINDS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
_TENSOR_KINDS = (onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS, onnx.AttributeProto.SPARSE_TENSOR,
                 onnx.AttributeProto.SPARSE_TENSORS)


def attribute_kinds(graph: onnx.GraphProto) -> AttributeKinds:
    """The nodes of `graph` (top level only) that have attributes, with the attributes' types: read once
    by `load_model` for the UTF-8 check, the external-data guard and the topology's subgraph flags,
    which each walked every node's attributes (~0.1 s a walk at 50,000 nodes)."""
    return [(i, node, tuple([a.type for a in attrs])) for i, node in enumerate(graph.node)
            for attrs in (node.attribute,) if attrs]


def _with_kinds(kinds: AttributeKinds, wanted: Tuple[int, ...]) -> List[onnx.NodeProto]:
    return [node for _, node, types in kinds if any(t in wanted for t in types)]


def iter_subgraphs(graph: onnx.GraphProto, kinds: Optional[AttributeKinds] = None) -> Iterator[onnx.GraphProto]:
    """Every graph nested in If/Loop/Scan attributes, at any depth (`kinds`: `attribute_kinds(graph)`)."""
    for node in graph.node if kinds is None else _with_kinds(kinds, _GRAPH_KINDS):
        if not node.attribute:  # most nodes: a length check instead of making attribute wrappers
            continue
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield attr.g
                yield from iter_subgraphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield sub
                    yield from iter_subgraphs(sub)


def iter_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Initializers and Constant-node values of a graph and all its subgraphs."""
    for g in [graph, *iter_subgraphs(graph)]:
        yield from g.initializer
        for node in g.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t


def iter_all_tensors(graph: onnx.GraphProto, initializers: bool = True, kinds: Optional[AttributeKinds] = None
                     ) -> Iterator[Tuple[str, onnx.TensorProto]]:
    """(where, tensor) for every place a TensorProto can carry data, at any depth: initializers,
    sparse initializers (values and indices), and node attributes of type TENSOR, TENSORS,
    SPARSE_TENSOR and SPARSE_TENSORS (Constant's value/sparse_value among them), in the main graph
    and every subgraph. The external-data guard walks this, so no place escapes it. `initializers=False`
    leaves out the top-level graph's initializers (`external_tensors` reads them apart). `kinds`:
    `attribute_kinds(graph)`, when the caller holds it."""
    # the top-level nodes are read once (a 50,000-node graph: ~0.05 s a pass); only the nodes with
    # attributes are visited again, for subgraphs and tensors, in the order of the old two passes
    if kinds is None:
        with_attributes = [node for node in graph.node if node.attribute]
        with_tensors = with_subgraphs = with_attributes
    else:  # only the nodes whose attributes can hold a graph, or a tensor: the same items, in order
        with_subgraphs, with_tensors = _with_kinds(kinds, _GRAPH_KINDS), _with_kinds(kinds, _TENSOR_KINDS)
    subgraphs: List[onnx.GraphProto] = []
    for node in with_subgraphs:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                subgraphs.append(attr.g)
                subgraphs.extend(iter_subgraphs(attr.g))
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    subgraphs.append(sub)
                    subgraphs.extend(iter_subgraphs(sub))
    yield from _graph_tensors(graph, with_tensors, initializers)
    for sub in subgraphs:
        yield from _graph_tensors(sub, sub.node)


def _graph_tensors(g: onnx.GraphProto, nodes: Iterable[onnx.NodeProto],
                   initializers: bool = True) -> Iterator[Tuple[str, onnx.TensorProto]]:
    """`iter_all_tensors` of one graph, without its subgraphs (`nodes`: those that may hold tensors)."""
    for tensor in g.initializer if initializers else ():
        yield "initializer", tensor
    for sparse in g.sparse_initializer:
        yield "sparse initializer", sparse.values
        yield "sparse initializer indices", sparse.indices
    for node in nodes:
        if not node.attribute:  # most nodes: neither the attribute wrappers nor `where` are made
            continue
        where = f"attribute of node '{node.name or node.op_type}'"
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield where, attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                for tensor in attr.tensors:
                    yield where, tensor
            elif attr.type == onnx.AttributeProto.SPARSE_TENSOR:
                yield where, attr.sparse_tensor.values
                yield where, attr.sparse_tensor.indices
            elif attr.type == onnx.AttributeProto.SPARSE_TENSORS:
                for sparse in attr.sparse_tensors:
                    yield where, sparse.values
                    yield where, sparse.indices


def external_tensors(graph: onnx.GraphProto, kinds: Optional[AttributeKinds] = None
                     ) -> List[Tuple[str, onnx.TensorProto]]:
    """The (where, tensor) of `iter_all_tensors` stored as external data, in its order. The top-level
    initializers are tested in one comprehension: one generator step each cost 0.1-0.3 s per pass at
    50,000 nodes (33,000 initializers), and loading makes two passes (guard, symlink rebase)."""
    external = onnx.TensorProto.EXTERNAL
    found = [("initializer", t) for t in graph.initializer if t.data_location == external]
    found.extend(item for item in iter_all_tensors(graph, initializers=False, kinds=kinds)
                 if item[1].data_location == external)
    return found


def implicit_inputs(node: onnx.NodeProto) -> Tuple[str, ...]:
    """Names a node's subgraphs read from the enclosing scope."""
    found: List[str] = []
    for attr in node.attribute:
        subs: Sequence[onnx.GraphProto] = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for sub in subs:
            found.extend(outer_names(sub))
    return tuple(dict.fromkeys(found))


def outer_names(graph: onnx.GraphProto) -> List[str]:
    """Names a (sub)graph reads from its enclosing scope, in first-use order, without duplicates."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        local.update(o for o in node.output if o)
    outer: List[str] = []
    for node in graph.node:
        outer.extend(i for i in node.input if i and i not in local)
        outer.extend(n for n in implicit_inputs(node) if n not in local)
    outer.extend(o.name for o in graph.output if o.name not in local)
    return list(dict.fromkeys(outer))


# ---- shape inference ----------------------------------------------------------------------------
def _dims(type_proto: onnx.TypeProto) -> Optional[Tuple[Dim, ...]]:
    tensor_type = type_proto.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    # one WhichOneof per dim instead of two HasField calls: this runs for every tensor of the model
    return tuple(d.dim_value if kind == "dim_value" else (d.dim_param or None) if kind == "dim_param" else None
                 for d in tensor_type.shape.dim for kind in (d.WhichOneof("value"),))


def value_info_to_tensor(vi: onnx.ValueInfoProto) -> TensorInfo:
    vtype = vi.type
    if not vtype.HasField("tensor_type"):
        kind = vtype.WhichOneof("value") or "tensor_type"
        return TensorInfo(vi.name, kind=kind[:-len("_type")] if kind.endswith("_type") else kind)
    return TensorInfo(vi.name, vtype.tensor_type.elem_type, _dims(vtype))


def _dim_value(d: onnx.TensorShapeProto.Dimension) -> Dim:
    """One dimension as `_dims` reads it (a set dim_value, a non-empty dim_param, else None)."""
    value = d.dim_value
    if value:
        return value
    param = d.dim_param
    if param:
        return param
    return 0 if d.WhichOneof("value") == "dim_value" else None


def _read_type(key: bytes) -> Tuple[int, Optional[Tuple[Dim, ...]]]:
    """(element type, shape) of one serialised TypeProto, as `value_info_to_tensor` reads it (an unset
    tensor_type, a sequence or a map: element type 0, no shape)."""
    tensor_type = onnx.TypeProto.FromString(key).tensor_type
    shape = None
    if tensor_type.HasField("shape"):
        shape = tuple([d.dim_value or _dim_value(d) for d in tensor_type.shape.dim])
    return tensor_type.elem_type, shape


def _type_table(value_infos: Sequence[onnx.ValueInfoProto], table: Dict[str, Tuple[int, Optional[Tuple[Dim, ...]]]]
                ) -> None:
    """name -> (element type, shape) of many value infos into `table` (a declared type wins over an
    untyped entry), each distinct type read once, found again by its serialised bytes (a few dozen
    distinct types among 50,000 tensors). `core/wiretypes.py` fills the same table from the bytes."""
    fill_type_table(((vi.name, vi.type.SerializeToString()) for vi in value_infos), table, _read_type)


def fully_declared(graph: onnx.GraphProto, outputs: Optional[Iterable[str]] = None) -> bool:
    """Every node output already has a declared type and shape (a model saved after shape inference):
    inference would only repeat it, at a cost that grows with the model (2 s at 50,000 nodes).
    `outputs`: the node outputs when the caller holds them already (a pass over the protos saved)."""
    # an unset tensor_type reads as a default message without a shape: one HasField per value info
    declared = {vi.name for vi in chain(graph.value_info, graph.output) if vi.type.tensor_type.HasField("shape")}
    if outputs is None:
        outputs = (out for node in graph.node for out in node.output)
    return declared.issuperset(out for out in outputs if out)


def infer_tensor_info(model: onnx.ModelProto, declared: Optional[bool] = None) -> Dict[str, TensorInfo]:
    """Declared value infos, initializers, then ONNX shape inference; inference never fails us.
    `declared`: `fully_declared(model.graph)` when the caller knows it already."""
    info = value_types(model, declared)
    add_initializer_types(model.graph, info)
    return info


def value_types(model: onnx.ModelProto, declared: Optional[bool] = None) -> Dict[str, TensorInfo]:
    """`infer_tensor_info` without the initializers: the value infos, graph inputs and outputs, after
    inference unless `declared`."""
    return tensor_infos(value_type_table(model, declared).items())


def tensor_infos(types: Iterable[Tuple[str, Tuple[int, Optional[Tuple[Dim, ...]]]]]) -> Dict[str, TensorInfo]:
    """A TensorInfo per (name, (element type, shape)), in order: the frozen dataclass filled directly
    (50,000 tensors). For `value_types` and the types `core/typefork.py`'s child sends back."""
    info: Dict[str, TensorInfo] = {}
    new = object.__new__
    for name, (elem_type, shape) in types:
        ti = new(TensorInfo)
        ti.__dict__.update(name=name, elem_type=elem_type, shape=shape)
        info[name] = ti
    return info


def value_type_table(model: onnx.ModelProto, declared: Optional[bool] = None
                     ) -> Dict[str, Tuple[int, Optional[Tuple[Dim, ...]]]]:
    """name -> (element type, shape) of `value_types` (what `core/typefork.py`'s child sends back).
    Inference's serialised answer is read by `core/wiretypes.py` (the same table, without a protobuf
    object per value info), or parsed when that reader declines it."""
    graph = model.graph
    if not (fully_declared(graph) if declared is None else declared):
        try:  # `onnx.shape_inference.infer_shapes` without parsing its answer as a whole ModelProto
            data = _inferred_bytes(model.SerializeToString())
            read = read_value_types(data, _read_type)
            if read is not None:
                return read
            graph = onnx.load_from_string(data).graph
        except Exception:  # inference is a best effort; unknown tensors are typed by onnxruntime later
            graph = model.graph
    table: Dict[str, Tuple[int, Optional[Tuple[Dim, ...]]]] = {}
    for items in (graph.value_info, graph.input, graph.output):
        _type_table(items, table)
    return table


def light_value_types(model: onnx.ModelProto) -> Dict[str, Tuple[int, Optional[Tuple[Dim, ...]]]]:
    """`value_type_table` as `ModelGraph.tensor_info` computes them: no inference for a fully declared model,
    else inference on the weight-less copy (`core/light.py`)."""
    from .light import light_copy

    declared = fully_declared(model.graph)
    return value_type_table(model if declared else light_copy(model), declared)


def add_initializer_types(graph: onnx.GraphProto, info: Dict[str, TensorInfo]) -> None:
    """The initializers' (type, dims) into `info`, last: they win over any value info of the same name."""
    new = object.__new__
    for init in graph.initializer:
        ti = new(TensorInfo)
        ti.__dict__.update(name=init.name, elem_type=init.data_type, shape=tuple(init.dims))
        info[init.name] = ti
