"""The order in which the fallback plan measures its candidates, from `compare --layers --isolate` rows.

Three signals, interleaved (first of each, then second of each, ...):
- own error: 1 - the layer's isolated cosine (B's producing subgraph fed A's tensors);
- error growth: how much the layer's accumulated error (1 - its data-set cosine) exceeds that of the
  paired tensors it is computed from. A layer whose small own error is amplified downstream of it
  reads low by the first and high by the second: the zoo's int8 GPT-2 block, whose Softmax has an
  isolated cosine of 0.99996 but an accumulated one of 0.963, and keeping its two Softmaxes in float
  is what reaches the halfway target (issue 29);
- reach: the own error scaled by how much of a layer's accumulated error is still there at the outputs,
  min(1, output error / accumulated error at the layer). A CNN attenuates its errors on the way down
  (the zoo's int8 MobileNetV2: accumulated errors of 2-4e-3 inside, 5.4e-4 at the logits), so a
  classifier Gemm whose own error (1.1e-4) lands in the logits one to one matters more than a 1x1
  Conv deep inside with a larger own error (1.5e-4); by the first two signals it was 15th, after the
  sensitivity budget, and the halfway target was missed with 10 nodes in float that it reaches with 3.
Only the order changes: the sensitivity phase still measures each candidate's gain on the outputs.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set

import onnx

from .fallback import own_errors_from_layers
from .qdq_patch import producer_through_qdq


def _error(metrics: Optional[Mapping[str, object]]) -> Optional[float]:
    cosine = (metrics or {}).get("cosine")
    if cosine is None:
        return None
    value = 1.0 - float(cosine)  # type: ignore[arg-type]
    return value if value == value else None  # NaN: no ranking signal


def _paired_ancestors(producer: Mapping[str, onnx.NodeProto], tensor: str, paired: Mapping[str, object]) -> List[str]:
    """The paired tensors (A names) nearest upstream of `tensor` in A's graph: where a walk up from its
    producer's inputs stops."""
    found: List[str] = []
    node = producer.get(tensor)
    stack: List[str] = list(node.input) if node is not None else []
    seen: Set[str] = set()
    while stack:
        name = stack.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        if name in paired:
            found.append(name)
            continue
        parent = producer.get(name)
        if parent is not None:
            stack.extend(parent.input)
    return found


def _ancestors(fp32: onnx.ModelProto, rows: Sequence[object]) -> Dict[str, List[str]]:
    """A name of each row -> its nearest paired ancestors (A names), one walk per row."""
    producer = {o: n for n in fp32.graph.node for o in n.output if o}
    paired = {r.name for r in rows}  # type: ignore[attr-defined]
    return {r.name: _paired_ancestors(producer, r.name, paired) for r in rows}  # type: ignore[attr-defined]


def error_growth(fp32: onnx.ModelProto, rows: Iterable[object],
                 ancestors: Optional[Mapping[str, List[str]]] = None) -> Dict[str, float]:
    """B tensor name -> growth of the accumulated error at that layer over its nearest paired ancestors
    in A's graph (graph inputs and weights count as error-free). `ancestors`: `_ancestors(fp32, rows)`."""
    rows = list(rows)
    ancestors = ancestors if ancestors is not None else _ancestors(fp32, rows)
    accumulated = {r.name: _error(r.dataset) for r in rows}  # type: ignore[attr-defined]
    growth: Dict[str, float] = {}
    for row in rows:
        own = accumulated.get(row.name)  # type: ignore[attr-defined]
        if own is None:
            continue
        upstream = max((accumulated[t] or 0.0 for t in ancestors[row.name]), default=0.0)  # type: ignore[attr-defined]
        growth[row.name_b] = own - upstream  # type: ignore[attr-defined]
    return growth


