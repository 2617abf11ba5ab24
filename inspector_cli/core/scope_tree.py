"""The scope tree of a model: each scope's nodes, boundary tensors, op mix, parameters, FLOPs, activations.

`build_scope_tree(graph)` is the one entry point. Every node adds its numbers to each scope on its
path (depth-many updates), and each producer->consumer edge marks the tensor as an output of the
scopes that contain the producer but not the consumer (and an input of the converse), so the
whole tree costs O((nodes + edges) x depth). Shapes come from ONNX shape inference; dynamic
dimensions count as 1 for FLOPs and bytes (the tree says so in `dynamic_dims`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

from .cost import node_cost
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

    def walk(self) -> Iterator["Scope"]:
        """This scope and every descendant, depth first, children in topological order."""
        yield self
        for child in sorted(self.children.values(), key=lambda s: s.first):
            yield from child.walk()


@dataclass
class ScopeTree:
    root: Scope
    node_path: Dict[str, Path]
    source: str
    dynamic_dims: bool
    node_flops: Dict[str, Optional[int]]
    node_bytes: Dict[str, int]

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


def build_scope_tree(graph: ModelGraph) -> ScopeTree:
    """Derive the scope hierarchy of `graph` and aggregate every scope's facts."""
    paths, kinds, source = node_scopes(graph)
    info = graph.all_tensor_info()
    dynamic = False

    shapes: Dict[str, Optional[Tuple[int, ...]]] = {}

    def shape_of(tensor: str) -> Optional[Tuple[int, ...]]:
        # memoised: the cost model asks for each activation from its producer and every consumer
        if tensor in shapes:
            return shapes[tensor]
        ti = info.get(tensor)
        shape = None if ti is None or ti.shape is None else tuple(
            d if isinstance(d, int) and d >= 0 else 1 for d in ti.shape)
        shapes[tensor] = shape
        return shape

    root = Scope(path=(), kind="root")
    scope_of: Dict[Path, Scope] = {(): root}

    def chain(path: Path) -> List[Scope]:
        found = [root]
        for depth in range(1, len(path) + 1):
            prefix = path[:depth]
            scope = scope_of.get(prefix)
            if scope is None:
                scope = Scope(path=prefix, kind=kinds.get(prefix, "name"))
                scope_of[prefix] = scope
                found[-1].children[prefix[-1]] = scope
            found.append(scope)
        return found

    # initializers' (type, dims) are in the tensor info already (written last, from the proto): reading
    # 33,000 protos again cost 0.1-0.5 s at 50,000 nodes; installed info without them reads the protos
    known = [info.get(name) for name in graph.initializer_names]
    if all(ti is not None and ti.shape is not None for ti in known):
        param_sizes = {ti.name: (ti.elem_type, ti.shape) for ti in known}  # type: ignore[union-attr]
    else:
        param_sizes = {t.name: (t.data_type, tuple(t.dims)) for t in graph.model.graph.initializer}
    for proto in graph.model.graph.node:
        if proto.op_type == "Constant" and proto.attribute and proto.attribute[0].name == "value":
            tensor = proto.attribute[0].t
            for out in proto.output:
                param_sizes[out] = (tensor.data_type, tuple(tensor.dims))
    claimed: set = set()
    counted: Dict[object, Tuple[int, bool]] = {}  # shape -> _elements(shape): few distinct shapes, 50,000 outputs
    node_flops: Dict[str, Optional[int]] = {}
    node_bytes: Dict[str, int] = {}
    leaves: Dict[Path, Scope] = {}
    for node in graph.nodes:
        params = pbytes = 0
        for tensor in node.inputs:
            if tensor in param_sizes and tensor not in claimed:
                claimed.add(tensor)  # a shared weight counts once, in its first reader's scope
                dtype, dims = param_sizes[tensor]
                count = _elements(dims)[0]
                params += count
                pbytes += count * _ITEMSIZE.get(dtype, 4)
        cost = node_cost(graph, node, shape_of) if node.op_type != "Constant" else None
        flops = cost.flops if cost is not None else None
        act = 0
        if node.op_type != "Constant":
            for out in node.outputs:
                ti = info.get(out)
                if ti is not None and ti.shape is not None:
                    elements = counted.get(ti.shape)
                    if elements is None:
                        elements = counted[ti.shape] = _elements(ti.shape)
                    count, dyn = elements
                    dynamic = dynamic or dyn
                    act += count * _ITEMSIZE.get(ti.elem_type, 4)
        node_flops[node.name] = flops
        node_bytes[node.name] = act
        # numbers go to the leaf only; parents get their children's sums once, below (not depth x nodes)
        leaf = leaves.get(paths[node.name]) or chain(paths[node.name])[-1]
        leaves[leaf.path] = leaf
        if leaf.first < 0 and node.op_type not in TRANSPARENT:
            leaf.first = node.order  # weight DQs are ready first in topological order: not a position
        leaf.own.append((node.order, node.name))
        leaf.ops[node.op_type] = leaf.ops.get(node.op_type, 0) + 1
        leaf.params += params
        leaf.param_bytes += pbytes
        leaf.activation_bytes += act
        if flops is None:
            leaf.flops_unknown += 1
        else:
            leaf.flops += flops
    _sum_up(root)
    _mark_boundaries(graph, paths, scope_of, set(param_sizes))
    return ScopeTree(root=root, node_path=paths, source=source, dynamic_dims=dynamic,
                     node_flops=node_flops, node_bytes=node_bytes)


def _sum_up(scope: Scope) -> None:
    """Post-order: each scope's numbers become its own nodes' plus its children's."""
    stack: List[Tuple[Scope, bool]] = [(scope, False)]
    while stack:
        current, done = stack.pop()
        if not done:
            stack.append((current, True))
            stack.extend((child, False) for child in current.children.values())
            continue
        current.count = len(current.own)
        for child in current.children.values():
            current.count += child.count
            for op, n in child.ops.items():
                current.ops[op] = current.ops.get(op, 0) + n
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
    outputs = dict.fromkeys(graph.output_names)  # in model order: a set made the order vary per process
    for tensor, consumers in graph.consumers.items():
        if not tensor or tensor in constants:
            continue
        producer = graph.producer.get(tensor)
        p_path: Path = paths[producer.name] if producer is not None else ()
        for consumer in consumers:
            c_path = paths[consumer.name]
            common = 0
            for a, b in zip(p_path, c_path):
                if a != b:
                    break
                common += 1
            for depth in range(common + 1, len(p_path) + 1):
                scope_of[p_path[:depth]].outputs[tensor] = None
            for depth in range(common + 1, len(c_path) + 1):
                scope_of[c_path[:depth]].inputs[tensor] = None
    for tensor in outputs:
        producer = graph.producer.get(tensor)
        if producer is not None:
            p_path = paths[producer.name]
            for depth in range(1, len(p_path) + 1):
                scope_of[p_path[:depth]].outputs[tensor] = None
