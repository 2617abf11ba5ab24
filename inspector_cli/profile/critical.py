"""Critical path: the longest path through a DAG whose nodes carry measured latencies.

One pass in topological order: a node finishes at its own weight plus the latest finish of its
predecessors; the path is read back from the node that finishes last. O(nodes + edges).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from ..core.graph import ModelGraph


def longest_path(weights: Sequence[float], preds: Sequence[Sequence[int]]) -> Tuple[float, List[int]]:
    """(length, node indices on the path) for nodes given in topological order.

    `preds[i]` lists the indices of node i's predecessors, all smaller than i.
    """
    n = len(weights)
    if n == 0:
        return 0.0, []
    finish = [0.0] * n
    best = [-1] * n
    for i in range(n):
        start, via = 0.0, -1
        for p in preds[i]:
            if p >= i:  # only possible for nodes on a cycle (reported by graph loading); ignore the back edge
                continue
            if finish[p] > start or (via < 0 and finish[p] >= start):
                start, via = finish[p], p
        finish[i] = start + weights[i]
        best[i] = via
    end = max(range(n), key=finish.__getitem__)
    path = []
    node = end
    while node >= 0:
        path.append(node)
        node = best[node]
    path.reverse()
    return finish[end], path


def graph_predecessors(graph: ModelGraph) -> List[List[int]]:
    """Predecessor indices (positions in `graph.nodes`) of every top-level node."""
    position = {node.name: i for i, node in enumerate(graph.nodes)}
    preds: List[List[int]] = []
    for node in graph.nodes:
        found = {position[graph.producer[t].name] for t in node.all_inputs if t in graph.producer}
        found.discard(position[node.name])
        preds.append(sorted(found))
    return preds
