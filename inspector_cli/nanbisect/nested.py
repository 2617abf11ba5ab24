"""Looking inside If/Loop bodies: which body node (and which iteration) makes the NaN/Inf.

The top-level search names the If/Loop node; here its body runs on its own, fed the values the
node saw (outer-scope tensors included), with every body tensor exposed. An If runs the branch its
condition chose; a Loop is stepped iteration by iteration (loop-carried values fed back) until the
first iteration in which a body node turns good inputs into bad outputs.
"""
from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..core.graph import ModelGraph
from ..core.protoutil import outer_names
from ..core.runner import RuntimeConfig, Session
from ..errors import MiError
from ..results.nan_bisect import NestedOrigin
from .analyse import find_origins
from .regions import Topology
from .values import is_bad, tensor_stats

MAX_LOOP_ITERATIONS = 10_000
Lookup = Callable[[str], Optional[np.ndarray]]


def _typed(name: str, value: np.ndarray) -> onnx.ValueInfoProto:
    elem = helper.np_dtype_to_tensor_dtype(value.dtype)
    return helper.make_tensor_value_info(name, elem, list(value.shape))


class BodyRunner:
    """One body graph as a standalone model exposing every body tensor."""

    def __init__(self, parent: ModelGraph, body: onnx.GraphProto, outer: Mapping[str, np.ndarray],
                 runtime: RuntimeConfig, body_inputs: Mapping[str, np.ndarray]) -> None:
        self.outer_names = [n for n in outer_names(body) if n in outer]
        inputs = [_typed(n, v) for n, v in body_inputs.items()] + [_typed(n, outer[n]) for n in self.outer_names]
        graph = helper.make_graph(list(body.node), f"{body.name or 'body'}_standalone", inputs, list(body.output),
                                  list(body.initializer))
        model = helper.make_model(graph, opset_imports=list(parent.model.opset_import),
                                  ir_version=parent.model.ir_version)
        self.graph = ModelGraph.from_proto(model)
        self.topo = Topology(self.graph)
        self.exposed = [o for n in self.graph.nodes for o in n.outputs if o]
        for name in self.exposed:
            if name not in {o.name for o in model.graph.output}:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
        self.session = Session(model.SerializeToString(), runtime, label=f"body {body.name}")
        self.output_names = [o.name for o in body.output]
        # the body's own weights: their statistics (a zero divisor, a corrupted value) explain an origin too;
        # read only for the origin's inputs (a Loop body may hold large weights), never from external files
        self.initializers = {t.name: t for t in body.initializer if t.data_location != onnx.TensorProto.EXTERNAL}

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        names = list(dict.fromkeys([*self.output_names, *self.exposed]))
        return self.session.run(dict(feeds), names)

    def origin(self, values: Mapping[str, np.ndarray], feeds: Mapping[str, np.ndarray]) -> Optional[NestedOrigin]:
        bad = {n for n, v in values.items() if is_bad(v)}
        if not bad:
            return None
        scan = find_origins(self.topo, range(len(self.topo.nodes)), bad, [o for o in self.output_names if o in bad])
        chosen = scan.reaching[0] if scan.reaching else (scan.origins[0] if scan.origins else scan.first_bad)
        if chosen < 0:
            return None
        node = self.topo.nodes[chosen]
        from .rootcause import hints_for

        weights = {t: numpy_helper.to_array(self.initializers[t]) for t in node.inputs if t in self.initializers}
        env = {**weights, **feeds, **values}
        ins = [tensor_stats(t, env.get(t), "input" if t in feeds else "initializer" if t in weights else "computed")
               for t in node.inputs if t]
        outs = [tensor_stats(t, values.get(t)) for t in node.outputs if t]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in self.graph.node_proto(node.name).attribute
                 if a.type in (onnx.AttributeProto.FLOAT, onnx.AttributeProto.INT, onnx.AttributeProto.STRING)}
        return NestedOrigin(attribute="", node=node.name, op_type=node.op_type,
                            hints=hints_for(node.op_type, ins, outs, attrs, env), inputs=ins)


