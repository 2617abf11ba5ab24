"""Models with intermediate tensors exposed as outputs, and subgraphs cut between tensors.

Exposed outputs carry the element type from shape inference when it is known and no shape (a
declared shape that inference got wrong would make onnxruntime warn or fail); when inference
cannot type a tensor, the output is declared untyped and onnxruntime types it from the graph.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Set

import onnx
from onnx import helper

from ..errors import SelectionError
from .graph import ModelGraph


def output_value_info(graph: ModelGraph, name: str) -> onnx.ValueInfoProto:
    """A graph-output declaration for tensor `name`: typed when known, untyped otherwise."""
    info = graph.tensor_info(name)
    if info.elem_type:
        return helper.make_tensor_value_info(name, info.elem_type, None)
    return onnx.ValueInfoProto(name=name)


def _check_known(graph: ModelGraph, names: Iterable[str]) -> List[str]:
    wanted = list(dict.fromkeys(names))
    known = set(graph.producer) | set(graph.input_names) | graph.initializer_names
    missing = [n for n in wanted if n not in known]
    if missing:
        raise SelectionError(f"{graph.display_name}: no tensor named {', '.join(repr(m) for m in missing[:5])}")
    return wanted


def serialized_with_outputs(graph: ModelGraph, names: Sequence[str], *, keep_original: bool = True) -> bytes:
    """Serialised model whose outputs are the original outputs (optionally) plus `names`.

    The proto is edited in place and restored afterwards, which avoids copying the weights:
    for a model with embedded weights this is one serialisation instead of a copy plus one.
    """
    wanted = _check_known(graph, names)
    outputs = graph.model.graph.output
    saved = list(outputs)
    try:
        existing = {o.name for o in saved} if keep_original else set()
        if not keep_original:
            del outputs[:]
        for name in wanted:
            if name not in existing:
                outputs.append(output_value_info(graph, name))
                existing.add(name)
        return graph.model.SerializeToString()
    finally:
        del outputs[:]
        outputs.extend(saved)


def with_outputs(graph: ModelGraph, names: Sequence[str], *, keep_original: bool = True) -> onnx.ModelProto:
    """A copy of the model with `names` added as graph outputs (for saving or inspection)."""
    copy = onnx.ModelProto()
    copy.ParseFromString(serialized_with_outputs(graph, names, keep_original=keep_original))
    return copy


def nodes_between(graph: ModelGraph, inputs: Iterable[str], outputs: Iterable[str]) -> List[str]:
    """Names of the nodes needed to compute `outputs` when `inputs` are given, in topological order."""
    boundary = set(inputs) | graph.initializer_names
    needed: Set[str] = set()
    stack = [t for t in outputs]
    seen: Set[str] = set()
    while stack:
        tensor = stack.pop()
        if tensor in seen or tensor in boundary:
            continue
        seen.add(tensor)
        node = graph.producer.get(tensor)
        if node is None:
            continue
        if node.name not in needed:
            needed.add(node.name)
            stack.extend(node.all_inputs)
    return [n.name for n in graph.nodes if n.name in needed]


def extract_subgraph(graph: ModelGraph, inputs: Sequence[str], outputs: Sequence[str],
                     *, name: Optional[str] = None) -> onnx.ModelProto:
    """A standalone model computing `outputs` from `inputs` (plus the initializers it uses).

    Tensors the nodes need that are neither produced inside nor listed in `inputs` (graph inputs
    upstream of the cut) become extra inputs, so the result always runs. External-data
    initializers stay references: load the result with the original model's folder.
    """
    _check_known(graph, [*inputs, *outputs])
    node_names = set(nodes_between(graph, inputs, outputs))
    protos = [n for n in graph.model.graph.node if n.name in node_names]
    order = {n.name: n.order for n in graph.nodes}
    protos.sort(key=lambda n: order[n.name])
    produced = {o for n in protos for o in n.output if o}
    used = [t for n in protos for t in (*n.input, *graph.node_by_name[n.name].implicit_inputs) if t]
    used.extend(outputs)
    used_set = set(used)
    initializers = [t for t in graph.model.graph.initializer if t.name in used_set and t.name not in produced]
    init_names = {t.name for t in initializers}
    feed_names = list(dict.fromkeys([*inputs, *[t for t in used if t not in produced and t not in init_names]]))
    feed_names = [t for t in feed_names if t not in produced or t in inputs]
    sub = helper.make_graph(
        nodes=protos,
        name=name or f"{graph.model.graph.name or 'graph'}_sub",
        inputs=[_input_value_info(graph, t) for t in feed_names],
        outputs=[output_value_info(graph, t) for t in outputs],
        initializer=initializers,
    )
    model = helper.make_model(sub, opset_imports=list(graph.model.opset_import), ir_version=graph.model.ir_version)
    model.functions.extend(graph.model.functions)
    return model


def _input_value_info(graph: ModelGraph, name: str) -> onnx.ValueInfoProto:
    info = graph.tensor_info(name)
    shape = list(info.shape) if info.shape is not None else None
    return helper.make_tensor_value_info(name, info.elem_type or onnx.TensorProto.FLOAT, shape)
