"""Structural difference of two models: op types side by side, signatures, Q/DQ pairs, weight bytes.

Shared by `mi validate --against` and the structural summary of `mi compare`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from .graph import ModelGraph
from .protoutil import iter_tensors
from .types import TensorInfo, format_shape, stored_bytes

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


@dataclass(frozen=True)
class SignatureDiff:
    """One input or output whose presence, element type or shape differs between the models."""

    kind: str
    """'input' or 'output'."""
    name: str
    a: str
    """'float32 [1, 3, 224, 224]', or '-' when absent."""
    b: str


@dataclass(frozen=True)
class StructureDiff:
    op_counts: Dict[str, Tuple[int, int]]
    """op type -> (count in A, count in B), every op type of either model."""
    only_a: List[str]
    """Op types present in A only (e.g. Softmax replaced in B)."""
    only_b: List[str]
    signature: List[SignatureDiff]
    nodes: Tuple[int, int]
    qdq_pairs: Tuple[int, int]
    """QuantizeLinear -> DequantizeLinear pairs in each model."""
    initializer_bytes: Tuple[int, int]
    quantized_ops: Tuple[int, int] = (0, 0)
    """QOperator-format ops (QLinearConv, ...) in each model."""
    notes: List[str] = field(default_factory=list)


def op_histogram(graph: ModelGraph) -> Counter:
    return Counter(n.op_type if not n.domain or n.domain == "ai.onnx" else f"{n.domain}:{n.op_type}"
                   for n in graph.nodes)


def count_qdq_pairs(graph: ModelGraph) -> int:
    pairs = 0
    for node in graph.nodes:
        if node.op_type == "QuantizeLinear" and node.outputs:
            pairs += sum(1 for c in graph.consumers.get(node.outputs[0], []) if c.op_type == "DequantizeLinear")
    return pairs


def initializer_bytes(graph: ModelGraph) -> int:
    """Bytes of stored tensors, from their dims and type (external data is not read)."""
    total = 0
    for tensor in iter_tensors(graph.model.graph):
        total += stored_bytes(tensor.data_type, tensor.dims) or 0
    return total


def _describe(info: TensorInfo) -> str:
    return f"{info.dtype_name} {format_shape(info.shape)}"


def _signature(kind: str, side_a: List[TensorInfo], side_b: List[TensorInfo]) -> List[SignatureDiff]:
    a = {t.name: t for t in side_a}
    b = {t.name: t for t in side_b}
    diffs = []
    for name in list(a) + [n for n in b if n not in a]:
        left = _describe(a[name]) if name in a else "-"
        right = _describe(b[name]) if name in b else "-"
        if left != right:
            diffs.append(SignatureDiff(kind, name, left, right))
    return diffs


def structure_diff(a: ModelGraph, b: ModelGraph) -> StructureDiff:
    """Compare two models' structure (no inference)."""
    hist_a, hist_b = op_histogram(a), op_histogram(b)
    ops = sorted(set(hist_a) | set(hist_b), key=lambda op: (-(hist_a[op] + hist_b[op]), op))
    ignore = set(QDQ_OPS)
    only_a = [op for op in ops if hist_a[op] and not hist_b[op] and op not in ignore]
    only_b = [op for op in ops if hist_b[op] and not hist_a[op] and op not in ignore]
    quantized = lambda h: sum(v for k, v in h.items() if k.startswith("QLinear") or k in ("ConvInteger", "MatMulInteger"))  # noqa: E731
    notes = []
    for op in only_a:
        notes.append(f"{op} ({hist_a[op]}x) is absent from the second model")
    return StructureDiff(
        op_counts={op: (hist_a[op], hist_b[op]) for op in ops},
        only_a=only_a, only_b=only_b,
        signature=_signature("input", a.inputs, b.inputs) + _signature("output", a.outputs, b.outputs),
        nodes=(len(a.nodes), len(b.nodes)),
        qdq_pairs=(count_qdq_pairs(a), count_qdq_pairs(b)),
        initializer_bytes=(initializer_bytes(a), initializer_bytes(b)),
        quantized_ops=(quantized(hist_a), quantized(hist_b)),
        notes=notes,
    )
