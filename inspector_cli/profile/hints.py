"""Graph patterns that cost performance (core/patterns.py), priced with the measured time."""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

from ..core.graph import ModelGraph
from ..core.patterns import find_patterns
from ..results.profile import Hint
from .mapping import NodeMapping

PROFILE_PATTERNS = ("conv-bn", "transpose-pair", "reshape-chain", "cast-roundtrip", "identity")


def priced_hints(graph: ModelGraph, mapping: NodeMapping, node_kernel: Mapping[int, str],
                 kernel_time: Mapping[str, float], total_us: float, opt_level: str,
                 patterns: Sequence[str] = PROFILE_PATTERNS) -> List[Hint]:
    """Each pattern match with the time of the kernels doing its nodes' work, most expensive first.

    When onnxruntime already fused or removed the nodes (one group, fused or folded), the hint
    says so: the cost shows on runtimes that do not do the same.
    """
    position: Dict[str, int] = {node.name: i for i, node in enumerate(graph.nodes)}
    hints: List[Hint] = []
    for match in find_patterns(graph, patterns):
        indices = [position[n] for n in match.nodes if n in position]
        kernels = {node_kernel[i] for i in indices if i in node_kernel}
        time_us = sum(kernel_time.get(k, 0.0) for k in kernels)
        groups = {mapping.group_of_node.get(n) for n in match.nodes}
        kinds = {mapping.groups[g].kind for g in groups if g is not None}
        handled = len(groups) == 1 and bool(kinds & {"fused", "folded"}) or kinds == {"folded"}
        message = match.message
        if handled:
            message += f" (onnxruntime already does this at opt level {opt_level}; other runtimes may not)"
        hints.append(Hint(pattern=match.pattern, nodes=list(match.nodes), message=message, time_us=time_us,
                          share=time_us / total_us if total_us > 0 else 0.0, fused_by_runtime=handled))
    hints.sort(key=lambda h: (-h.time_us, h.pattern))
    return hints
