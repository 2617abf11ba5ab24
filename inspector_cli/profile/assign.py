"""Which kernel does each original node's work, and where its measured time sits on the graph.

A group with one kernel is simple. A large group (onnxruntime renamed every tensor of an NCHWc
Conv chain or of a quantised tail) holds several kernels, most *anchored* to one original node
(see mapping.py). Every other original node of the group goes to the nearest anchor downstream
(a renamed chain's kernels are named after the tensor they finally produce: 'relu_3_out_nchwc'
does the Conv, BatchNormalization and Relu before relu_3_out), except a QuantizeLinear, which
goes to the nearest anchor upstream (its producer's kernel quantises its output, as QDQ node
units fuse); a node with no anchor that way goes the other way. Distances come from two
multi-source breadth-first searches per group, so this is linear in the group's size.
"""
from __future__ import annotations

from collections import deque
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .mapping import DATA_MOVEMENT, KernelGroup, NodeMapping


def _main_kernel(group: KernelGroup, kernel_time: Mapping[str, float], op_of: Mapping[str, str]) -> str:
    """The group's slowest kernel that does more than move data (the default owner)."""
    ranked = sorted(group.kernels, key=lambda k: -kernel_time.get(k, 0.0))
    compute = [k for k in ranked if op_of.get(k) not in DATA_MOVEMENT]
    return (compute or ranked)[0]


def _spread(sources: Dict[int, str], members: set, edges: Sequence[Sequence[int]]) -> Dict[int, Tuple[int, str]]:
    """Multi-source BFS inside `members`: node -> (distance, kernel of the nearest source)."""
    reached: Dict[int, Tuple[int, str]] = {n: (0, k) for n, k in sources.items()}
    queue = deque(sources)
    while queue:
        node = queue.popleft()
        dist, kernel = reached[node]
        for nxt in edges[node]:
            if nxt in members and nxt not in reached:
                reached[nxt] = (dist + 1, kernel)
                queue.append(nxt)
    return reached


def assign_nodes(mapping: NodeMapping, kernel_time: Mapping[str, float], op_types: Sequence[str],
                 preds: Sequence[Sequence[int]]) -> Dict[int, str]:
    """Original node index -> the kernel doing its work (nodes of folded groups are left out)."""
    succs: List[List[int]] = [[] for _ in preds]
    for node, before in enumerate(preds):
        for p in before:
            succs[p].append(node)
    op_of = {o.name: o.op_type for o in mapping.optimized}
    result: Dict[int, str] = {}
    for group in mapping.groups:
        if not group.kernels or not group.original or group.kind == "nested":
            continue
        members = set(group.original)
        sources: Dict[int, str] = {}
        for kernel in sorted(group.kernels, key=lambda k: -kernel_time.get(k, 0.0)):
            node = mapping.anchor.get(kernel)
            if node is not None and node in members:
                sources.setdefault(node, kernel)
        main = _main_kernel(group, kernel_time, op_of)
        if not sources:
            result.update({i: main for i in group.original})
            continue
        # Downstream: the anchor reached by following consumers = BFS from anchors over predecessors.
        down = _spread(sources, members, preds)
        up = _spread(sources, members, succs)
        for i in group.original:
            result[i] = sources.get(i) or _choose(op_types[i], down.get(i), up.get(i)) or main
    return result


def _choose(op: str, down: Optional[Tuple[int, str]], up: Optional[Tuple[int, str]]) -> Optional[str]:
    first, second = (up, down) if op == "QuantizeLinear" else (down, up)
    found = first or second
    return found[1] if found else None


def node_weights(mapping: NodeMapping, assigned: Mapping[int, str], kernel_time: Mapping[str, float],
                 n_nodes: int) -> List[float]:
    """Per original node, the measured time of the kernels that ran it (for the critical path).

    A kernel's time sits on the last (in topological order) of the nodes assigned to it, where
    its work completes; a kernel with no node of its own (a layout or reshape helper) adds to its
    group's last node. Summed over nodes this is the summed kernel time (nested kernels aside).
    """
    last_of: Dict[str, int] = {}
    for node, kernel in assigned.items():
        if node > last_of.get(kernel, -1):
            last_of[kernel] = node
    weights = [0.0] * n_nodes
    for group in mapping.groups:
        if not group.original or group.kind == "nested":
            continue
        fallback = max(group.original)
        for kernel in group.kernels:
            weights[last_of.get(kernel, fallback)] += kernel_time.get(kernel, 0.0)
    return weights


def kernel_cells(mapping: NodeMapping, assigned: Mapping[int, str], kernel_time: Mapping[str, float]
                 ) -> Dict[str, List[int]]:
    """Kernel -> original nodes it does; helper kernels (no node of their own) share their group's
    main kernel's nodes, so a comparison can join them with it."""
    cells: Dict[str, List[int]] = {}
    for node, kernel in assigned.items():
        cells.setdefault(kernel, []).append(node)
    op_of = {o.name: o.op_type for o in mapping.optimized}
    for group in mapping.groups:
        if not group.kernels or group.kind == "nested":
            continue
        if not group.original:  # added by the runtime: a unit of its own, matched with nothing
            cells.update({k: [] for k in group.kernels})
            continue
        main = _main_kernel(group, kernel_time, op_of)
        for kernel in group.kernels:
            if kernel not in cells:
                cells[kernel] = list(cells.get(main, group.original))
    return cells
