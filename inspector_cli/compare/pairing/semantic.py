"""The value-level view of a graph: which tensors hold the same values, and which nodes run fused.

Two different graphs of one network (fp32 and its int8 QDQ or fp16 version, a re-export, an
optimised copy) differ in nodes that do not change values: Identity, float Casts, Q->DQ pairs
(approximately), Reshape/Flatten/Squeeze/Unsqueeze (same elements, same order). Each tensor is
reduced to its *canonical* tensor (the one these ops start from), so the graphs can be aligned
on the operations that do compute something.

A *chain* is a head node with the single-consumer followers onnxruntime fuses into it
(Conv -> BatchNormalization -> Relu, MatMul -> Add(bias)): the unit a deployed runtime computes
in one kernel. A *view* says how to read a canonical tensor's value as the deployed graph sees
it: for a quantised tensor the integers after its QuantizeLinear, dequantised in numpy.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import numpy as np

from ...core.graph import ModelGraph, NodeInfo
from ...core.quantparams import INT_PASSTHROUGH, QOP_OUTPUT_PARAMS, QuantSpec, dequantize, qop_input_params

FLOAT_TYPES = frozenset({1, 10, 11, 16})
INT_QUANT_TYPES = frozenset({2, 3, 4, 5, 6, 21, 22})
TRANSPARENT = {"Identity": "identity", "Dropout": "identity", "Cast": "cast", "QuantizeLinear": "qdq",
               "DequantizeLinear": "qdq", "Reshape": "reshape", "Flatten": "reshape", "Squeeze": "reshape",
               "Unsqueeze": "reshape"}
ACTIVATIONS = frozenset({"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
                         "Selu", "Softplus", "Gelu"})
AFFINE = frozenset({"BatchNormalization", "Add", "Sub", "Mul", "Div"})
FOLLOWERS = ACTIVATIONS | AFFINE
SHAPE_ONLY = frozenset({"Shape", "Size"})
COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "Sum", "Mean"})
FAMILY = {
    "QLinearConv": "Conv", "ConvInteger": "Conv", "FusedConv": "Conv", "NhwcConv": "Conv",
    "Gemm": "MatMul", "QGemm": "MatMul", "QLinearMatMul": "MatMul", "MatMulInteger": "MatMul",
    "FusedMatMul": "MatMul", "FusedGemm": "MatMul", "MatMulIntegerToFloat": "MatMul",
    "DynamicQuantizeMatMul": "MatMul", "QLinearAdd": "Add", "QLinearMul": "Mul", "QLinearSigmoid": "Sigmoid",
    "QLinearLeakyRelu": "LeakyRelu", "QLinearGlobalAveragePool": "GlobalAveragePool",
    "QLinearAveragePool": "AveragePool", "QLinearConcat": "Concat", "QLinearSoftmax": "Softmax",
    "QLinearReduceMean": "ReduceMean", "QLinearWhere": "Where", "BiasGelu": "Gelu", "FastGelu": "Gelu",
    "QuickGelu": "Gelu", "NhwcMaxPool": "MaxPool", "MatMulNBits": "MatMul",
}
"""Op types computing the same function as a standard op (quantised, fused or layout variants)."""
HEADS_ABSORBING_AFFINE = frozenset({"Conv", "MatMul", "ConvTranspose"})
def family(op_type: str) -> str:
    """The standard op a (possibly quantised or fused) op type computes."""
    return FAMILY.get(op_type, op_type)


@dataclass(frozen=True)
class TensorView:
    """How to read one tensor's value: fetch `expose`, dequantise it when `quant` is set."""

    tensor: str
    """The tensor whose value this is, as shown to users (a DequantizeLinear output for QDQ)."""
    expose: str
    """The tensor fetched from onnxruntime (the QuantizeLinear output: int8, what fused kernels produce)."""
    quant: Optional[QuantSpec] = None


@dataclass
class Chain:
    """A head node and the single-consumer followers a runtime fuses into it."""

    index: int
    nodes: List[NodeInfo]
    tensors: List[str]
    """Canonical output of each node of the chain (the last is the chain's end)."""
    inputs: Tuple[str, ...]
    """Canonical data inputs of the head."""
    extra_outputs: Tuple[str, ...] = ()
    """Further canonical outputs of a multi-output head (Split, TopK, ...)."""
    kind: Optional[str] = None
    """The op the chain stands for when its head is not it (dynamic quantisation: the Mul that rescales
    a ConvInteger/MatMulInteger result is where the float Conv/MatMul output reappears)."""

    @property
    def head(self) -> NodeInfo:
        return self.nodes[0]

    @property
    def end(self) -> str:
        return self.tensors[-1]

    @cached_property  # the head and kind never change once the chain exists; asked per candidate
    def family(self) -> str:
        return family(self.kind or self.head.op_type)

    def ops(self, upto: Optional[int] = None) -> str:
        nodes = self.nodes if upto is None else self.nodes[:upto + 1]
        return "+".join(n.op_type for n in nodes)