def drill(parent: ModelGraph, node_name: str, lookup: Lookup, runtime: RuntimeConfig) -> Optional[NestedOrigin]:
    """Where inside the body of If/Loop `node_name` the bad values appear; None when unknown."""
    proto = parent.node_proto(node_name)
    try:
        if proto.op_type == "If":
            return _drill_if(parent, proto, lookup, runtime)
        if proto.op_type == "Loop":
            return _drill_loop(parent, proto, lookup, runtime)
    except (MiError, ValueError, KeyError, TypeError) as exc:
        return NestedOrigin(attribute="body", note=f"the body could not be replayed on its own ({exc})")
    return NestedOrigin(attribute="body", note=f"{proto.op_type} bodies are not searched; the node itself is reported")


def _graph_attr(proto: onnx.NodeProto, name: str) -> onnx.GraphProto:
    for attr in proto.attribute:
        if attr.name == name:
            return attr.g
    raise KeyError(f"{proto.name} has no attribute {name}")


def _outer_values(parent: ModelGraph, proto: onnx.NodeProto, body: onnx.GraphProto, lookup: Lookup) -> Dict[str, np.ndarray]:
    values: Dict[str, np.ndarray] = {}
    for name in outer_names(body):
        value = lookup(name)
        if value is not None:
            values[name] = value
    return values


def _drill_if(parent: ModelGraph, proto: onnx.NodeProto, lookup: Lookup, runtime: RuntimeConfig) -> Optional[NestedOrigin]:
    cond = lookup(proto.input[0])
    if cond is None:
        return NestedOrigin(attribute="then_branch/else_branch", note="the condition's value is not available")
    branch = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
    body = _graph_attr(proto, branch)
    outer = _outer_values(parent, proto, body, lookup)
    runner = BodyRunner(parent, body, outer, runtime, {})
    feeds = {n: outer[n] for n in runner.outer_names}
    found = runner.origin(runner.run(feeds), feeds)
    if found is None:
        return NestedOrigin(attribute=branch, note="the branch replayed alone produced no NaN/Inf")
    return NestedOrigin(attribute=branch, node=found.node, op_type=found.op_type, hints=found.hints, inputs=found.inputs)


def _drill_loop(parent: ModelGraph, proto: onnx.NodeProto, lookup: Lookup, runtime: RuntimeConfig) -> Optional[NestedOrigin]:
    body = _graph_attr(proto, "body")
    trip = lookup(proto.input[0]) if len(proto.input) > 0 and proto.input[0] else None
    cond_value = lookup(proto.input[1]) if len(proto.input) > 1 and proto.input[1] else None
    carried = [lookup(t) for t in proto.input[2:]]
    if any(c is None for c in carried):
        return NestedOrigin(attribute="body", note="the loop-carried initial values are not available")
    names = [i.name for i in body.input]
    iteration = np.array(0, np.int64)
    cond = np.array(True if cond_value is None else bool(np.asarray(cond_value).reshape(-1)[0]))
    first: Dict[str, np.ndarray] = {names[0]: iteration, names[1]: cond}
    first.update({n: v for n, v in zip(names[2:], carried) if v is not None})
    outer = _outer_values(parent, proto, body, lookup)
    runner = BodyRunner(parent, body, outer, runtime, first)
    limit = int(np.asarray(trip).reshape(-1)[0]) if trip is not None else MAX_LOOP_ITERATIONS
    state: Tuple[np.ndarray, ...] = tuple(v for v in carried if v is not None)
    for i in range(min(limit, MAX_LOOP_ITERATIONS)):
        if not bool(cond):
            break
        feeds = {names[0]: np.array(i, np.int64), names[1]: cond, **dict(zip(names[2:], state)),
                 **{n: outer[n] for n in runner.outer_names}}
        values = runner.run(feeds)
        found = runner.origin(values, {k: v for k, v in feeds.items()})
        if found is not None:
            return NestedOrigin(attribute="body", node=found.node, op_type=found.op_type, iteration=i,
                                hints=found.hints, inputs=found.inputs)
        outs = [values[o] for o in runner.output_names]
        cond = np.asarray(outs[0]).astype(bool)
        state = tuple(outs[1:1 + len(state)])
    return NestedOrigin(attribute="body", note="no iteration replayed alone produced NaN/Inf")
