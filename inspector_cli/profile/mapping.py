"""Mapping the nodes onnxruntime ran (its optimised graph) back to the original model's nodes.

Fusions rename, merge and insert nodes, but the tensors *between* fused regions keep their names.
A tensor produced in both graphs is a boundary. Nodes joined by non-boundary tensors form a
region; an original region and an optimised region that produce the same boundary tensor are the
same piece of work. Joining regions through shared boundary tensors gives groups: original nodes
on one side, the kernels that executed them on the other. A boundary tensor that became an
initializer of the optimised graph marks its original region as constant-folded.

Inside a group, a kernel is *anchored* to one original node when it produces that node's output
tensor, or bears its name (exactly, or followed by '/' or '_' as onnxruntime's fusions name
them: 'conv_7_token_21', '.../MatMul/MatMulAddFusion'). Anchors narrow a multi-kernel group down
to the node each kernel mostly does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import onnx

from ..core.graph import ModelGraph


DATA_MOVEMENT = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast", "Concat", "Slice",
                 "Split", "Expand", "Gather", "ReorderInput", "ReorderOutput", "MemcpyFromHost", "MemcpyToHost"}
"""Kernels that only move data: they anchor only to an original node of the same op type (the Reshape
onnxruntime puts after a MatMul+Add turned Gemm produces the Add's tensor but does not do its work)."""


@dataclass(frozen=True)
class OptNode:
    name: str
    op_type: str
    domain: str
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]


@dataclass
class KernelGroup:
    id: int
    original: List[int]
    """Indices into `ModelGraph.nodes` (topological order)."""
    kernels: List[str]
    kind: str = "kept"


@dataclass
class NodeMapping:
    groups: List[KernelGroup]
    group_of_node: Dict[str, int]
    group_of_kernel: Dict[str, int]
    anchor: Dict[str, int]
    """kernel -> index of the original node it is anchored to."""
    optimized: List[OptNode] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


class UnionFind:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        parent = self.parent
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def optimized_nodes(model: onnx.ModelProto) -> Tuple[List[OptNode], Set[str]]:
    """Top-level nodes of an optimised model, and the names of its initializers."""
    nodes = [OptNode(n.name, n.op_type, n.domain, tuple(n.input[:]), tuple(n.output[:])) for n in model.graph.node]
    return nodes, {t.name for t in model.graph.initializer}


def map_nodes(graph: ModelGraph, optimized: Optional[Sequence[OptNode]], opt_initializers: Iterable[str] = (),
              kernels: Iterable[str] = ()) -> NodeMapping:
    """Groups of original nodes and executed kernels. Without an optimised graph, kernels map by name."""
    ran = list(dict.fromkeys(kernels))
    if optimized is None:
        return _map_by_name(graph, ran)
    opt = list(optimized)
    orig_nodes = graph.nodes
    n_orig = len(orig_nodes)
    orig_producer: Dict[str, int] = {t: i for i, node in enumerate(orig_nodes) for t in node.outputs if t}
    opt_producer: Dict[str, int] = {t: j for j, node in enumerate(opt) for t in node.outputs if t}
    folded = set(orig_producer) & set(opt_initializers)
    boundary = (set(orig_producer) & set(opt_producer)) | folded

    # One union-find over both graphs: original nodes first, then optimised ones.
    uf = UnionFind(n_orig + len(opt))
    for i, node in enumerate(orig_nodes):
        for t in node.all_inputs:
            j = orig_producer.get(t)
            if j is not None and t not in boundary:
                uf.union(i, j)
    for k, onode in enumerate(opt):
        for t in onode.inputs:
            m = opt_producer.get(t)
            if m is not None and t not in boundary:
                uf.union(n_orig + k, n_orig + m)
    for t in boundary:
        if t in opt_producer:
            uf.union(orig_producer[t], n_orig + opt_producer[t])

    by_root: Dict[int, KernelGroup] = {}
    groups: List[KernelGroup] = []

    def group_for(index: int) -> KernelGroup:
        root = uf.find(index)
        group = by_root.get(root)
        if group is None:
            group = by_root[root] = KernelGroup(id=len(groups), original=[], kernels=[])
            groups.append(group)
        return group

    for i in range(n_orig):
        group_for(i).original.append(i)
    ran_set = set(ran)
    opt_names = {o.name for o in opt}
    for k, onode in enumerate(opt):
        if onode.name in ran_set:
            group_for(n_orig + k).kernels.append(onode.name)
    mapping = NodeMapping(groups=groups, group_of_node={}, group_of_kernel={}, anchor={}, optimized=opt)
    nested = [name for name in ran if name not in opt_names]
    for name in nested:  # kernels of If/Loop/Scan bodies: their time is inside the parent node's
        groups.append(KernelGroup(id=len(groups), original=[], kernels=[name], kind="nested"))
    if nested:
        mapping.notes.append(f"{len(nested)} kernel(s) ran inside control-flow subgraphs; their time is "
                             "counted in their parent node and left out of the sums")
    _finish(graph, mapping, {o.name: o for o in opt}, orig_producer)
    return mapping


