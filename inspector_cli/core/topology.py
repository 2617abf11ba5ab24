"""Node names and topological order of a GraphProto, read in few passes over the protobuf nodes.

Every command builds these for every model, so they are written for 50,000-node graphs: each
protobuf field is read once into a Python list (a upb field access costs ~0.1-0.5 us, a node has
six), a file already in topological order (what exporters write) skips Kahn's heap, and `NodeInfo`
objects are filled without the frozen dataclass's per-field `object.__setattr__`.
"""
from __future__ import annotations

import heapq
from itertools import chain
from dataclasses import dataclass
from functools import cached_property
from typing import Dict, List, Optional, Tuple

import onnx

from .protoutil import AttributeKinds, implicit_inputs

_GRAPH, _GRAPHS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS


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

    @cached_property  # read per node by every graph walk; `topological_nodes` fills the cache
    def all_inputs(self) -> Tuple[str, ...]:
        return tuple(t for t in self.inputs if t) + self.implicit_inputs

    @property
    def has_subgraph(self) -> bool:
        return self.op_type in ("If", "Loop", "Scan") or bool(self.implicit_inputs)


class NotText(ValueError):
    """A string field of a node holds bytes that are not UTF-8 (protobuf hands back `bytes`)."""


def has_subgraph(node: onnx.NodeProto) -> bool:
    """Whether an attribute of `node` holds a graph (If/Loop/Scan bodies, or a custom op's)."""
    if not node.attribute:  # most nodes: one length check, no attribute wrappers made
        return False
    return any(attr.type == _GRAPH or attr.type == _GRAPHS for attr in node.attribute)


def subgraph_flags(graph: onnx.GraphProto, kinds: Optional[AttributeKinds] = None) -> List[bool]:
    """`has_subgraph` of every node of `graph`, read once for naming and ordering (from `kinds`,
    `protoutil.attribute_kinds(graph)`, when the caller holds it)."""
    if kinds is None:
        return [has_subgraph(p) for p in graph.node]
    flags = [False] * len(graph.node)
    for i, _, types in kinds:
        if _GRAPH in types or _GRAPHS in types:
            flags[i] = True
    return flags


def assign_node_names(graph: onnx.GraphProto, prefix: str = "", flags: Optional[List[bool]] = None) -> Dict[str, str]:
    """Give unnamed or duplicate-named nodes deterministic unique names: `<OpType>_<index>`.

    Returns new name -> original name ('' when it had none). Names are written into the proto so
    onnxruntime's profiler and our reports use the same names. `flags`: `subgraph_flags(graph)`.
    """
    flags = flags if flags is not None else subgraph_flags(graph)
    renamed: Dict[str, str] = {}
    protos = graph.node
    names = [n.name for n in protos]
    taken = set(names)
    taken.discard("")
    clean = len(taken) == len(names)  # every node named, no duplicates: nothing to rename here
    seen: set[str] = set()
    for index, node in enumerate(protos):
        if not clean:
            original = names[index]
            if not original or original in seen:
                base = f"{prefix}{original or node.op_type}_{index}"
                name, k = base, 1
                while name in taken or name in seen:
                    name, k = f"{base}_{k}", k + 1
                node.name = name
                renamed[name] = original
                seen.add(name)
            else:
                seen.add(original)
        if flags[index]:
            for attr in node.attribute:
                subs = [attr.g] if attr.type == _GRAPH else list(attr.graphs) if attr.type == _GRAPHS else []
                for sub in subs:
                    renamed.update(assign_node_names(sub, prefix=f"{node.name}/"))
    return renamed


def _kahn(inputs: List[Tuple[str, ...]], implicit: List[Tuple[str, ...]], producer: Dict[str, int]) -> List[int]:
    """Kahn's algorithm, ties broken by file order (a min-heap of file positions)."""
    count = len(inputs)
    deps: List[set[int]] = []
    dependents: List[List[int]] = [[] for _ in range(count)]
    for i in range(count):
        d = {producer[t] for t in (*inputs[i], *implicit[i]) if t and t in producer and producer[t] != i}
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
    return order


def _sorted_already(inputs: List[Tuple[str, ...]], implicit: List[Tuple[str, ...]], producer: Dict[str, int]) -> bool:
    """Every node reads only tensors produced earlier in the file (then Kahn's order is file order:
    the smallest unplaced position is always ready, and the heap pops the smallest ready one)."""
    get = producer.get
    for i, names in enumerate(inputs):
        for t in names:
            j = get(t)
            if j is not None and j > i:
                return False
        for t in implicit[i]:
            j = get(t)
            if j is not None and j > i:
                return False
    return True


def topological_nodes(graph: onnx.GraphProto, renamed: Dict[str, str], flags: Optional[List[bool]] = None
                      ) -> Tuple[List[NodeInfo], List[str]]:
    """The top-level nodes in topological order (ties broken by file order, so a sorted file keeps
    its order exactly), and the names of nodes on a cycle (appended in file order)."""
    flags = flags if flags is not None else subgraph_flags(graph)
    protos = list(graph.node)
    names = [p.name for p in protos]
    ops = [p.op_type for p in protos]
    domains = [p.domain for p in protos]
    # a slice copies the repeated field in one C call (tuple(p.input) iterates it: ~2x the time)
    inputs = [tuple(p.input[:]) for p in protos]
    outputs = [tuple(p.output[:]) for p in protos]
    implicit = [implicit_inputs(p) if flag else () for p, flag in zip(protos, flags)]
    try:  # a name protobuf could not decode as UTF-8 comes back as bytes: one C-level join finds it
        "".join(names), "".join(ops), "".join(domains)
        "".join(chain.from_iterable(inputs)), "".join(chain.from_iterable(outputs))
    except TypeError:
        raise NotText("a node name, op type, domain or tensor name is not UTF-8 text") from None
    producer: Dict[str, int] = {}
    for i, outs in enumerate(outputs):
        for out in outs:
            if out and out not in producer:
                producer[out] = i
    count = len(protos)
    if _sorted_already(inputs, implicit, producer):
        order: List[int] = list(range(count))
        cycle: List[str] = []
    else:
        order = _kahn(inputs, implicit, producer)
        placed = set(order)
        cycle = [names[i] for i in range(count) if i not in placed]
        order.extend(i for i in range(count) if i not in placed)
    new = object.__new__
    nodes: List[NodeInfo] = []
    for pos, i in enumerate(order):
        node = new(NodeInfo)
        name, ins, imp = names[i], inputs[i], implicit[i]
        # frozen dataclass: fill __dict__ directly (its __init__ pays an object.__setattr__ per field);
        # `all_inputs` is a cached_property, so pre-filling it is its cache
        node.__dict__.update(name=name, op_type=ops[i], domain=domains[i], inputs=ins, outputs=outputs[i],
                             implicit_inputs=imp, order=pos, original_name=renamed.get(name, name),
                             all_inputs=(tuple(t for t in ins if t) if "" in ins else ins) + imp)
        nodes.append(node)
    return nodes, cycle
