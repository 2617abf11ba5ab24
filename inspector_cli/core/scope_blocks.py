"""Structural scopes for models whose node names carry no hierarchy (`Conv_35`, `p2o.Conv.12`).

In topological order, a boundary between two nodes is a *cut* when the fewest activations cross
it: the main stream of a residual network or a transformer is one tensor between blocks and two
or more inside them (the skip connection). Long-lived side inputs (an attention mask read by
every layer) would hide every cut, so tensors alive over more than a tenth of the model are not
counted. The segments between cuts are blocks; single-node segments (the Relu after a residual
Add, a LayerNorm between sublayers) join the block before them, and a run of them at the start
is one block of its own (the stem). Blocks with the same op sequence share a `pattern` letter.
Linear in the number of nodes and edges.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from .cost import ELEMENTWISE, PER_ELEMENT
from .graph import ModelGraph, NodeInfo

TRANSPARENT = frozenset({"QuantizeLinear", "DequantizeLinear", "Constant"})
"""Ops that take the scope of the node they serve: a quantiser inserts Q/DQ pairs with names of its
own (`fc.weight_DequantizeLinear`), which must neither make scopes nor break structural blocks."""

Path = Tuple[str, ...]


def _canonical(graph: ModelGraph) -> Dict[str, str]:
    """tensor -> the tensor it carries through Q/DQ and Constant nodes (a DQ output is its Q input)."""
    alias: Dict[str, str] = {}
    for node in graph.nodes:
        if node.op_type in TRANSPARENT and node.op_type != "Constant" and node.inputs:
            source = alias.get(node.inputs[0], node.inputs[0])
            for out in node.outputs:
                alias[out] = source
    return alias


def _live_counts(graph: ModelGraph, core: List[NodeInfo]) -> List[int]:
    """live[i]: activations produced at or before core node i and read after it (or graph outputs)."""
    n = len(core)
    alias = _canonical(graph)
    constants = {out for node in graph.nodes if node.op_type == "Constant" for out in node.outputs}
    start: Dict[str, int] = {}
    end: Dict[str, int] = {}
    for i, node in enumerate(core):
        for out in node.outputs:
            start[out] = i
        for tensor in node.all_inputs:
            source = alias.get(tensor, tensor)
            if source in graph.initializer_names or source in constants or source not in start:
                continue  # weights, constants and graph inputs mark no boundary
            end[source] = max(end.get(source, -1), i)
    for tensor in graph.output_names:
        source = alias.get(tensor, tensor)
        if source in start:
            end[source] = n
    delta = [0] * (n + 1)
    long_span = max(100, n // 10)
    for tensor, last in end.items():
        first = start[tensor]
        if last - first > long_span:
            continue  # side inputs (an attention mask) are alive everywhere: they mark no boundary
        delta[first] += 1
        delta[last] -= 1
    live, running = [], 0
    for i in range(n):
        running += delta[i]
        live.append(running)
    return live


def structural_scopes(graph: ModelGraph) -> Tuple[Dict[str, Path], Dict[Path, str]]:
    """node name -> ('block<i>',) for every node that is not Q/DQ or Constant; each block path -> 'block'."""
    nodes = [node for node in graph.nodes if node.op_type not in TRANSPARENT]
    if not nodes:
        return {node.name: () for node in graph.nodes}, {}
    live = _live_counts(graph, nodes)
    inner = live[:-1]
    floor = min(inner) if inner else 0
    segments: List[List[int]] = [[]]
    for i in range(len(nodes)):
        segments[-1].append(i)
        if i < len(nodes) - 1 and live[i] <= floor:
            segments.append([])
    blocks: List[List[int]] = []
    chain: List[bool] = []  # block made only of single-node segments (a stem or a tail of the model)
    tailed: List[bool] = []  # a real block that already took its one trailing node
    for segment in segments:
        tail_op = nodes[segment[0]].op_type in ELEMENTWISE or nodes[segment[0]].op_type in PER_ELEMENT
        if len(segment) > 1 or not blocks or (not chain[-1] and (tailed[-1] or not tail_op)):
            blocks.append(list(segment))
            chain.append(len(segment) == 1)
            tailed.append(False)
        else:  # one element-wise node ending the block before (Relu, LayerNorm), or more of a chain
            blocks[-1].extend(segment)
            tailed[-1] = True
    width = len(str(len(blocks) - 1))
    paths: Dict[str, Path] = {node.name: () for node in graph.nodes}
    kinds: Dict[Path, str] = {}
    for index, block in enumerate(blocks):
        path = (f"block{index:0{width}d}",)
        kinds[path] = "block"
        for i in block:
            paths[nodes[i].name] = path
    return paths, kinds


def block_patterns(graph: ModelGraph, paths: Dict[str, Path]) -> Dict[Path, str]:
    """Each block's op sequence as a letter: blocks with the same letter repeat the same structure."""
    sequences: Dict[Path, List[str]] = {}
    for node in graph.nodes:
        if node.op_type in TRANSPARENT:
            continue
        sequences.setdefault(paths[node.name], []).append(node.op_type)
    letters: Dict[Tuple[str, ...], str] = {}
    result: Dict[Path, str] = {}
    for path, ops in sequences.items():
        key = tuple(ops)
        if key not in letters:
            index = len(letters)
            letters[key] = chr(ord("A") + index) if index < 26 else f"P{index}"
        result[path] = letters[key]
    return result
