"""The order in which the fallback plan measures its candidates, from `compare --layers --isolate` rows.

Two signals, interleaved (first of one, first of the other, second of one, ...):
- own error: 1 - the layer's isolated cosine (B's producing subgraph fed A's tensors);
- error growth: how much the layer's accumulated error (1 - its data-set cosine) exceeds that of the
  paired tensors it is computed from. A layer whose small own error is amplified downstream of it
  reads low by the first and high by the second: the zoo's int8 GPT-2 block, whose Softmax has an
  isolated cosine of 0.99996 but an accumulated one of 0.963, and keeping its two Softmaxes in float
  is what reaches the halfway target (issue 29).
Only the order changes: the sensitivity phase still measures each candidate's gain on the outputs.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set

import onnx

from .fallback import own_errors_from_layers


def _error(metrics: Optional[Mapping[str, object]]) -> Optional[float]:
    cosine = (metrics or {}).get("cosine")
    if cosine is None:
        return None
    value = 1.0 - float(cosine)  # type: ignore[arg-type]
    return value if value == value else None  # NaN: no ranking signal


def error_growth(fp32: onnx.ModelProto, rows: Iterable[object]) -> Dict[str, float]:
    """B tensor name -> growth of the accumulated error at that layer over its nearest paired ancestors
    in A's graph (graph inputs and weights count as error-free)."""
    rows = list(rows)
    accumulated = {r.name: _error(r.dataset) for r in rows}  # type: ignore[attr-defined]
    producer = {o: n for n in fp32.graph.node for o in n.output if o}
    growth: Dict[str, float] = {}
    for row in rows:
        own = accumulated.get(row.name)  # type: ignore[attr-defined]
        if own is None:
            continue
        upstream = 0.0
        node = producer.get(row.name)  # type: ignore[attr-defined]
        stack: List[str] = list(node.input) if node is not None else []
        seen: Set[str] = set()
        while stack:
            tensor = stack.pop()
            if not tensor or tensor in seen:
                continue
            seen.add(tensor)
            if tensor in accumulated:
                upstream = max(upstream, accumulated[tensor] or 0.0)
                continue
            parent = producer.get(tensor)
            if parent is not None:
                stack.extend(parent.input)
        growth[row.name_b] = own - upstream  # type: ignore[attr-defined]
    return growth


def interleave(*rankings: Sequence[str]) -> List[str]:
    """One order from several: their first items, then their second items, ..., each node once."""
    order: List[str] = []
    for k in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if k < len(ranking) and ranking[k] not in order:
                order.append(ranking[k])
    return order


def candidate_scores(fp32: onnx.ModelProto, qdq: onnx.ModelProto, rows: Iterable[object]) -> Optional[Dict[str, float]]:
    """node of `qdq` -> score (larger first) for `plan_fallback(own_errors=...)`: the own-error order of
    the isolated layer rows interleaved with their error-growth order; None without isolated rows."""
    rows = [r for r in rows if getattr(r, "isolated", None)]
    own = own_errors_from_layers(qdq, [(r.name_b, r.isolated.get("cosine")) for r in rows])  # type: ignore[attr-defined]
    if not own:
        return None
    growth = own_errors_from_layers(qdq, [(name, 1.0 - g) for name, g in error_growth(fp32, rows).items()])
    order = interleave(sorted(own, key=lambda n: -own[n]), sorted(growth, key=lambda n: -growth[n]))
    return {node: float(len(order) - k) for k, node in enumerate(order)}
