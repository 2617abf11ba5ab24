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

from .graph import ModelGraph

Path = Tuple[str, ...]


def _live_counts(graph: ModelGraph) -> List[int]:
    """live[i]: activations produced at or before node i and read after it (or graph outputs)."""
    n = len(graph.nodes)
    delta = [0] * (n + 1)
    constants = {out for node in graph.nodes if node.op_type == "Constant" for out in node.outputs}
    outputs = set(graph.output_names)
    long_span = max(100, n // 10)
    for tensor, consumers in graph.consumers.items():
        if tensor in graph.initializer_names or tensor in constants or not tensor:
            continue
        producer = graph.producer.get(tensor)
        start = producer.order if producer is not None else -1
        end = n if tensor in outputs else max(c.order for c in consumers)
        if end - start > long_span or start < 0:
            continue  # side inputs and graph inputs: alive everywhere, they mark no boundary
        delta[start] += 1
        delta[end] -= 1
    live, running = [], 0
    for i in range(n):
        running += delta[i]
        live.append(running)
    return live


def structural_scopes(graph: ModelGraph) -> Tuple[Dict[str, Path], Dict[Path, str]]:
    """node name -> ('block<i>',) and each block path -> 'block'."""
    nodes = graph.nodes
    if not nodes:
        return {}, {}
    live = _live_counts(graph)
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
        if len(segment) > 1 or not blocks or (not chain[-1] and tailed[-1]):
            blocks.append(list(segment))
            chain.append(len(segment) == 1)
            tailed.append(False)
        else:  # one node: the Relu/LayerNorm ending the block before, or more of a chain
            blocks[-1].extend(segment)
            tailed[-1] = True
    width = len(str(len(blocks) - 1))
    paths: Dict[str, Path] = {}
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
