"""The graph walk behind `core.masks.find_masks`: fills, the routes from them to a Softmax, data taint."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from .graph import ModelGraph, load_external_tensor

FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Clip"}
"""Ops whose output position i is computed from the inputs' position i (with broadcasting)."""
SAME = {"Cast", "CastLike", "Identity"}
RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}
MOVES = {"Expand", "Transpose", "Slice", "Gather", "Concat", "Tile"} | RESHAPES | SAME
"""Ops that move a mask's values without arithmetic."""
PATH_OPS = ELEMENTWISE | MOVES | {"Where"}
CLAMPS = {"Max", "Min", "Clip"}
ENDS = {"Softmax"}
DATA_INPUTS = {"Where": (1, 2), "Expand": (0,), "Reshape": (0,), "Slice": (0,), "Gather": (0,), "Tile": (0,),
               "Unsqueeze": (0,), "Squeeze": (0,), "Clip": (0, 1, 2)}
"""Inputs through which a mask's values travel (a Where's condition or a Reshape's shape carry none)."""
MAX_CONSTANT_ELEMENTS = 1 << 22
"""Constants read to look for a fill (a causal buffer of 2048 x 2048 is 4 M); larger ones are weights."""


def extreme(array: np.ndarray, sign: int) -> np.ndarray:
    """Elements that are +-inf or beyond half the dtype's largest finite value, of `sign` (bool array)."""
    if array.dtype.kind != "f":
        return np.zeros(array.shape, bool)
    big = float(np.finfo(array.dtype).max) / 2
    with np.errstate(invalid="ignore"):
        return array <= -big if sign < 0 else array >= big


def fill_sign(array: np.ndarray) -> int:
    """-1 or +1 when `array` is a fill (no NaN, extreme values all of one sign), else 0."""
    if array.dtype.kind != "f" or array.size == 0 or np.isnan(array).any():
        return 0
    low, high = bool(extreme(array, -1).any()), bool(extreme(array, 1).any())
    return -1 if low and not high else 1 if high and not low else 0


@dataclass(frozen=True)
class Mask:
    """One mask: its fill constants, the nodes it crosses and the Softmax (or clamp) that ends it."""

    fill: float
    """The extreme value of the fill (e.g. -inf or -3.4028235e38)."""
    constants: Tuple[str, ...]
    nodes: Tuple[str, ...]
    """Every node on the mask path, in topological order (the Softmax and clamps included)."""
    ends: Tuple[str, ...]
    """The Softmax nodes that turn the masked values into 0, and the clamps bounded by a fill."""
    tensors: Tuple[str, ...]
    """Computed tensors on the mask path (the Softmax outputs are not: they hold no masked value)."""

    def describe(self) -> str:
        """One line naming the fill, its constants and the nodes the mask runs through."""
        def names(items: Tuple[str, ...], limit: int = 4) -> str:
            return ", ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")

        ends = [e for e in self.ends]
        inner = tuple(n for n in self.nodes if n not in ends)
        return (f"mask of {self.fill:g} from {names(self.constants, 2)} through {names(inner)} "
                f"to {names(tuple(ends), 2)}")


@dataclass(frozen=True)
class MaskGroup:
    """One connected mask as the walk found it: the `Mask` plus the fill values and signs."""

    mask: Mask
    values: Dict[str, np.ndarray]
    signs: Dict[str, int]
    pure: Tuple[str, ...]




def scan_masks(graph: ModelGraph) -> List[MaskGroup]:
    """The masks of `graph` (top level; nested bodies are not searched), in topological order."""
    fills = _fills(graph)
    if not fills:
        return []
    sign: Dict[str, int] = {name: s for name, (s, _) in fills.items()}
    edges: Dict[str, List[str]] = {}
    """tensor -> path nodes reading it as a value"""
    sinks: Set[str] = set()
    stack = list(fills)
    while stack:
        tensor = stack.pop()
        for node in graph.consumers.get(tensor, []):
            positions = [i for i, t in enumerate(node.inputs) if t == tensor]
            if node.op_type in ENDS:
                if 0 in positions:
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
    kept = _reaching_sinks(graph, edges, sinks)
    tainted = _tainted(graph, set(fills))
    return _group(graph, fills, sign, edges, kept, tainted)


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
    """Float tensors that carry data: float graph inputs, float weights of more than one element
    (fills aside), and what float ops compute from them (conditions, shapes and indices carry none)."""
    def is_float(name: str) -> Optional[bool]:
        elem = graph.tensor_info(name).elem_type
        return None if not elem else elem in FLOATS

    tainted: Set[str] = {i.name for i in graph.inputs if is_float(i.name) is not False}
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


def _group(graph: ModelGraph, fills: Dict[str, Tuple[int, np.ndarray]], sign: Dict[str, int],
           edges: Dict[str, List[str]], kept: Set[Tuple[str, str]], tainted: Set[str]) -> List[MaskGroup]:
    """One `Mask` per connected set of kept nodes and tensors."""
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
        constants = tuple(name for kind, name in members if kind == "tensor" and name in fills)
        if not constants:
            continue
        nodes = tuple(sorted((name for kind, name in members if kind == "node"), key=order.__getitem__))
        tensors = tuple(name for kind, name in members if kind == "tensor" and name not in fills and sign.get(name))
        ends = tuple(n for n in nodes if graph.node_by_name[n].op_type in ENDS or
                     (graph.node_by_name[n].op_type in CLAMPS and any(t in fills for t in graph.node_by_name[n].inputs)))
        if not ends:
            continue
        first = fills[constants[0]][1]
        fill_value = float(first[extreme(first, fills[constants[0]][0])].reshape(-1)[0])
        ordered = tuple(sorted(tensors, key=graph.topo_position))
        found.append(MaskGroup(Mask(fill=fill_value, constants=constants, nodes=nodes, ends=ends, tensors=ordered),
                               values={c: fills[c][1] for c in constants},
                               signs={**{c: fills[c][0] for c in constants}, **{t: sign[t] for t in ordered}},
                               pure=tuple(t for t in ordered if t not in tainted)))
    return found