def growth_sources(fp32: onnx.ModelProto, rows: Iterable[object],
                   ancestors: Optional[Mapping[str, List[str]]] = None) -> Dict[str, List[str]]:
    """B tensor name -> the B names of its nearest paired ancestors: where the error a layer amplifies
    comes from. The zoo's int8 wav2vec2: a decomposed LayerNorm divides by sqrt(var + eps), and the
    quantiser of var + eps (isolated cosine 0.99998) rounds small variances to zero; the error grows at
    the Div, a layer of its own error ~1e-5, so neither the Div's candidate nor the own-error order held
    the Add whose exclusion alone lifts the output cosine 0.573 -> 0.824 (issue 29)."""
    rows = list(rows)
    ancestors = ancestors if ancestors is not None else _ancestors(fp32, rows)
    b_name = {r.name: r.name_b for r in rows}  # type: ignore[attr-defined]
    return {row.name_b: [b_name[t] for t in ancestors[row.name]] for row in rows}  # type: ignore[attr-defined]


def reach(fp32: onnx.ModelProto, rows: Iterable[object]) -> Dict[str, float]:
    """B tensor name -> isolated error x min(1, output error / accumulated error at the layer), the
    output error being the largest accumulated error over the rows of A's graph outputs (none: {})."""
    rows = list(rows)
    outputs = {o.name for o in fp32.graph.output}
    output_errors = [e for r in rows if r.name in outputs  # type: ignore[attr-defined]
                     for e in [_error(r.dataset)] if e is not None]  # type: ignore[attr-defined]
    if not output_errors:
        return {}
    at_outputs = max(output_errors)
    scores: Dict[str, float] = {}
    for row in rows:
        own, accumulated = _error(row.isolated), _error(row.dataset)  # type: ignore[attr-defined]
        if own is None or accumulated is None:
            continue
        kept = 1.0 if accumulated <= at_outputs else at_outputs / accumulated
        scores[row.name_b] = own * kept  # type: ignore[attr-defined]
    return scores


def interleave(*rankings: Sequence[str]) -> List[str]:
    """One order from several: their first items, then their second items, ..., each node once."""
    order: List[str] = []
    for k in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if k < len(ranking) and ranking[k] not in order:
                order.append(ranking[k])
    return order


GROWTH_SOURCES = 3
"""The layers of largest error growth whose sources (nearest paired ancestors) are measured right after them."""


def candidate_scores(fp32: onnx.ModelProto, qdq: onnx.ModelProto, rows: Iterable[object]) -> Optional[Dict[str, float]]:
    """node of `qdq` -> score (larger first) for `plan_fallback(own_errors=...)`: the own-error order of
    the isolated layer rows interleaved with their error-growth and reach orders; None without isolated rows.
    In the growth order the `GROWTH_SOURCES` layers of largest growth are each followed by the producers of
    their sources (`growth_sources`)."""
    rows = [r for r in rows if getattr(r, "isolated", None)]
    own = own_errors_from_layers(qdq, [(r.name_b, r.isolated.get("cosine")) for r in rows])  # type: ignore[attr-defined]
    if not own:
        return None
    reached = own_errors_from_layers(qdq, [(name, 1.0 - r) for name, r in reach(fp32, rows).items()])
    order = interleave(sorted(own, key=lambda n: -own[n]), growth_order(fp32, qdq, rows),
                       sorted(reached, key=lambda n: -reached[n]))
    return {node: float(len(order) - k) for k, node in enumerate(order)}


def growth_order(fp32: onnx.ModelProto, qdq: onnx.ModelProto, rows: Iterable[object]) -> List[str]:
    """Nodes of `qdq` by the error growth of their layers, largest first; each of the `GROWTH_SOURCES`
    layers of largest growth followed by the producers of its sources."""
    rows = list(rows)
    ancestors = _ancestors(fp32, rows)  # one walk per row for both signals
    growth = error_growth(fp32, rows, ancestors)
    sources = growth_sources(fp32, rows, ancestors)
    growing: List[str] = []
    for k, tensor in enumerate(sorted(growth, key=lambda t: -growth[t])):
        growing += [tensor] + (sources.get(tensor, []) if k < GROWTH_SOURCES else [])
    return _producers(qdq, growing)


def _producers(qdq: onnx.ModelProto, tensors: Sequence[str]) -> List[str]:
    """The named nodes of `qdq` producing `tensors` (looked through Q/DQ pairs), in order, each once."""
    producer = {o: n for n in qdq.graph.node for o in n.output if o}
    nodes = (producer_through_qdq(producer, tensor) for tensor in tensors)
    return list(dict.fromkeys(node.name for node in nodes if node is not None and node.name))
