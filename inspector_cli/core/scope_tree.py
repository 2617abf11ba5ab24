"""The scope tree of a model: each scope's nodes, boundary tensors, op mix, parameters, FLOPs, activations.

`build_scope_tree(graph)` is the one entry point. Every node adds its numbers to each scope on its
path (depth-many updates), and each producer->consumer edge marks the tensor as an output of the
scopes that contain the producer but not the consumer (and an input of the converse), so the
whole tree costs O((nodes + edges) x depth). Shapes come from ONNX shape inference; dynamic
dimensions count as 1 for FLOPs and bytes (the tree says so in `dynamic_dims`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from .cost import ELEMENTWISE, PER_ELEMENT, READS_INPUT, node_cost
from .graph import ModelGraph
from .scopes import TRANSPARENT, Path, node_scopes, scope_name

_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2, 17: 1, 18: 1,
             19: 1, 20: 1, 21: 1, 22: 1, 23: 1}
"""Bytes per element by ONNX element type (4-bit types rounded up to a byte)."""


@dataclass
class Scope:
    """One node of the scope tree; numbers include every descendant."""

    path: Path
    kind: str = "name"
    own: List[Tuple[int, str]] = field(default_factory=list)
    """(topological position, name) of the nodes directly in this scope (not in a child)."""
    count: int = 0
    """Nodes in the scope and its descendants."""
    children: Dict[str, "Scope"] = field(default_factory=dict)
    ops: Dict[str, int] = field(default_factory=dict)
    params: int = 0
    param_bytes: int = 0
    flops: int = 0
    flops_unknown: int = 0
    """Nodes whose FLOPs could not be computed (shapes unknown)."""
    activation_bytes: int = 0
    inputs: Dict[str, None] = field(default_factory=dict)
    outputs: Dict[str, None] = field(default_factory=dict)
    first: int = -1
    """Topological position of the scope's first node that is not Q/DQ or Constant (orders siblings)."""

    @property
    def name(self) -> str:
        return scope_name(self.path)

    @property
    def nodes(self) -> List[str]:
        """Every node of the scope and its descendants, in topological order (computed on demand)."""
        found: List[Tuple[int, str]] = []
        stack = [self]
        while stack:
            scope = stack.pop()
            found.extend(scope.own)
            stack.extend(scope.children.values())
        return [name for _, name in sorted(found)]

    def ordered_children(self) -> List["Scope"]:
        """The children in topological order (of their first real node; ties in insertion order)."""
        children = self.children
        if len(children) < 2:
            return list(children.values())
        return sorted(children.values(), key=_first)

    def walk(self) -> Iterator["Scope"]:
        """This scope and every descendant, depth first, children in topological order."""
        stack = [self]
        while stack:  # iterative: a recursive generator re-yields every scope once per ancestor
            scope = stack.pop()
            yield scope
            if scope.children:
                stack.extend(reversed(scope.ordered_children()))


def _first(scope: Scope) -> int:
    return scope.first


def _new_scope(path: Path, kind: str) -> Scope:
    """`Scope(path, kind)` without the dataclass's default factories (24,000 scopes at 50,000 nodes)."""
    scope = object.__new__(Scope)
    scope.__dict__.update(path=path, kind=kind, own=[], count=0, children={}, ops={}, params=0, param_bytes=0,
                          flops=0, flops_unknown=0, activation_bytes=0, inputs={}, outputs={}, first=-1)
    return scope


@dataclass
class ScopeTree:
    root: Scope
    node_path: Dict[str, Path]
    source: str
    dynamic_dims: bool
    node_flops: Dict[str, Optional[int]]
    node_bytes: Dict[str, int]
    depth: Optional[int] = None
    """Scopes deeper than this were not made (`build_scope_tree(graph, depth)`); None: the whole tree."""
    scope_count: int = 0
    """Scopes of the whole tree, the root excluded (also when `depth` cut it)."""

    def get(self, path: Path) -> Scope:
        scope = self.root
        for segment in path:
            scope = scope.children[segment]
        return scope

    def scopes(self) -> List[Scope]:
        return list(self.root.walk())


def _elements(shape: Optional[tuple]) -> Tuple[int, bool]:
    count, dynamic = 1, False
    for d in shape or ():
        if isinstance(d, int) and d >= 0:
            count *= d
        else:
            dynamic = True
    return count, dynamic


_COSTED = frozenset({"Conv", "ConvTranspose", "MatMul", "MatMulInteger", "Gemm", "Einsum", "AveragePool", "MaxPool",
                     "LpPool"}) | READS_INPUT
