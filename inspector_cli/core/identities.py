"""Infinities an op answers on purpose: the identity of a reduction over an empty set.

The ONNX operators define a reduction of no element as its identity: ReduceMax is -inf, ReduceMin
+inf, ReduceLogSumExp and ReduceLogSum -inf (the log of an empty sum, 0). Their spelled-out forms
(`Log(ReduceSum(x))`, `Log(ReduceSum(Exp(x)))`: the backend tests' `_expanded` cases) give the same
-inf. Such a value is the right answer, not a NaN/Inf birth: probe counts it apart (MI830) and
nan-bisect neither takes it for an origin nor blames the sample (MI908 names the node).

The rule (docs/guide/nan-bisect.md, "Empty reductions"): a tensor computed by such a node, or by a
Cast/Identity/Reshape of its output, holds only intended infinities when the reduction's data input
holds no element (read from the sample, else from the static shape) and every value of the tensor is
the identity. One finite value among them, a NaN, or an infinity of the other sign is not excused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Set, Tuple

import numpy as np

from .graph import ModelGraph
from .maskops import RESHAPES, SAME

IDENTITY_SIGN: Dict[str, int] = {"ReduceMax": -1, "ReduceMin": 1, "ReduceLogSumExp": -1, "ReduceLogSum": -1}
"""The sign of each reduction's infinite identity over an empty set."""
VALUE_COPIES = SAME | RESHAPES
"""Cast/Identity and the reshapes: an identity copied through them is still all identity (maskops.COPIES,
the mask scan's, also counts Transpose and Expand)."""


@dataclass(frozen=True)
class EmptyReduction:
    """A node that answers an infinity when it reduces an empty set, and the tensor it reduces."""

    node: str
    op_type: str
    data: str
    """The tensor reduced: empty means every output value is the identity."""
    sign: int


def find_empty_reductions(graph: ModelGraph) -> Dict[str, EmptyReduction]:
    """Tensor -> the reduction whose empty-set identity it may carry (the reduction's output, the Log
    of a ReduceSum, and Cast/Identity/Reshape copies of either)."""
    found: Dict[str, EmptyReduction] = {}
    for node in graph.nodes:
        if not node.outputs or not node.outputs[0] or not node.inputs:
            continue
        entry: Optional[EmptyReduction] = None
        if node.op_type in IDENTITY_SIGN:
            entry = EmptyReduction(node.name, node.op_type, node.inputs[0], IDENTITY_SIGN[node.op_type])
        elif node.op_type == "Log":
            source = graph.producer_through(node.inputs[0], VALUE_COPIES)
            if source is not None and source.op_type == "ReduceSum" and source.inputs:
                entry = EmptyReduction(source.name, "ReduceSum", source.inputs[0], -1)  # log of an empty sum
        if entry is not None:
            for tensor in _copies(graph, node.outputs[0]):
                found.setdefault(tensor, entry)
    return found


def _copies(graph: ModelGraph, tensor: str) -> Iterator[str]:
    """`tensor` and what Cast/Identity/Reshape nodes copy it to (value input only)."""
    stack = [tensor]
    seen: Set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        yield name
        for node in graph.consumers.get(name, []):
            if node.op_type in VALUE_COPIES and node.inputs and node.inputs[0] == name and node.outputs and node.outputs[0]:
                stack.append(node.outputs[0])


def empty_size(graph: ModelGraph, tensor: str, values: Mapping[str, object]) -> Optional[bool]:
    """Does `tensor` hold no element? From its value when at hand, else its static shape (None: unknown)."""
    value = values.get(tensor)
    if value is not None:
        return int(np.asarray(value).size) == 0
    info = graph.tensor_info(tensor)
    if info.shape is not None and any(isinstance(d, int) and d == 0 for d in info.shape):
        return True
    return False if info.element_count() else None


def identity_count(graph: ModelGraph, entry: EmptyReduction, value: np.ndarray,
                   values: Mapping[str, object]) -> int:
    """The infinities of `value` that are `entry`'s empty-set identity: all of its values, when the
    reduced tensor is empty and each value is the identity; else 0."""
    if value.dtype.kind != "f" or value.size == 0 or not empty_size(graph, entry.data, values):
        return 0
    identity = np.isinf(value) & ((value < 0) if entry.sign < 0 else (value > 0))
    return int(value.size) if bool(identity.all()) else 0


def static_empty_reductions(graph: ModelGraph, found: Dict[str, EmptyReduction]) -> List[Tuple[EmptyReduction, str]]:
    """The reductions whose input is empty by its static shape, with that shape's text (for findings
    made before any sample runs)."""
    seen: Dict[str, Tuple[EmptyReduction, str]] = {}
    for entry in found.values():
        if entry.node not in seen and empty_size(graph, entry.data, {}):
            seen[entry.node] = (entry, graph.tensor_info(entry.data).shape_text())
    return list(seen.values())