def _map_by_name(graph: ModelGraph, ran: List[str]) -> NodeMapping:
    groups = [KernelGroup(id=i, original=[i], kernels=[]) for i in range(len(graph.nodes))]
    index = {node.name: i for i, node in enumerate(graph.nodes)}
    for name in ran:
        i = index.get(name)
        if i is None:
            i = _prefix_anchor(name, index)
        if i is None:
            groups.append(KernelGroup(id=len(groups), original=[], kernels=[name]))
        else:
            groups[i].kernels.append(name)
    mapping = NodeMapping(groups=groups, group_of_node={}, group_of_kernel={}, anchor={})
    mapping.notes.append("the optimised graph was not saved; kernels are mapped to original nodes by name only")
    _finish(graph, mapping, {}, {})
    return mapping


def _prefix_anchor(name: str, index: Dict[str, int]) -> Optional[int]:
    """Longest original name that `name` extends with '/' or '_' ('conv_7_token_21' -> 'conv_7')."""
    cut = len(name)
    while cut > 0:
        cut = max(name.rfind("/", 0, cut), name.rfind("_", 0, cut))
        if cut <= 0:
            return None
        found = index.get(name[:cut])
        if found is not None:
            return found
    return None


def _finish(graph: ModelGraph, mapping: NodeMapping, opt_by_name: Dict[str, OptNode],
            orig_producer: Dict[str, int]) -> None:
    nodes = graph.nodes
    for group in mapping.groups:
        for i in group.original:
            mapping.group_of_node[nodes[i].name] = group.id
        for kernel in group.kernels:
            mapping.group_of_kernel[kernel] = group.id
        if group.kind == "nested":
            continue
        local = {nodes[i].name: i for i in group.original}
        for kernel in group.kernels:
            anchor = local.get(kernel)
            if anchor is None and kernel in opt_by_name:
                made = [orig_producer.get(t) for t in opt_by_name[kernel].outputs]
                in_group = [i for i in made if i is not None and nodes[i].name in local]
                anchor = max(in_group) if in_group else None
            if anchor is None:
                anchor = _prefix_anchor(kernel, local)
            op = opt_by_name[kernel].op_type if kernel in opt_by_name else None
            if anchor is not None and op in DATA_MOVEMENT and nodes[anchor].op_type != op:
                anchor = None
            if anchor is not None:
                mapping.anchor[kernel] = anchor
        group.kind = _kind(group, nodes, opt_by_name)


def _kind(group: KernelGroup, nodes: Sequence, opt_by_name: Dict[str, OptNode]) -> str:
    if not group.kernels:
        return "folded"
    if not group.original:
        return "added"
    if len(group.original) == 1 and len(group.kernels) == 1:
        node = nodes[group.original[0]]
        kernel = group.kernels[0]
        op = opt_by_name[kernel].op_type if kernel in opt_by_name else node.op_type
        return "kept" if kernel == node.name and op == node.op_type else "replaced"
    return "fused"