"""Ops whose FLOPs need `node_cost`'s own rule; every other op costs per output element (or nothing),
computed inline: a call, a `NodeCost` and a shape tuple per node were a third of the tree at 50,000 nodes."""
_BY_SHAPES = frozenset({"MatMul", "MatMulInteger"}) | READS_INPUT
"""Ops whose `node_cost` reads nothing but the shapes of their first two inputs (and their count)."""
_UNSET = object()


def build_scope_tree(graph: ModelGraph, depth: Optional[int] = None) -> ScopeTree:
    """Derive the scope hierarchy of `graph` and aggregate every scope's facts.

    `depth`: make only the scopes down to that depth (what a table shows); each one made holds the
    same numbers and boundaries as in the whole tree (its nodes below the cut are its own), and
    `node_path`, `node_flops` and `node_bytes` are the whole tree's. 24,000 scopes at 50,000 nodes
    cost ~a third of the tree, and their map and node list as much again.
    """
    paths, kinds, source = node_scopes(graph)
    scope_count = _count_scopes(paths.values())
    cut = paths
    if depth is not None:
        short = {path: path[:depth] for path in set(paths.values()) if len(path) > depth}
        if short:
            get_short = short.get
            cut = {name: get_short(path, path) for name, path in paths.items()}
    root = Scope(path=(), kind="root")
    scope_of: Dict[Path, Scope] = {(): root}
    # what needs no tensor type first (the scopes, in the order their first nodes come, and their
    # boundaries), so it overlaps the types' child process (core/typefork.py) when there is one
    for node in graph.nodes:
        path = cut[node.name]
        if path in scope_of:
            continue
        missing = [path]  # parents are made before children, as the sums below need
        while missing[-1][:-1] not in scope_of:
            missing.append(missing[-1][:-1])
        for made in reversed(missing):
            scope = _new_scope(made, kinds.get(made, "name"))
            scope_of[made] = scope_of[made[:-1]].children[made[-1]] = scope
    has_constants = any(node.op_type == "Constant" for node in graph.nodes)  # not one proto read when none
    constants = [proto for proto in graph.model.graph.node if proto.op_type == "Constant" and proto.attribute
                 and proto.attribute[0].name == "value"] if has_constants else []
    _mark_boundaries(graph, cut, scope_of, graph.initializer_names.union(
        [out for proto in constants for out in proto.output]))

    info = graph.all_tensor_info()
    get_info = info.get
    dynamic = False

    shapes: Dict[str, Optional[Tuple[int, ...]]] = {}

    def shape_of(tensor: str) -> Optional[Tuple[int, ...]]:
        # memoised: the cost model asks for each activation from its producer and every consumer
        if tensor in shapes:
            return shapes[tensor]
        ti = get_info(tensor)
        shape = None if ti is None or ti.shape is None else tuple(
            d if isinstance(d, int) and d >= 0 else 1 for d in ti.shape)
        shapes[tensor] = shape
        return shape

    # initializers' (type, dims) are in the tensor info already (written last, from the proto): reading
    # 33,000 protos again cost 0.1-0.5 s at 50,000 nodes; installed info without them reads the protos
    known = [get_info(name) for name in graph.initializer_names]
    if all(ti is not None and ti.shape is not None for ti in known):
        param_sizes = {ti.name: (ti.elem_type, ti.shape) for ti in known}  # type: ignore[union-attr]
    else:
        param_sizes = {t.name: (t.data_type, tuple(t.dims)) for t in graph.model.graph.initializer}
    for proto in constants:
        tensor = proto.attribute[0].t
        for out in proto.output:
            param_sizes[out] = (tensor.data_type, tuple(tensor.dims))
    claimed: set = set()
    counted: Dict[object, Tuple[int, bool]] = {}  # shape -> _elements(shape): few distinct shapes, 50,000 outputs
    node_flops: Dict[str, Optional[int]] = {}
    node_bytes: Dict[str, int] = {}
    itemsize = _ITEMSIZE.get
    by_shapes: Dict[tuple, object] = {}
    per_element = PER_ELEMENT.get
    for node in graph.nodes:
        name, op, ins, outs = node.name, node.op_type, node.inputs, node.outputs
        params = pbytes = 0
        if not param_sizes.keys().isdisjoint(ins):  # most nodes read no weight: one C-level test
            for tensor in ins:
                if tensor in param_sizes and tensor not in claimed:
                    claimed.add(tensor)  # a shared weight counts once, in its first reader's scope
                    dtype, dims = param_sizes[tensor]
                    count = _elements(dims)[0]
                    params += count
                    pbytes += count * itemsize(dtype, 4)
        act = 0
        flops: Optional[int]
        if op == "Constant":
            flops = None
        else:
            first_out = None  # (elements, known) of outs[0], for the per-element FLOPs below
            for index, out in enumerate(outs):
                ti = get_info(out)
                if ti is not None and ti.shape is not None:
                    elements = counted.get(ti.shape)
                    if elements is None:
                        elements = counted[ti.shape] = _elements(ti.shape)
                    count, dyn = elements
                    if dyn:
                        dynamic = True
                    act += count * itemsize(ti.elem_type, 4)
                    if not index:
                        first_out = count
            # the same numbers as `node_cost` (tested against it): dynamic dims count as 1 in both
            if not outs or not ins:
                flops = 0
            elif op in _BY_SHAPES:
                # the cost depends on the inputs' shapes alone, as `shape_of` gives them to the cost model
                # (unknown dims as 1): keyed so, 12,000 MatMuls are a few pairs; keyed on the raw shapes,
                # inference's per-tensor `unk__N` dims made most of them distinct
                key = (op, len(ins), *map(shape_of, ins[:2]))
                flops = by_shapes.get(key, _UNSET)
                if flops is _UNSET:
                    cost = node_cost(graph, node, shape_of)
                    flops = by_shapes[key] = cost.flops if cost is not None else None
            elif op in _COSTED:
                cost = node_cost(graph, node, shape_of)
                flops = cost.flops if cost is not None else None
            else:
                per = 1 if op in ELEMENTWISE else per_element(op)
                flops = 0 if per is None else None if first_out is None else per * first_out
        node_flops[name] = flops
        node_bytes[name] = act
        # numbers go to the leaf only; parents get their children's sums once, below (not depth x nodes)
        leaf = scope_of[cut[name]]
        if leaf.first < 0 and op not in TRANSPARENT:
            leaf.first = node.order  # weight DQs are ready first in topological order: not a position
        leaf.own.append((node.order, name))
        ops = leaf.ops
        ops[op] = ops.get(op, 0) + 1
        if params:
            leaf.params += params
            leaf.param_bytes += pbytes
        leaf.activation_bytes += act
        if flops is None:
            leaf.flops_unknown += 1
        else:
            leaf.flops += flops
    _sum_up(list(scope_of.values()))
    return ScopeTree(root=root, node_path=paths, source=source, dynamic_dims=dynamic,
                     node_flops=node_flops, node_bytes=node_bytes, depth=depth, scope_count=scope_count)


