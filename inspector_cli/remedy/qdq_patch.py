"""Patching a QDQ model: keep chosen nodes in float, or re-quantise a weight per channel.

Works on a copy of any QDQ model, whatever quantiser produced it. Keeping node N in float means:
N's inputs read the float value before their QuantizeLinear (weights: the fp32 model's weight when
the fp32 model is given, else the dequantised integers), and the Q -> DQ pairs after N's outputs
are bypassed; a Relu/Clip the quantiser folded into a zero-point-0 quantiser is put back from the fp32 model.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
CLAMP_OPS = frozenset({"Relu", "Clip"})
WEIGHT_AXIS = {"Conv": 0, "ConvTranspose": 1, "Gemm": 0, "MatMul": 1}
"""Output-channel axis of the weight (Gemm assumes transB=1, the layout exporters write)."""


class GraphIndex:
    """Producers, consumers and initializers of a graph, for one patching pass."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.producer: Dict[str, onnx.NodeProto] = {o: n for n in graph.node for o in n.output if o}
        self.consumers: Dict[str, List[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(node)
        self.inits: Dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
        self.by_name: Dict[str, onnx.NodeProto] = {n.name: n for n in graph.node if n.name}

    def array(self, name: str) -> Optional[np.ndarray]:
        tensor = self.inits.get(name)
        return None if tensor is None else numpy_helper.to_array(tensor)

    def constant(self, name: str) -> Optional[np.ndarray]:
        """An initializer's value, or a Constant node's (torch writes a Pad's value as one), else None."""
        value = self.array(name)
        node = self.producer.get(name)
        if value is None and node is not None and node.op_type == "Constant":
            value = next((numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"), None)
        return value

    def weight_dq(self, tensor: str) -> Optional[onnx.NodeProto]:
        """The DequantizeLinear producing `tensor` from a stored initializer (a quantised weight), or None."""
        dq = self.producer.get(tensor)
        return dq if dq is not None and dq.op_type == "DequantizeLinear" and dq.input[0] in self.inits else None

    def weight_qdq(self, tensor: str) -> Optional[onnx.NodeProto]:
        """The QuantizeLinear of a float weight kept behind a Q -> DQ pair (onnxruntime's AddQDQPairToWeight, as
        NVIDIA ModelOpt writes its int8) when its DequantizeLinear produces `tensor`, or None."""
        dq = self.producer.get(tensor)
        q = self.producer.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
        return q if q is not None and q.op_type == "QuantizeLinear" and q.input[0] in self.inits else None


def producer_through_qdq(producer: Mapping[str, onnx.NodeProto], tensor: str) -> Optional[onnx.NodeProto]:
    """The node computing `tensor`, looked through the Q/DQ pairs after it (`producer`: output -> node)."""
    node = producer.get(tensor)
    while node is not None and node.op_type in QDQ_OPS:
        node = producer.get(node.input[0])
    return node


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.ModelProto.FromString(model.SerializeToString())


def int_attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(helper.get_attribute_value(a))
    return default


def dequantize_initializer(index: GraphIndex, dq: onnx.NodeProto) -> np.ndarray:
    """The float value of a DequantizeLinear of stored integers (per-tensor or per-axis)."""
    q = index.array(dq.input[0])
    scale = index.array(dq.input[1])
    zero = index.array(dq.input[2]) if len(dq.input) > 2 and dq.input[2] else None
    assert q is not None and scale is not None
    values = q.astype(np.float64) - (0 if zero is None else zero.astype(np.float64)).reshape(
        axis_shape(q, scale, int_attribute(dq, "axis", 1)))
    steps = scale.astype(np.float64).reshape(axis_shape(q, scale, int_attribute(dq, "axis", 1)))
    return (values * steps).astype(np.float32)


def axis_shape(values: np.ndarray, params: np.ndarray, axis: int) -> Tuple[int, ...]:
    if params.size <= 1 or values.ndim == 0:
        return ()
    shape = [1] * values.ndim
    shape[axis % values.ndim] = params.size
    return tuple(shape)


def quantised_nodes(model: onnx.ModelProto) -> List[str]:
    """Names of the compute nodes that have a DequantizeLinear input or a QuantizeLinear consumer."""
    index = GraphIndex(model.graph)
    names: List[str] = []
    for node in model.graph.node:
        if node.op_type in QDQ_OPS or not node.name:
            continue
        fed = any(index.producer.get(t) is not None and index.producer[t].op_type == "DequantizeLinear"
                  for t in node.input if t)
        feeds = any(c.op_type == "QuantizeLinear" for o in node.output for c in index.consumers.get(o, []))
        if fed or feeds:
            names.append(node.name)
    return names


def fp32_weight(fp32: Optional[onnx.ModelProto], node: str, position: int,
                shape: Sequence[int]) -> Optional[np.ndarray]:
    """The fp32 model's initializer at input `position` of its node named `node`, when the shape fits."""
    if fp32 is None:
        return None
    index = GraphIndex(fp32.graph)
    source = index.by_name.get(node)
    if source is None or position >= len(source.input):
        return None
    value = index.array(source.input[position])
    if value is None or tuple(value.shape) != tuple(shape):
        return None
    return value.astype(np.float32)


class _Patcher:
    def __init__(self, model: onnx.ModelProto, fp32: Optional[onnx.ModelProto],
                 fp32_names: Optional[Mapping[str, str]] = None) -> None:
        self.model = _copy(model)
        self.fp32_names = dict(fp32_names or {})
        self.fp32 = fp32
        self.index = GraphIndex(self.model.graph)
        self.fp32_index = GraphIndex(fp32.graph) if fp32 is not None else None
        self.float_of: Dict[str, str] = {}

    def float_source(self, q: onnx.NodeProto) -> str:
        """A float tensor equal to the value quantised by `q`, restoring a Relu/Clip folded into it."""
        src = q.input[0]
        if src in self.float_of:
            return self.float_of[src]
        name = src
        ref = self.fp32_index.producer.get(src) if self.fp32_index is not None else None
        mine = self.index.producer.get(src)
        if ref is None and self._starts_at_zero(q) and (mine is None or mine.op_type not in CLAMP_OPS):
            # no fp32 tensor of that name (a renamed model): a range starting at 0 is taken as a folded Relu
            name = f"{src}__float"
            self.model.graph.node.append(helper.make_node("Relu", [src], [name], name=f"{q.name}__relu"))
        elif ref is not None and ref.op_type in CLAMP_OPS and (mine is None or mine.op_type != ref.op_type):
            name = f"{src}__float"
            clamp = onnx.NodeProto()
            clamp.CopyFrom(ref)
            clamp.name = f"{ref.name}__restored"
            del clamp.input[:]
            clamp.input.extend([src] + list(ref.input[1:]))
            del clamp.output[:]
            clamp.output.append(name)
            for position, extra in enumerate(ref.input[1:], start=1):  # Clip's min/max
                if extra and extra not in self.index.inits and extra not in self.index.producer:
                    tensor = self._fp32_constant(extra)
                    if tensor is None:  # computed at run time in the fp32 model: cannot be copied
                        raise ValueError(f"cannot restore '{ref.name}' folded into '{q.name}': its input "
                                         f"'{extra}' is not a constant")
                    # exporters write Clip's bounds as Constant nodes (torch) or initializers
                    tensor.name = f"{ref.name}__bound{position}"
                    clamp.input[position] = tensor.name
                    self.model.graph.initializer.append(tensor)
                    self.index.inits[tensor.name] = tensor
            self.model.graph.node.append(clamp)
        self.float_of[src] = name
        return name

    def _fp32_constant(self, name: str) -> Optional[onnx.TensorProto]:
        """A copy of the fp32 model's constant `name`: an initializer or a Constant node's value."""
        assert self.fp32_index is not None
        tensor = onnx.TensorProto()
        if name in self.fp32_index.inits:
            tensor.CopyFrom(self.fp32_index.inits[name])
            return tensor
        node = self.fp32_index.producer.get(name)
        if node is None or node.op_type != "Constant":
            return None
        for attr in node.attribute:
            if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                tensor.CopyFrom(attr.t)
                return tensor
            if attr.name in ("value_float", "value_int"):
                value = helper.get_attribute_value(attr)
                return numpy_helper.from_array(np.asarray(value, np.float32 if attr.name == "value_float" else np.int64))
        return None

    def _starts_at_zero(self, q: onnx.NodeProto) -> bool:
        zero = self.index.array(q.input[2]) if len(q.input) > 2 and q.input[2] else None
        if zero is None or zero.size != 1:
            return False
        info = np.iinfo(zero.dtype) if np.issubdtype(zero.dtype, np.integer) else None
        return info is not None and int(zero.reshape(())) == info.min

    def node(self, node_name: str) -> onnx.NodeProto:
        node = self.index.by_name.get(node_name)
        if node is None:
            raise KeyError(f"node '{node_name}' is not in the QDQ model")
        return node

    def float_weights(self, node: onnx.NodeProto, readers_within: Optional[Set[str]] = None) -> None:
        """`node` reads its stored (dequantised) initializers as float: the fp32 model's, else the
        dequantised integers. `readers_within`: only a weight every reader of which is in that set (a
        quantiser dequantises a weight shared with a quantised node for all its readers)."""
        for i, tensor in enumerate(list(node.input)):
            dq = self.index.weight_dq(tensor)
            if dq is None:
                q = self.index.weight_qdq(tensor)
                if q is not None:  # a float weight kept behind a Q -> DQ pair (AddQDQPairToWeight, ModelOpt)
                    if self._read_only_within(tensor, readers_within):
                        node.input[i] = q.input[0]  # the float weight itself, then the fp32 model's if it differs
                        self._restore_float_input(node, i, q.input[0], None)
                else:
                    self._restore_float_input(node, i, tensor, readers_within)
                continue
            if not self._read_only_within(dq.output[0], readers_within):
                continue
            current = dequantize_initializer(self.index, dq)
            value = fp32_weight(self.fp32, self.fp32_names.get(node.name, node.name), i, current.shape)
            self._float_input(node, i, (current if value is None else value).astype(np.float32))

    def _restore_float_input(self, node: onnx.NodeProto, i: int, tensor: str, within: Optional[Set[str]]) -> None:
        """A float initializer the quantiser changed (NNCF's bias correction) goes back to the fp32 model's."""
        mine = self.index.array(tensor) if tensor in self.index.inits else None
        if mine is None or not np.issubdtype(mine.dtype, np.floating) or not self._read_only_within(tensor, within):
            return
        value = fp32_weight(self.fp32, self.fp32_names.get(node.name, node.name), i, mine.shape)
        if value is not None and not np.array_equal(value, mine.astype(np.float32)):
            self._float_input(node, i, value.astype(mine.dtype))

    def _read_only_within(self, tensor: str, within: Optional[Set[str]]) -> bool:
        """Every reader of `tensor` is in `within` (None: no restriction)."""
        return within is None or all(reader.name in within for reader in self.index.consumers.get(tensor, []))

    def _float_input(self, node: onnx.NodeProto, i: int, value: np.ndarray) -> None:
        """`node` reads `value` at input `i`, a new initializer of its own."""
        name = f"{node.name}__input{i}_float"
        self.model.graph.initializer.append(numpy_helper.from_array(value, name))
        self.index.inits[name] = self.model.graph.initializer[-1]
        node.input[i] = name

    def remove_quantiser(self, q: onnx.NodeProto) -> None:
        """Every DequantizeLinear after `q` reads the float value `q` quantised (a folded Relu restored)."""
        source = self.float_source(q)
        for dq in list(self.index.consumers.get(q.output[0], [])):
            if dq.op_type == "DequantizeLinear":
                dq.op_type, dq.domain = "Identity", ""
                del dq.attribute[:]
                del dq.input[:]
                dq.input.append(source)

    def keep_float(self, node_name: str) -> None:
        node = self.node(node_name)
        self.float_weights(node)
        for i, tensor in enumerate(list(node.input)):
            dq = self.index.producer.get(tensor)
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            q = self.index.producer.get(dq.input[0])
            if q is not None and q.op_type == "QuantizeLinear":
                node.input[i] = self.float_source(q)
        for out in node.output:
            for q in list(self.index.consumers.get(out, [])):
                if q.op_type == "QuantizeLinear":
                    self.remove_quantiser(q)

    def finish(self) -> onnx.ModelProto:
        _prune_and_sort(self.model.graph)
        return self.model


def bypass_qdq(qdq: onnx.ModelProto, nodes: Iterable[str], fp32: Optional[onnx.ModelProto] = None,
               fp32_names: Optional[Mapping[str, str]] = None) -> onnx.ModelProto:
    """A copy of `qdq` with `nodes` kept in float (see module docstring); raises KeyError for unknown
    nodes. `fp32_names` maps QDQ node names to the fp32 model's where they differ (`naming`)."""
    patcher = _Patcher(qdq, fp32, fp32_names)
    for name in nodes:
        patcher.keep_float(name)
    return patcher.finish()


def weight_input(index: GraphIndex, node: onnx.NodeProto) -> Optional[Tuple[int, onnx.NodeProto]]:
    """(input position, DequantizeLinear) of the node's quantised weight: a >=2-D integer initializer."""
    for i, tensor in enumerate(node.input):
        dq = index.weight_dq(tensor)
        if dq is not None:
            value = index.array(dq.input[0])
            if value is not None and value.ndim >= 2:
                return i, dq
    return None


def _subgraph_reads(node: onnx.NodeProto) -> Set[str]:
    """Every name read inside the If/Loop/Scan bodies of `node`, at any depth (outer-scope values
    among them are inputs of `node` that its input list does not show)."""
    names: Set[str] = set()
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for sub in graphs:
            for inner in sub.node:
                names.update(t for t in inner.input if t)
                names.update(_subgraph_reads(inner))
            names.update(o.name for o in sub.output)
    return names


def _prune_and_sort(graph: onnx.GraphProto) -> None:
    """Drop nodes and initializers nothing reads any more, then order the nodes topologically
    (a node's dependencies include the outer-scope values its subgraphs read)."""
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    outer = set(producer) | {i.name for i in graph.input} | {t.name for t in graph.initializer}
    deps = [[t for t in n.input if t] + sorted(t for t in _subgraph_reads(n) if t in outer) for n in graph.node]
    needed: Set[int] = set()
    stack = [o.name for o in graph.output]
    while stack:  # the nodes graph outputs depend on (node order is not topological yet)
        index = producer.get(stack.pop())
        if index is not None and index not in needed:
            needed.add(index)
            stack.extend(deps[index])
    available: Set[str] = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    ordered: List[onnx.NodeProto] = []
    pending = [(n, deps[i]) for i, n in enumerate(graph.node) if i in needed]
    while pending:
        rest = []
        for node, needs in pending:
            if all(t in available for t in needs):
                ordered.append(node)
                available.update(node.output)
            else:
                rest.append((node, needs))
        if len(rest) == len(pending):
            raise ValueError(f"patched graph has a cycle or a missing input at node '{rest[0][0].name}'")
        pending = rest
    del graph.node[:]
    graph.node.extend(ordered)
    used = {t for n in ordered for t in [*n.input, *_subgraph_reads(n)]}
    inits = [t for t in graph.initializer if t.name in used or t.name in {o.name for o in graph.output}]
    del graph.initializer[:]
    graph.initializer.extend(inits)
