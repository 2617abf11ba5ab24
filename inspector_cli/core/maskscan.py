"""The graph walk behind `core.masks.find_masks`: fills, the routes from them to an end, data taint.

An end is where a mask's infinities stop being values: a `Softmax` (0 weight), a comparison (the
ONNX `Attention` function's "is the row's max -inf?" test), a fused attention op's mask or bias
input (onnxruntime's contrib ops, the ONNX `Attention` op), or a clamp bounded by the fill."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from .graph import ModelGraph, load_external_tensor
from .maskops import (CLAMPS, COMPARES, COPIES, DATA_INPUTS, ELEMENTWISE, ENDS, FLOATS, MAX_CONSTANT_ELEMENTS,
                      PATH_OPS, Mask, end_inputs, extreme, fill_sign)

__all__ = ["MaskGroup", "scan_masks"]


@dataclass(frozen=True)
class MaskGroup:
    """One connected mask as the walk found it: the `Mask` plus the fill values and signs."""

    mask: Mask
    values: Dict[str, np.ndarray]
    signs: Dict[str, int]
    pure: Tuple[str, ...]


Fills = Dict[str, Tuple[int, Optional[np.ndarray]]]
"""Fill tensor -> (sign, value); a graph input that carries a mask has no value (the sample's)."""


def scan_masks(graph: ModelGraph) -> List[MaskGroup]:
    """The masks of `graph` (top level; nested bodies are not searched), in topological order."""
    fills: Fills = dict(_fills(graph))
    shaped = _shaped_fills(graph)
    fills.update(shaped)
    fills.update((name, (-1, None)) for name in _input_masks(graph, fills))
    if not fills:
        return []
    sign, edges, sinks = _trace(graph, fills)
    kept = _reaching_sinks(graph, edges, sinks)
    _keep_copies(graph, edges, kept)
    tainted = _tainted(graph, set(fills))
    return _group(graph, fills, sign, edges, kept, tainted, set(shaped))


def _trace(graph: ModelGraph, fills: Fills) -> Tuple[Dict[str, int], Dict[str, List[str]], Set[str]]:
    """(sign of each traced tensor, tensor -> path nodes reading it as a value, the ends reached)."""
    sign: Dict[str, int] = {name: s for name, (s, _) in fills.items()}
    edges: Dict[str, List[str]] = {}
    sinks: Set[str] = set()
    stack = list(fills)
    while stack:
        tensor = stack.pop()
        for node in graph.consumers.get(tensor, []):
            positions = [i for i, t in enumerate(node.inputs) if t == tensor]
            ends = end_inputs(node)
            if ends is not None:
                if any(i in ends for i in positions):
                    edges.setdefault(tensor, []).append(node.name)
                    sinks.add(node.name)
                continue
            if node.op_type not in PATH_OPS:
                continue
            allowed = DATA_INPUTS.get(node.op_type)
            if allowed is not None and not any(i in allowed for i in positions):
                continue
            if node.op_type in CLAMPS and tensor in fills:
                sinks.add(node.name)  # the fill is a clamp's bound
            flips = node.op_type == "Sub" and positions == [1]
            out_sign = -sign[tensor] if flips else sign[tensor]
            edges.setdefault(tensor, []).append(node.name)
            out = node.outputs[0] if node.outputs else ""
            if not out:
                continue
            if out in sign:
                if sign[out] != out_sign:
                    sign[out] = 0  # masks of both signs meet: not followed
                continue
            sign[out] = out_sign
            stack.append(out)
    return sign, edges, sinks


def _input_masks(graph: ModelGraph, constants: Fills) -> Set[str]:
    """Float graph inputs that carry an additive mask: traced with -inf as their sign, they reach an
    end and on the way are added to (or picked against) data that is no mask, or feed a fused
    attention op's mask input. An input that is itself the data a mask is applied to (the scores of
    `Softmax(scores + mask)`) meets only mask tensors and is not one."""
    reach = _reaching_ends(graph)
    candidates = [i.name for i in graph.inputs if i.name in reach and i.name not in constants
                  and graph.tensor_info(i.name).elem_type in FLOATS]
    if not candidates:
        return set()
    fills: Fills = {**constants, **{c: (-1, None) for c in candidates}}
    _sign, edges, sinks = _trace(graph, fills)
    kept = _reaching_sinks(graph, edges, sinks)
    on_path = {name for kind, name in kept if kind == "tensor"}
    data = _tainted(graph, set(constants)) - on_path
    return {c for c in candidates if ("tensor", c) in kept and _meets_data(graph, c, edges, kept, data)}


def _reaching_ends(graph: ModelGraph) -> Set[str]:
    """Tensors from which some end is reached through path ops alone (walked back from the ends: an
    image model's input, several Convs away from its Softmax, is never traced)."""
    stack = [node.inputs[i] for node in graph.nodes for i in (end_inputs(node) or ()) if i < len(node.inputs)]
    seen: Set[str] = set()
    while stack:
        tensor = stack.pop()
        if not tensor or tensor in seen:
            continue
        seen.add(tensor)
        producer = graph.producer.get(tensor)
        if producer is not None and producer.op_type in PATH_OPS:
            allowed = DATA_INPUTS.get(producer.op_type, range(len(producer.inputs)))
            stack.extend(producer.inputs[i] for i in allowed if i < len(producer.inputs))
    return seen


def _meets_data(graph: ModelGraph, start: str, edges: Dict[str, List[str]], kept: Set[Tuple[str, str]],
                data: Set[str]) -> bool:
    """Does the kept route from `start` reach a fused attention op or an element-wise op (or Where)
    that reads `data` as another value?"""
    seen: Set[str] = set()
    stack = [start]
    while stack:
        tensor = stack.pop()
        for name in edges.get(tensor, ()):
            if name in seen or ("node", name) not in kept:
                continue
            seen.add(name)
            node = graph.node_by_name[name]
            if node.op_type not in ENDS | COMPARES and end_inputs(node) is not None:
                return True
            if node.op_type in ELEMENTWISE | {"Where"}:
                values = [node.inputs[i] for i in DATA_INPUTS.get(node.op_type, range(len(node.inputs)))
                          if i < len(node.inputs)]
                if any(v in data for v in values):
                    return True
            stack.extend(o for o in node.outputs if ("tensor", o) in kept)
    return False


def _keep_copies(graph: ModelGraph, edges: Dict[str, List[str]], kept: Set[Tuple[str, str]]) -> None:
    """Add to `kept` the copies of kept tensors that reach no end (the masked scores exported as an
    output through Identity): they hold the same masked values."""
    stack = [name for kind, name in kept if kind == "tensor"]
    while stack:
        tensor = stack.pop()
        for name in edges.get(tensor, ()):
            node = graph.node_by_name[name]
            if ("node", name) in kept or node.op_type not in COPIES or not node.outputs or not node.outputs[0]:
                continue
            kept.update({("node", name), ("tensor", node.outputs[0])})
            stack.append(node.outputs[0])


def _fills(graph: ModelGraph) -> Dict[str, Tuple[int, np.ndarray]]:
    """Float constants a path op reads that hold extreme values of one sign and no NaN."""
    found: Dict[str, Tuple[int, np.ndarray]] = {}

    def consider(name: str, proto: onnx.TensorProto) -> None:
        if proto.data_type not in FLOATS or int(np.prod(proto.dims, dtype=np.int64)) > MAX_CONSTANT_ELEMENTS:
            return
        if not any(c.op_type in PATH_OPS for c in graph.consumers.get(name, [])):
            return
        try:
            value = numpy_helper.to_array(load_external_tensor(graph, proto))
        except (ValueError, TypeError, KeyError, OSError):
            return
        s = fill_sign(value)
        if s:
            found[name] = (s, value)

    for tensor in graph.model.graph.initializer:
        consider(tensor.name, tensor)
    for node in graph.nodes:
        if node.op_type == "Constant" and node.outputs:
            for attr in graph.node_proto(node.name).attribute:
                if attr.type == AttributeProto.TENSOR:
                    consider(node.outputs[0], attr.t)
    return found


def _shaped_fills(graph: ModelGraph) -> Fills:
    """ConstantOfShape outputs of an extreme value (`torch.full((L, L), -inf)` with L known at run time
    only): fills whose shape, hence value, is read at run time; the value here is the attribute's."""
    found: Fills = {}
    for node in graph.nodes:
        if node.op_type != "ConstantOfShape" or not node.outputs or not node.outputs[0]:
            continue
        if not any(c.op_type in PATH_OPS for c in graph.consumers.get(node.outputs[0], [])):
            continue
        for attr in graph.node_proto(node.name).attribute:
            if attr.name == "value" and attr.type == AttributeProto.TENSOR and attr.t.data_type in FLOATS:
                value = numpy_helper.to_array(attr.t)
                if fill_sign(value):
                    found[node.outputs[0]] = (fill_sign(value), value)
    return found


def _reaching_sinks(graph: ModelGraph, edges: Dict[str, List[str]], sinks: Set[str]) -> Set[Tuple[str, str]]:
    """("node", name) and ("tensor", name) of the traced routes from which a sink is reached (a node
    and a tensor may share a name)."""
    readers: Dict[str, List[str]] = {}
    """node -> traced tensors it reads"""
    for tensor, nodes in edges.items():
        for node in nodes:
            readers.setdefault(node, []).append(tensor)
    kept: Set[Tuple[str, str]] = set()
    stack: List[Tuple[str, str]] = [("node", s) for s in sinks]
    while stack:
        item = stack.pop()
        if item in kept:
            continue
        kept.add(item)
        kind, name = item
        if kind == "node":  # its traced inputs lead here
            stack.extend(("tensor", t) for t in readers.get(name, ()))
        else:  # a tensor: its producer, if it was traced
            producer = graph.producer.get(name)
            if producer is not None and producer.name in readers:
                stack.append(("node", producer.name))
    return kept


def _tainted(graph: ModelGraph, fills: Set[str]) -> Set[str]:
    """Float tensors that carry data: float graph inputs and weights of more than one element (fills
    aside), and what float ops compute from them (conditions, shapes and indices carry none)."""
    def is_float(name: str) -> Optional[bool]:
        elem = graph.tensor_info(name).elem_type
        return None if not elem else elem in FLOATS

    tainted: Set[str] = {i.name for i in graph.inputs if i.name not in fills and is_float(i.name) is not False}
    for tensor in graph.model.graph.initializer:
        if tensor.name not in fills and tensor.data_type in FLOATS and int(np.prod(tensor.dims, dtype=np.int64)) > 1:
            tainted.add(tensor.name)
    for node in graph.nodes:
        if node.op_type == "Constant":
            if node.outputs and node.outputs[0] not in fills:
                for attr in graph.node_proto(node.name).attribute:
                    if attr.type == AttributeProto.TENSOR and attr.t.data_type in FLOATS and \
                            int(np.prod(attr.t.dims, dtype=np.int64)) > 1:
                        tainted.add(node.outputs[0])
            continue
        if any(t in tainted for t in node.all_inputs):
            tainted.update(o for o in node.outputs if o and is_float(o) is not False)
    return tainted


def _group(graph: ModelGraph, fills: Fills, sign: Dict[str, int], edges: Dict[str, List[str]],
           kept: Set[Tuple[str, str]], tainted: Set[str], shaped: Set[str]) -> List[MaskGroup]:
    """One `Mask` per connected set of kept nodes and tensors; `shaped`: fills whose value is read at
    run time (ConstantOfShape), like the mask inputs."""
    parent: Dict[Tuple[str, str], Tuple[str, str]] = {}

    def root(x: Tuple[str, str]) -> Tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for tensor, nodes in edges.items():
        if ("tensor", tensor) not in kept or not sign.get(tensor):
            continue
        for node in nodes:
            if ("node", node) in kept:
                parent[root(("node", node))] = root(("tensor", tensor))
                for out in graph.node_by_name[node].outputs:
                    if ("tensor", out) in kept:  # a node and what it computes belong together
                        parent[root(("tensor", out))] = root(("node", node))
    groups: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}
    for name in list(parent):
        groups.setdefault(root(name), []).append(name)
    order = {n.name: n.order for n in graph.nodes}
    found: List[MaskGroup] = []
    def position(item: Tuple[str, str]) -> int:
        return order[item[1]] if item[0] == "node" else graph.topo_position(item[1])

    for members in sorted(groups.values(), key=lambda m: min(position(x) for x in m)):
        sources = tuple(name for kind, name in members if kind == "tensor" and name in fills)
        constants = tuple(name for name in sources if fills[name][1] is not None)
        inputs = tuple(name for name in sources if fills[name][1] is None)
        runtime = (*inputs, *(c for c in constants if c in shaped))
        if not sources:
            continue
        nodes = tuple(sorted((name for kind, name in members if kind == "node"), key=order.__getitem__))
        tensors = tuple(name for kind, name in members if kind == "tensor" and name not in fills and sign.get(name))
        ends = tuple(n for n in nodes if end_inputs(graph.node_by_name[n]) is not None or
                     (graph.node_by_name[n].op_type in CLAMPS and any(t in fills for t in graph.node_by_name[n].inputs)))
        if not ends:
            continue
        ordered = tuple(sorted(tensors, key=graph.topo_position))
        found.append(MaskGroup(Mask(fill=_fill_value(fills, constants), constants=constants, nodes=nodes, ends=ends,
                                    tensors=ordered, inputs=inputs),
                               values={c: fills[c][1] for c in constants if c not in shaped},  # type: ignore[misc]
                               signs={**{c: fills[c][0] for c in sources}, **{t: sign[t] for t in ordered}},
                               pure=(*runtime, *(t for t in ordered if t not in tainted))))
    return found


def _fill_value(fills: Fills, constants: Tuple[str, ...]) -> float:
    """The first constant's extreme value; -inf for a mask carried by graph inputs alone."""
    if not constants:
        return -np.inf
    sign, first = fills[constants[0]]
    assert first is not None
    return float(first[extreme(first, sign)].reshape(-1)[0])
