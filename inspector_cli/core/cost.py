"""Static cost of original nodes from run-time shapes: FLOPs and MACs.

Conventions (documented in the README): a multiply-add is one MAC and two FLOPs; a bias adds one
FLOP per output element; element-wise ops cost one FLOP per output element (transcendentals
too); normalisations a few per element (BatchNormalization 2, LayerNormalization-like 5 per
element, Softmax 3); reductions and pooling one per input element read. Data movement (Reshape,
Transpose, Gather, Concat, Cast...) costs no FLOPs. Quantize/Dequantize count 2 per element.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple

from .graph import ModelGraph, NodeInfo

Shape = Tuple[int, ...]
ShapeOf = Callable[[str], Optional[Shape]]


@dataclass(frozen=True)
class NodeCost:
    flops: int
    macs: int = 0


ELEMENTWISE = {
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Sigmoid", "HardSigmoid",
    "HardSwish", "Tanh", "Erf", "Exp", "Log", "Neg", "Abs", "Clip", "Max", "Min", "Sum", "Mean", "Where",
    "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "Softplus",
    "Softsign", "Mish", "Sin", "Cos", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or",
    "Not", "Xor", "Mod", "BitShift", "IsNaN", "IsInf", "ThresholdedRelu", "Celu", "Shrink", "Swish", "BiasAdd",
}
PER_ELEMENT = {"BatchNormalization": 2, "QuantizeLinear": 2, "DequantizeLinear": 2, "DynamicQuantizeLinear": 3,
               "Softmax": 3, "LogSoftmax": 3, "LayerNormalization": 5, "SimplifiedLayerNormalization": 4,
               "SkipLayerNormalization": 6, "SkipSimplifiedLayerNormalization": 5, "InstanceNormalization": 5,
               "GroupNormalization": 5, "LpNormalization": 3, "MeanVarianceNormalization": 5}
READS_INPUT = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "GlobalAveragePool", "GlobalMaxPool",
               "GlobalLpPool", "ArgMax", "ArgMin", "CumSum", "TopK"}


def _count(shape: Optional[Shape]) -> Optional[int]:
    if shape is None:
        return None
    total = 1
    for d in shape:
        total *= d
    return total


def _conv(graph: ModelGraph, node: NodeInfo, shape_of: ShapeOf) -> Optional[NodeCost]:
    x, w, y = shape_of(node.inputs[0]), shape_of(node.inputs[1]), shape_of(node.outputs[0])
    if x is None or w is None or y is None or len(w) < 3:
        return None
    kernel = _count(w[2:]) or 1  # the weight's dim 1 is already C_in/group (C_out/group for ConvTranspose)
    if node.op_type == "ConvTranspose":
        # Every input pixel scatters a C_out/group x kernel patch.
        macs = x[0] * x[1] * (_count(x[2:]) or 1) * w[1] * kernel
    else:
        macs = (_count(y) or 0) * w[1] * kernel
    bias = (_count(y) or 0) if len(node.inputs) > 2 and node.inputs[2] else 0
    return NodeCost(2 * macs + bias, macs)


def _matmul_dims(a: Shape, b: Shape) -> Optional[Tuple[int, int, int, int]]:
    """(batch, M, K, N) of numpy-style matmul broadcasting."""
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if len(a2) < 2 or len(b2) < 2:
        return None
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch_a, batch_b = a2[:-2], b2[:-2]
    width = max(len(batch_a), len(batch_b))
    batch = 1
    for i in range(width):
        da = batch_a[i - width + len(batch_a)] if i - width + len(batch_a) >= 0 else 1
        db = batch_b[i - width + len(batch_b)] if i - width + len(batch_b) >= 0 else 1
        batch *= max(da, db)
    return batch, m, k, n


def _matmul(graph: ModelGraph, node: NodeInfo, shape_of: ShapeOf) -> Optional[NodeCost]:
    a, b = shape_of(node.inputs[0]), shape_of(node.inputs[1])
    dims = _matmul_dims(a, b) if a is not None and b is not None else None
    if dims is None:
        return None
    batch, m, k, n = dims
    macs = batch * m * k * n
    return NodeCost(2 * macs, macs)


def _gemm(graph: ModelGraph, node: NodeInfo, shape_of: ShapeOf) -> Optional[NodeCost]:
    a, b = shape_of(node.inputs[0]), shape_of(node.inputs[1])
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return None
    m, k = (a[1], a[0]) if graph.node_attribute(node.name, "transA", 0) else a
    n = b[0] if graph.node_attribute(node.name, "transB", 0) else b[1]
    macs = m * k * n
    bias = m * n if len(node.inputs) > 2 and node.inputs[2] else 0
    return NodeCost(2 * macs + bias, macs)


def _einsum(graph: ModelGraph, node: NodeInfo, shape_of: ShapeOf) -> Optional[NodeCost]:
    raw = graph.node_attribute(node.name, "equation", b"") or b""
    spec = (raw.decode() if isinstance(raw, bytes) else str(raw)).replace(" ", "")
    lhs, _, rhs = spec.partition("->")
    terms = lhs.split(",")
    if "." in spec or len(terms) != len(node.inputs):
        return None
    sizes: Dict[str, int] = {}
    for term, tensor in zip(terms, node.inputs):
        shape = shape_of(tensor)
        if shape is None or len(shape) != len(term):
            return None
        for letter, dim in zip(term, shape):
            sizes[letter] = max(sizes.get(letter, 1), dim)
    if not _EINSUM_OUT.fullmatch(rhs or ""):
        return None
    total = _count(tuple(sizes.values())) or 0
    contracted = any(letter not in rhs for letter in sizes)
    if len(terms) > 1 or contracted:
        return NodeCost(2 * total, total)
    return NodeCost(total)


_EINSUM_OUT = re.compile(r"[A-Za-z]*")


def _pool(graph: ModelGraph, node: NodeInfo, shape_of: ShapeOf) -> Optional[NodeCost]:
    y = shape_of(node.outputs[0])
    kernel = graph.node_attribute(node.name, "kernel_shape", None)
    if y is None or not isinstance(kernel, list):
        return None
    return NodeCost((_count(y) or 0) * (_count(tuple(int(k) for k in kernel)) or 1))


def node_cost(graph: ModelGraph, node: NodeInfo, shape_of: ShapeOf) -> Optional[NodeCost]:
    """FLOPs/MACs of one original node, or None when its shapes are unknown."""
    op = node.op_type
    if not node.outputs or not node.inputs:
        return NodeCost(0)
    try:
        if op in ("Conv", "ConvTranspose") and len(node.inputs) > 1:
            return _conv(graph, node, shape_of)
        if op in ("MatMul", "MatMulInteger") and len(node.inputs) > 1:
            return _matmul(graph, node, shape_of)
        if op == "Gemm":
            return _gemm(graph, node, shape_of)
        if op == "Einsum":
            return _einsum(graph, node, shape_of)
        if op in ("AveragePool", "MaxPool", "LpPool"):
            return _pool(graph, node, shape_of)
        if op in READS_INPUT:
            n = _count(shape_of(node.inputs[0]))
            return None if n is None else NodeCost(n)
        per = 1 if op in ELEMENTWISE else PER_ELEMENT.get(op)
        if per is None:
            return NodeCost(0)
        n = _count(shape_of(node.outputs[0]))
        return None if n is None else NodeCost(per * n)
    except (TypeError, ValueError, IndexError):
        return None


def model_costs(graph: ModelGraph, shape_of: ShapeOf) -> Sequence[Optional[NodeCost]]:
    """Cost of every top-level node, in `graph.nodes` order."""
    return [node_cost(graph, node, shape_of) for node in graph.nodes]
