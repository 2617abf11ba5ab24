"""Activation memory by liveness, parameters, and onnxruntime's per-node memory statistics.

Liveness walks the original graph in execution order: a node's outputs are allocated when it
runs and the peak is read before its inputs are freed (a kernel needs both at once); a tensor is
freed after its last consumer; graph inputs live from the start, graph outputs to the end.
Weights (initializers) are parameters, not activations. Buffer reuse inside onnxruntime can
only lower the real figure towards the largest live set, never below it.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.graph import ModelGraph
from ..core.types import format_shape, numpy_dtype_for
from ..results.profile import LiveTensor, MemoryProfile, NodeMemory
from .shapes import RuntimeTensor

_HASH_SUFFIX = re.compile(r"_\d{10,}$")
"""onnxruntime appends '_<64-bit hash>' to node names in its memory CSV; node names' own short
numeric suffixes ('conv_12') are kept."""


def liveness(graph: ModelGraph, tensors: Mapping[str, RuntimeTensor], order: Optional[Sequence[int]] = None,
             top: int = 10) -> Tuple[int, int, List[LiveTensor], int, int]:
    """(peak bytes, node index at the peak (-1: before any node), largest tensors live there,
    sum of all activations, tensors of unknown size)."""
    nodes = graph.nodes
    order = list(order) if order is not None else list(range(len(nodes)))
    position = {i: step for step, i in enumerate(order)}
    constant = set(graph.initializer_names)
    outputs = set(graph.output_names)
    last_use: Dict[str, int] = {}
    for i in order:
        for t in nodes[i].all_inputs:
            last_use[t] = position[i]
    size: Dict[str, int] = {}
    unknown = 0

    def nbytes(name: str) -> int:
        nonlocal unknown
        tensor = tensors.get(name)
        value = tensor.nbytes if tensor is not None else None
        if value is None:
            unknown += 1
            return 0
        return value

    live: Dict[str, int] = {}
    for name in graph.input_names:
        live[name] = size[name] = nbytes(name)
    current = sum(live.values())
    peak, peak_step, peak_live = current, -1, dict(live)
    total = current
    for step, i in enumerate(order):
        for t in nodes[i].outputs:
            if t and t not in live and t not in constant:
                live[t] = size[t] = nbytes(t)
                current += size[t]
                total += size[t]
        if current > peak:
            peak, peak_step, peak_live = current, step, dict(live)
        for t in set(nodes[i].all_inputs) | set(nodes[i].outputs):
            if t in live and t not in outputs and last_use.get(t, step) <= step:
                current -= live.pop(t)
    largest = sorted(peak_live.items(), key=lambda kv: -kv[1])[:top]
    described = [LiveTensor(name=name, bytes=b, shape=_shape_text(tensors.get(name)),
                            producer=graph.producer[name].name if name in graph.producer else "(graph input)")
                 for name, b in largest]
    return peak, (order[peak_step] if peak_step >= 0 else -1), described, total, unknown


def _shape_text(tensor: Optional[RuntimeTensor]) -> str:
    return format_shape(tensor.shape) if tensor is not None else "?"


def parameters(graph: ModelGraph) -> Tuple[int, int]:
    """(bytes, element count) of the top-level initializers, read from their headers only."""
    total_bytes = count = 0
    for init in graph.model.graph.initializer:
        n = 1
        for d in init.dims:
            n *= int(d)
        count += n
        dtype = numpy_dtype_for(init.data_type)
        total_bytes += n * (dtype.itemsize if dtype is not None and dtype.kind != "O" else 1)
    return total_bytes, count


def read_node_memory_stats(path: Path) -> List[NodeMemory]:
    """Rows of onnxruntime's node memory CSV (largest first); names lose the hash onnxruntime appends."""
    if not path.is_file():
        return []
    rows: List[NodeMemory] = []
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        for row in csv.reader(handle):
            if not row or row[0].startswith("#") or len(row) < 5:
                continue
            name = _HASH_SUFFIX.sub("", row[0])
            try:
                values = [int(v) for v in row[1:5]]
            except ValueError:
                continue
            rows.append(NodeMemory(node=name, input_bytes=values[0], initializer_bytes=values[1],
                                   dynamic_output_bytes=values[2], temp_bytes=values[3]))
    rows.sort(key=lambda r: -(r.dynamic_output_bytes + r.temp_bytes))
    return rows


def memory_profile(graph: ModelGraph, tensors: Mapping[str, RuntimeTensor], *, arena_peak: Optional[int] = None,
                   node_stats: Sequence[NodeMemory] = (), order: Optional[Sequence[int]] = None,
                   top: int = 10) -> MemoryProfile:
    """Peak live activations and what is live there, parameters, and onnxruntime's own figures."""
    peak, index, live, total, unknown = liveness(graph, tensors, order, top)
    param_bytes, param_count = parameters(graph)
    node = graph.nodes[index].name if index >= 0 else "(graph inputs)"
    return MemoryProfile(peak_bytes=peak, peak_node=node, peak_step=index, live_at_peak=live,
                         activation_bytes=total, parameter_bytes=param_bytes, parameter_count=param_count,
                         unknown_tensors=unknown, arena_peak_bytes=arena_peak, node_stats=list(node_stats))