def _count_scopes(paths: Iterable[Path]) -> int:
    """Scopes of the tree whose node paths are `paths`: every non-empty prefix of one, counted once."""
    seen: set = set()
    for path in set(paths):
        while path and path not in seen:  # `seen` holds every prefix of what it holds: stop at the first
            seen.add(path)
            path = path[:-1]
    return len(seen)


def _sum_up(created: List[Scope]) -> None:
    """Each scope's numbers become its own nodes' plus its children's. `created`: every scope, parents
    before children (as `scope_at` makes them), so the reverse visits each scope after all its children."""
    for current in reversed(created):
        current.count = len(current.own)
        for child in current.children.values():  # in insertion order, as the ops' order depends on it
            current.count += child.count
            ops = current.ops
            for op, n in child.ops.items():
                ops[op] = ops.get(op, 0) + n
            current.params += child.params
            current.param_bytes += child.param_bytes
            current.flops += child.flops
            current.flops_unknown += child.flops_unknown
            current.activation_bytes += child.activation_bytes
            if child.first >= 0 and (current.first < 0 or child.first < current.first):
                current.first = child.first


def _mark_boundaries(graph: ModelGraph, paths: Dict[str, Path], scope_of: Dict[Path, Scope],
                     constants: set) -> None:
    """Tensors crossing each scope's border: produced inside and read outside (outputs) or the converse."""
    # each path's scopes from depth 1 down, made once per scope (`scope_of` lists parents first), so an
    # edge marks `chains[path][common:]` instead of slicing and hashing a path prefix per level
    chains: Dict[Path, List[Scope]] = {}
    for path, scope in scope_of.items():
        chains[path] = chains[path[:-1]] + [scope] if path else []
    producer_of = graph.producer.get
    for tensor, consumers in graph.consumers.items():
        if not tensor or tensor in constants:
            continue
        producer = producer_of(tensor)
        p_path: Path = paths[producer.name] if producer is not None else ()
        for consumer in consumers:
            c_path = paths[consumer.name]
            if c_path == p_path:
                continue  # most edges stay inside one scope: they cross no border
            common = 0
            for a, b in zip(p_path, c_path):
                if a != b:
                    break
                common += 1
            for scope in chains[p_path][common:]:
                scope.outputs[tensor] = None
            for scope in chains[c_path][common:]:
                scope.inputs[tensor] = None
    for tensor in dict.fromkeys(graph.output_names):  # in model order: a set made the order vary per process
        producer = producer_of(tensor)
        if producer is not None:
            for scope in chains[paths[producer.name]]:
                scope.outputs[tensor] = None
