"""Static facts of one node: attributes, typed inputs/outputs, parameters, Q/DQ and QLinear parameters."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx

from ..core.graph import ModelGraph, NodeInfo
from ..core.scope_tree import ScopeTree
from ..core.scopes import scope_name
from ..core.weights import initializer_array
from ..results.inspect import NodeFacts, ParamSummary, QuantFact
from .build import tensor_fact

# op -> [(role, scale input index, zero-point input index)]
QUANT_INPUTS: Dict[str, List[Tuple[str, int, int]]] = {
    "QuantizeLinear": [("output", 1, 2)],
    "DequantizeLinear": [("input", 1, 2)],
    "QLinearConv": [("input", 1, 2), ("weight", 4, 5), ("output", 6, 7)],
    "QLinearMatMul": [("input", 1, 2), ("weight", 4, 5), ("output", 6, 7)],
    "QGemm": [("input", 1, 2), ("weight", 4, 5), ("output", 7, 8)],
    "QLinearAdd": [("input", 1, 2), ("input_b", 4, 5), ("output", 6, 7)],
    "QLinearMul": [("input", 1, 2), ("input_b", 4, 5), ("output", 6, 7)],
    "QLinearGlobalAveragePool": [("input", 1, 2), ("output", 3, 4)],
    "QLinearAveragePool": [("input", 1, 2), ("output", 3, 4)],
    "QLinearSigmoid": [("input", 1, 2), ("output", 3, 4)],
    "QLinearLeakyRelu": [("input", 1, 2), ("output", 3, 4)],
    "QLinearSoftmax": [("input", 1, 2), ("output", 3, 4)],
}
_MAX_ATTR = 120


def _constant_value(graph: ModelGraph, tensor: str) -> Optional[np.ndarray]:
    init = graph.initializer(tensor)
    if init is not None:
        return initializer_array(graph, init)
    producer = graph.producer.get(tensor)
    if producer is not None and producer.op_type == "Constant":
        value = graph.node_attribute(producer.name, "value")
        if isinstance(value, onnx.TensorProto):
            return onnx.numpy_helper.to_array(value)
    return None


def _summary(graph: ModelGraph, node: NodeInfo, index: int) -> Optional[ParamSummary]:
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    tensor = node.inputs[index]
    value = _constant_value(graph, tensor)
    if value is None or value.size == 0:
        return ParamSummary(tensor=tensor, count=0)
    flat = value.astype(np.float64).ravel()
    return ParamSummary(tensor=tensor, count=int(flat.size), min=float(flat.min()), max=float(flat.max()),
                        dtype=str(value.dtype))


def quant_facts(graph: ModelGraph, node: NodeInfo) -> List[QuantFact]:
    """Scale and zero point of each quantised tensor of a Q/DQ or QLinear node (per-channel: min/max/count)."""
    facts: List[QuantFact] = []
    axis = graph.node_attribute(node.name, "axis", None)
    for role, scale_at, zero_at in QUANT_INPUTS.get(node.op_type, []):
        scale = _summary(graph, node, scale_at)
        if scale is None:
            continue
        facts.append(QuantFact(role=role, scale=scale, zero_point=_summary(graph, node, zero_at),
                               axis=int(axis) if isinstance(axis, int) and scale.count > 1 else None))
    return facts


def _attribute_text(value: object) -> str:
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    elif isinstance(value, onnx.TensorProto):
        text = f"tensor {onnx.helper.tensor_dtype_to_np_dtype(value.data_type)}{list(value.dims)}"
    elif isinstance(value, onnx.GraphProto):
        text = f"graph '{value.name}' ({len(value.node)} nodes)"
    elif isinstance(value, list):
        text = "[" + ", ".join(_attribute_text(v) for v in value) + "]"
    else:
        text = str(value)
    return text if len(text) <= _MAX_ATTR else text[:_MAX_ATTR - 1] + "…"


def node_facts(graph: ModelGraph, tree: ScopeTree, name: str) -> NodeFacts:
    """Everything static about the node `name` (its producers and consumers by name)."""
    node = graph.node_by_name[name]
    proto = graph.node_proto(name)
    attributes = {a.name: _attribute_text(onnx.helper.get_attribute_value(a)) for a in proto.attribute}
    params = 0
    for tensor in node.inputs:
        init = graph.initializer(tensor) if tensor in graph.initializer_names else None
        if init is not None:
            count = 1
            for d in init.dims:
                count *= int(d)
            params += count
    producers = list(dict.fromkeys(graph.producer[t].name for t in node.all_inputs if t in graph.producer))
    consumers = list(dict.fromkeys(c.name for t in node.outputs for c in graph.consumers.get(t, [])))
    return NodeFacts(name=name, op_type=node.op_type, domain=node.domain, scope=scope_name(tree.node_path[name]),
                     order=node.order, attributes=attributes,
                     inputs=[tensor_fact(graph, t) for t in node.inputs if t],
                     outputs=[tensor_fact(graph, t) for t in node.outputs if t], params=params,
                     flops=tree.node_flops.get(name), quant=quant_facts(graph, node),
                     producers=producers, consumers=consumers)
