"""Turning an origin position into an `Origin`: op type, attributes, input statistics and hints."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np
import onnx

from ..results.nan_bisect import Hint, Origin, TensorStats, Transition
from .model import PreparedModel
from .nested import drill
from .rootcause import hints_for
from .values import tensor_stats

SUBGRAPH_OPS = ("If", "Loop", "Scan")


def attribute_values(proto: onnx.NodeProto) -> Dict[str, Any]:
    """A node's attributes as JSON-ready values (tensors and graphs summarised)."""
    found: Dict[str, Any] = {}
    for attr in proto.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found[attr.name] = f"<graph: {len(attr.g.node)} nodes>"
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found[attr.name] = f"<{len(attr.graphs)} graphs>"
        elif attr.type == onnx.AttributeProto.TENSOR:
            found[attr.name] = f"<tensor {list(attr.t.dims)}>"
        else:
            value = onnx.helper.get_attribute_value(attr)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif isinstance(value, list):
                value = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
            found[attr.name] = value
    return found


class ValueLookup:
    """Values and statistics of the tensors around an origin, from wherever they are known."""

    def __init__(self, prepared: PreparedModel, feeds: Mapping[str, np.ndarray],
                 values: Optional[Mapping[str, np.ndarray]] = None, stats: Optional[Mapping[str, TensorStats]] = None,
                 fetch: Optional[Callable[[List[str]], Mapping[str, np.ndarray]]] = None) -> None:
        self.prepared = prepared
        self.feeds = feeds
        self.values: Dict[str, np.ndarray] = dict(values or {})
        self.known_stats = stats or {}
        self.fetch = fetch

    def source(self, name: str) -> str:
        if name in self.feeds:
            return "input"
        return "initializer" if self.prepared.is_initializer(name) else "computed"

    def value(self, name: str) -> Optional[np.ndarray]:
        if name in self.feeds:
            return self.feeds[name]
        if name in self.values:
            return self.values[name]
        if self.prepared.is_initializer(name):
            return self.prepared.initializer(name)
        if self.fetch is not None:
            self.values.update(self.fetch([name]))
            return self.values.get(name)
        return None

    def stats(self, name: str) -> TensorStats:
        if name in self.known_stats:
            return self.known_stats[name]
        return tensor_stats(name, self.value(name), self.source(name))


def describe_origin(prepared: PreparedModel, position: int, lookup: ValueLookup, *,
                    reaches: bool = True, nested: bool = True) -> Origin:
    """The `Origin` of the node at `position`, with input/output statistics and root-cause hints."""
    node = prepared.topo.nodes[position]
    proto = prepared.graph.node_proto(node.name)
    names = [t for t in node.inputs if t] + list(node.implicit_inputs)
    inputs = [lookup.stats(t) for t in dict.fromkeys(names)]
    outputs = [lookup.stats(t) for t in node.outputs if t]
    attributes = attribute_values(proto)
    # values for the rules that need more than counts: small ones, and any holding Inf (signs)
    values = {s.name: v for s in inputs if s.name in lookup.values or s.name in lookup.feeds
              or prepared.is_initializer(s.name)
              for v in [lookup.value(s.name)] if v is not None and (s.inf or getattr(v, "size", 0) <= 1 << 16)}
    hints = hints_for(node.op_type, inputs, outputs, attributes, values)
    inner = None
    if nested and node.op_type in SUBGRAPH_OPS:
        inner = drill(prepared.graph, node.name, lookup.value, prepared.runtime)
        if inner is not None and inner.hints:
            hints = list(inner.hints) + [h for h in hints if h.rule != "unexplained"]
    return Origin(node=node.name, op_type=node.op_type, position=position, outputs=outputs, inputs=inputs,
                  attributes=attributes, hints=hints, reaches_outputs=reaches, nested=inner)


def describe_transition(prepared: PreparedModel, position: int, lookup: ValueLookup) -> Transition:
    """The node where Inf values became NaN, with the hint saying how (Inf - Inf, 0 * Inf, ...)."""
    node = prepared.topo.nodes[position]
    inputs = [lookup.stats(t) for t in node.inputs if t]
    outputs = [lookup.stats(t) for t in node.outputs if t]
    values = {s.name: v for s in inputs for v in [lookup.value(s.name)] if v is not None}
    attributes = attribute_values(prepared.graph.node_proto(node.name))
    hints = [h for h in hints_for(node.op_type, inputs, outputs, attributes, values) if h.rule != "unexplained"]
    return Transition(node=node.name, op_type=node.op_type, hints=hints)


INPUT_OP = "(input)"


def input_origin(origin: Origin, sample: str) -> Origin:
    """The sample's own input as the origin when the located node only passed on NaN/Inf it was fed
    (issue 15 item 17): the origin is that input, named with its counts and the sample, not the first
    node that consumes it. Any other origin is returned as it is."""
    bad = next((s for s in origin.inputs if s.source == "input" and s.nonfinite), None)
    if bad is None:
        return origin
    what = " and ".join(p for p in (f"{bad.nan} NaN" if bad.nan else "", f"{bad.inf} Inf" if bad.inf else "") if p)
    message = (f"input '{bad.name}' of sample {sample} already holds {what} value(s) "
               f"(first read by {origin.node} ({origin.op_type})): the model did not create them")
    return Origin(node=bad.name, op_type=INPUT_OP, position=-1, outputs=[bad],
                  hints=[Hint("nonfinite-input", message)], reaches_outputs=origin.reaches_outputs)