@dataclass
class SemanticGraph:
    """Canonical tensors, aliases, constants, quantisation and chains of one graph."""

    graph: ModelGraph
    canon: Dict[str, str] = field(default_factory=dict)
    kinds: Dict[str, FrozenSet[str]] = field(default_factory=dict)
    aliases: Dict[str, List[str]] = field(default_factory=dict)
    static: Set[str] = field(default_factory=set)
    quant_of: Dict[str, QuantSpec] = field(default_factory=dict)
    chains: List[Chain] = field(default_factory=list)
    chain_of: Dict[str, Chain] = field(default_factory=dict)
    step_of: Dict[str, int] = field(default_factory=dict)
    _arrays: Dict[str, Optional[np.ndarray]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, graph: ModelGraph) -> "SemanticGraph":
        sem = cls(graph)
        sem._initializers = {t.name: t for t in graph.model.graph.initializer}
        sem._canonicalise()
        sem._quantisation()
        sem._build_chains()
        return sem

    # ---- tensors ----------------------------------------------------------------------------------
    def elem_type(self, tensor: str) -> int:
        # one dict read: chains and views ask this several times per tensor (132k calls at 20k nodes)
        elems = self.__dict__.get("_elems")
        if elems is None:
            elems = self._elems = {name: info.elem_type for name, info in self.graph.all_tensor_info().items()}
        return elems.get(tensor, 0)

    def is_data(self, tensor: str) -> bool:
        """Whether a tensor carries activations worth comparing (floats, quantised ints, graph inputs)."""
        if tensor in self.static:
            return False
        if tensor in self.input_set:
            return True
        elem = self.elem_type(tensor)
        return elem == 0 or elem in FLOAT_TYPES or tensor in self.quant_of

    def _transparent(self, node: NodeInfo) -> Optional[str]:
        kind = TRANSPARENT.get(node.op_type)
        if kind is None or node.domain not in ("", "ai.onnx") or not node.inputs or not node.inputs[0]:
            return None
        if kind == "cast":
            to = self.graph.node_attribute(node.name, "to")
            source = self.elem_type(node.inputs[0])
            if to not in FLOAT_TYPES or (source and source not in FLOAT_TYPES):
                return None
        return kind

    def _canonicalise(self) -> None:
        # written for 50,000-node graphs: dict/set methods bound to locals, a transparent test only
        # for the op types that can be transparent, one shared empty kind set
        graph = self.graph
        self.static = static = set(self._initializers)
        canon, kinds, aliases = self.canon, self.kinds, self.aliases
        empty: FrozenSet[str] = frozenset()
        for name in graph.input_names:
            canon[name] = name
            kinds[name] = empty
        add_static = static.update
        transparent = self._transparent
        for node in graph.nodes:
            op = node.op_type
            ins = node.all_inputs
            if "" in ins:  # an unnamed outer-scope read (malformed subgraph): not a tensor
                ins = tuple(t for t in ins if t)
            if op == "Constant" or op in SHAPE_ONLY or (ins and all(t in static for t in ins)) \
                    or (not ins and op != "RandomNormal"):
                add_static(o for o in node.outputs if o)
            kind = transparent(node) if op in TRANSPARENT else None
            # by position: only the first output is the value passed through (a Dropout's mask,
            # its output omitted, is not)
            for index, out in enumerate(node.outputs):
                if not out:
                    continue
                if kind is not None and index == 0:
                    source = node.inputs[0]
                    root = canon.get(source, source)
                    canon[out] = root
                    kinds[out] = kinds.get(source, empty) | {kind}
                    aliases.setdefault(root, []).append(out)
                else:
                    canon[out] = out
                    kinds[out] = empty
        for name in self._initializers:
            canon.setdefault(name, name)
            kinds.setdefault(name, empty)

    def canonical(self, tensor: str) -> str:
        return self.canon.get(tensor, tensor)

    def names_of(self, canonical: str) -> List[str]:
        """The canonical tensor and every alias of it."""
        return [canonical, *self.aliases.get(canonical, [])]

    def consumers(self, canonical: str) -> List[NodeInfo]:
        """Nodes that compute with this value (transparent nodes in between are looked through)."""
        found: Dict[str, NodeInfo] = {}
        for name in self.names_of(canonical):
            for node in self.graph.consumers.get(name, []):
                if node.op_type in SHAPE_ONLY:
                    continue  # reads the shape, not the values
                if self._transparent(node) is None or node.inputs[0] != name:
                    found.setdefault(node.name, node)
        return sorted(found.values(), key=lambda n: n.order)

    # ---- quantisation -------------------------------------------------------------------------------
    def _quantisation(self) -> None:
        for node in self.graph.nodes:
            ins = list(node.inputs)
            if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(ins) >= 2:
                spec = QuantSpec(ins[1], ins[2] if len(ins) > 2 and ins[2] else None,
                                 int(self.graph.node_attribute(node.name, "axis", 1)))  # type: ignore[arg-type]
                target = node.outputs[0] if node.op_type == "QuantizeLinear" else ins[0]
                self.quant_of.setdefault(target, spec)
            elif node.op_type in QOP_OUTPUT_PARAMS and node.outputs:
                s, z = QOP_OUTPUT_PARAMS[node.op_type]
                if len(ins) > s:
                    self.quant_of.setdefault(node.outputs[0], QuantSpec(ins[s], ins[z] if len(ins) > z and ins[z] else None))
            elif node.op_type in INT_PASSTHROUGH and ins and ins[0] in self.quant_of:
                for out in node.outputs if node.op_type == "Split" else node.outputs[:1]:
                    if out and self.elem_type(out) not in FLOAT_TYPES:
                        self.quant_of.setdefault(out, self.quant_of[ins[0]])
        for node in self.graph.nodes:  # integers a QOperator op reads with its own input parameters
            ins = list(node.inputs)
            for x, s, z in qop_input_params(node.op_type, len(ins)):
                if len(ins) > s and ins[x] and ins[x] not in self.quant_of and self.elem_type(ins[x]) not in FLOAT_TYPES:
                    self.quant_of[ins[x]] = QuantSpec(ins[s], ins[z] if len(ins) > z and ins[z] else None)

    def view(self, canonical: str) -> TensorView:
        """How the deployed graph materialises `canonical`: a graph output if one aliases it (free to
        fetch), else the integers of its first quantisation (dequantised), else the tensor itself."""
        names = self.names_of(canonical)
        for name in names:
            if name in self.output_set:
                quant = self.quant_of.get(name) if self.elem_type(name) not in FLOAT_TYPES else None
                return TensorView(name, name, quant)
        if canonical in self.quant_of and self.elem_type(canonical) not in FLOAT_TYPES:
            return TensorView(canonical, canonical, self.quant_of[canonical])
        for name in names[1:]:
            producer = self.graph.producer.get(name)
            if producer is not None and producer.op_type == "QuantizeLinear" and name in self.quant_of:
                dq = [c for c in self.graph.consumers.get(name, []) if c.op_type == "DequantizeLinear"]
                shown = dq[0].outputs[0] if dq else name
                return TensorView(shown, name, self.quant_of[name])
        return TensorView(canonical, canonical)

    def exact_view(self, tensor: str) -> TensorView:
        """A view of exactly `tensor` (for the user's --map), dequantised when it holds integers."""
        quant = self.quant_of.get(tensor) if self.elem_type(tensor) not in FLOAT_TYPES else None
        return TensorView(tensor, tensor, quant)

    def array(self, name: str) -> Optional[np.ndarray]:
        """Value of an initializer or Constant output (cached; None when not a stored constant)."""
        if name in self._arrays:
            return self._arrays[name]
        from ...core.weights import initializer_array

        value: Optional[np.ndarray] = None
        if name in self._initializers:
            value = initializer_array(self.graph, self._initializers[name])
        else:
            producer = self.graph.producer.get(name)
            if producer is not None and producer.op_type == "Constant":
                import onnx.numpy_helper

                attr = self.graph.node_attribute(producer.name, "value")
                value = onnx.numpy_helper.to_array(attr) if attr is not None else None  # type: ignore[arg-type]
        self._arrays[name] = value
        return value

    def dequantize(self, values: np.ndarray, spec: QuantSpec, out: Optional[np.ndarray] = None) -> np.ndarray:
        """(values - zero_point) * scale as float32, per tensor or per channel along `spec.axis`."""
        scale = self.array(spec.scale)
        zero = self.array(spec.zero_point) if spec.zero_point else None
        return dequantize(values, scale, zero, spec.axis, out=out)

    # ---- chains -------------------------------------------------------------------------------------
    @cached_property
    def input_set(self) -> FrozenSet[str]:
        """The graph's input names as a set (asked per tensor by `is_data`)."""
        return frozenset(self.graph.input_names)

    @cached_property
    def output_set(self) -> FrozenSet[str]:
        """The graph's output names, as a set made once (asked per node and per paired tensor)."""
        return frozenset(self.graph.output_names)

    def _build_chains(self) -> None:
        # the hot loop of pairing at 50,000 nodes: canonical(), is_data() and the data inputs of a node
        # inlined over locals, the data test memoised per tensor (static, inputs, types and
        # quantisation are final here), the follower test only for follower op types
        graph_outputs = self.output_set
        canon_get = self.canon.get
        static = self.static
        inputs_set = frozenset(self.graph.input_names)
        quant_of = self.quant_of
        self.elem_type("")
        elems_get = self._elems.get
        memo: Dict[str, bool] = {}

        def is_data(tensor: str) -> bool:
            known = memo.get(tensor)
            if known is None:
                if tensor in static:
                    known = False
                elif tensor in inputs_set:
                    known = True
                else:
                    elem = elems_get(tensor, 0)
                    known = elem == 0 or elem in FLOAT_TYPES or tensor in quant_of
                memo[tensor] = known
            return known

        chains, chain_of, step_of = self.chains, self.chain_of, self.step_of
        for node in self.graph.nodes:
            op = node.op_type
            if op == "Constant" or (op in TRANSPARENT and self._transparent(node) is not None):
                continue
            outs = [canon_get(o, o) for o in node.outputs if o]
            if not outs or all(o in static for o in outs) or not any(is_data(o) for o in outs):
                continue
            inputs = tuple(root for root in (canon_get(t, t) for t in node.inputs if t) if is_data(root))
            chain = self._chain_to_extend(node, inputs, graph_outputs) if FAMILY.get(op, op) in FOLLOWERS else None
            if chain is not None:
                chain.nodes.append(node)
                chain.tensors.append(outs[0])
            else:
                origin = self._integer_origin(node) if op == "Mul" else None
                if origin is not None:  # the float inputs the integer op quantised are the chain's inputs
                    inputs = tuple(self._dequantised_input(t) for t in origin.inputs[:2] if t)
                    inputs = tuple(t for t in inputs if t and t not in static and self.is_data(t))
                chain = Chain(len(chains), [node], [outs[0]], inputs, tuple(outs[1:]),
                              origin.op_type if origin is not None else None)
                chains.append(chain)
            # only the new end: the earlier tensors of the chain are mapped already
            chain_of[outs[0]] = chain
            step_of[outs[0]] = len(chain.tensors) - 1
            for out in chain.extra_outputs:
                chain_of[out] = chain

    def _integer_origin(self, node: NodeInfo) -> Optional[NodeInfo]:
        """The ConvInteger/MatMulInteger whose int32 result this Mul rescales to float (through a Cast):
        `quantize_dynamic`'s DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul(scales) chain."""
        if node.op_type != "Mul":
            return None
        for tensor in node.inputs:
            cast = self.graph.producer.get(tensor)
            if cast is not None and cast.op_type == "Cast" and cast.inputs:
                origin = self.graph.producer.get(cast.inputs[0])
                if origin is not None and origin.op_type in ("ConvInteger", "MatMulInteger"):
                    return origin
        return None

    def _dequantised_input(self, tensor: str) -> str:
        """The float tensor a DynamicQuantizeLinear quantised into `tensor`, else `tensor`'s canonical."""
        producer = self.graph.producer.get(tensor)
        if producer is not None and producer.op_type == "DynamicQuantizeLinear" and producer.inputs:
            return self.canonical(producer.inputs[0])
        return self.canonical(tensor)

    def _chain_to_extend(self, node: NodeInfo, inputs: Sequence[str], graph_outputs: FrozenSet[str]) -> Optional[Chain]:
        # QLinearAdd/QLinearMul/QLinearSigmoid... follow a QLinearMatMul/QLinearConv as their float ops
        # follow MatMul/Conv: the same chain, so that a QOperator graph aligns with its float original
        if family(node.op_type) not in FOLLOWERS or len(inputs) != 1 or len([o for o in node.outputs if o]) != 1:
            return None
        chain = self.chain_of.get(inputs[0])
        if chain is None or chain.end != inputs[0] or chain.extra_outputs:
            return None
        if any(n in graph_outputs for n in self.names_of(inputs[0])):
            return None  # the value is needed on its own: not fusable
        return chain if self._sole_consumer(inputs[0], node.name) else None

    def _sole_consumer(self, canonical: str, name: str) -> bool:
        """Whether `consumers(canonical)` is exactly the node `name` (stops at a second consumer)."""
        transparent = self._transparent
        seen = None
        for alias in self.names_of(canonical):
            for node in self.graph.consumers.get(alias, ()):
                if node.op_type in SHAPE_ONLY:
                    continue
                if node.op_type in TRANSPARENT and transparent(node) is not None and node.inputs[0] == alias:
                    continue
                if seen is None:
                    seen = node.name
                elif node.name != seen:
                    return False
        return seen == name
