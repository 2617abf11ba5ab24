"""Keeping nodes in float as a quantiser's exclude list does it (onnxruntime's `nodes_to_exclude`).

A QDQ quantiser puts one QuantizeLinear -> DequantizeLinear pair on an activation tensor when any node
it quantises touches that tensor: the node producing it or a node reading it. Excluding a node keeps
its own arithmetic and weights in float, but a tensor it shares with a node still quantised keeps its
pair, and the excluded node reads the dequantised value (onnxruntime's QDQ quantizer rewires every
reader of the tensor, excluded ones included). So the model that `quantize_static(...,
nodes_to_exclude=S)` builds is the QDQ model with:

- the weights and biases of every node of S in float, and
- the pair of a tensor removed only when every node that asks for it (`requesters`) is in S.

`exclude_qdq` builds that model from any QDQ model, so a fallback plan measured on it is what the
user's re-quantisation with the exclude list gives (issue 29: a plan measured with each node's own
inputs and outputs unquantised read 0.941 on the zoo's ViT where its exclude list, rebuilt, gave the
baseline 0.864). `unit` is the smallest set around a node whose exclusion leaves that node's inputs
and outputs unquantised: the fallback plan's candidates.

Which ops ask for quantisation is read from onnxruntime's own quantizer registries (the QDQ ops and
the QLinear ops `quantize_static` quantises by default); a node of another op that reads a dequantised
tensor (Shape, an op the quantiser cannot quantise) does not keep its pair.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

import onnx

from .qdq_patch import GraphIndex, _Patcher, _prune_and_sort

QUANTISERS = ("QuantizeLinear", "DequantizeLinear")


@lru_cache(maxsize=1)
def quantiser_ops() -> Optional[Tuple[FrozenSet[str], FrozenSet[str]]]:
    """(op types onnxruntime's static quantizer quantises by default, the passive ones among them), from its
    own registries; None where they are absent (then every node touching a quantised tensor asks for it).

    A passive op (Reshape, Transpose, MaxPool, AveragePool, Resize, Gather, Relu...) asks for nothing on
    its input, and quantises its output with its input's parameters only when that input is quantised."""
    try:
        from onnxruntime.quantization.operators.activation import QDQRemovableActivation
        from onnxruntime.quantization.operators.direct_q8 import QDQDirect8BitOp
        from onnxruntime.quantization.operators.gather import QDQGather
        from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry
    except Exception:  # noqa: BLE001 - an onnxruntime build without its quantization tools
        return None
    passive = frozenset(op for op, cls in QDQRegistry.items()
                        if issubclass(cls, (QDQDirect8BitOp, QDQGather, QDQRemovableActivation)))
    return frozenset(QDQRegistry) | frozenset(QLinearOpsRegistry), passive


class Quantisers:
    """The activation quantisers (Q/DQ pairs) of a QDQ model, keyed by the QuantizeLinear's output, and the
    nodes that ask for each."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.index = GraphIndex(model.graph)
        ops = quantiser_ops()
        self.active: Dict[str, FrozenSet[str]] = {}
        """pair -> the nodes that ask for it whatever else is quantised (its producer and readers)."""
        self.passive_producer: Dict[str, str] = {}
        """pair -> its producer, when that is a passive op (it asks only while its input is quantised)."""
        self.input_pair: Dict[str, str] = {}
        """node -> the pair on its first input."""
        self.params: Dict[str, bytes] = {}
        """pair -> its scale and zero point values (equal values: parameters shared)."""
        self.produced_by: Dict[str, List[str]] = {}
        """node -> the pairs on the tensors it produces."""
        self.tensors_of: Dict[str, Set[str]] = {}
        """node -> the pairs on the tensors it produces or reads."""
        self.order: List[str] = []
        """the pairs in graph order."""
        self.position = {n.name: k for k, n in enumerate(model.graph.node) if n.name}
        for q in model.graph.node:
            if q.op_type != "QuantizeLinear" or q.input[0] in self.index.inits:
                continue
            after = self.index.consumers.get(q.output[0], [])
            if not after or any(d.op_type != "DequantizeLinear" for d in after):
                continue  # feeds an integer kernel (QOperator) or a graph output: not a QDQ pair
            pair = q.output[0]
            self.order.append(pair)
            self.params[pair] = self._params(q)
            producer = self.index.producer.get(q.input[0])
            readers = [c for d in after for c in self.index.consumers.get(d.output[0], [])]
            asking: Set[str] = set()
            for node, reads in [(producer, False)] * (producer is not None) + [(r, True) for r in readers]:
                if not node.name or node.op_type in QUANTISERS:
                    continue
                self.tensors_of.setdefault(node.name, set()).add(pair)
                if reads and node.input and any(node.input[0] == d.output[0] for d in after):
                    self.input_pair.setdefault(node.name, pair)
                if not reads:
                    self.produced_by.setdefault(node.name, []).append(pair)
                if ops is None:
                    asking.add(node.name)
                elif node.op_type in ops[1]:
                    if not reads:
                        self.passive_producer[pair] = node.name
                elif node.op_type in ops[0]:
                    asking.add(node.name)
            self.active[pair] = frozenset(asking)

    def _params(self, q: onnx.NodeProto) -> bytes:
        arrays = [self.index.array(name) for name in q.input[1:3] if name]
        return b"|".join(a.tobytes() + str(a.dtype).encode() for a in arrays if a is not None)

    def removed(self, nodes: Iterable[str]) -> List[str]:
        """The pairs that excluding `nodes` removes: nobody asks for them any more (a pair nobody was
        seen to ask for is kept as the model has it)."""
        chosen = set(nodes)
        kept: Dict[str, bool] = {}

        def is_kept(pair: str) -> bool:
            if pair not in kept:
                kept[pair] = True  # a cycle (through a loop body) keeps the pair
                passive = self.passive_producer.get(pair)
                if not self.active[pair] and passive is None:
                    kept[pair] = True
                elif any(n not in chosen for n in self.active[pair]):
                    kept[pair] = True
                else:
                    source = self.input_pair.get(passive) if passive is not None else None
                    kept[pair] = passive is not None and passive not in chosen and source is not None \
                        and is_kept(source)
            return kept[pair]

        return [pair for pair in self.order if not is_kept(pair)]

    def unit(self, node: str) -> List[str]:
        """`node` and the nodes to exclude with it so that none of its tensors stays quantised (`node`
        first, then the others in graph order)."""
        names: Set[str] = {node}
        for pair in self.tensors_of.get(node, ()):
            names |= self.active.get(pair, frozenset())
        names = set(self.close(names)) - {node}
        return [node] + sorted(names, key=lambda n: self.position.get(n, -1))

    def close(self, nodes: Iterable[str]) -> List[str]:
        """`nodes` plus what keeps their exclusion reproducible. A pair that shares its parameters with its
        producer's input pair (onnxruntime gives Reshape, MaxPool, AveragePool, Transpose, Split... the
        input's scale on their output) is re-calibrated on its own once the producer is excluded or, for a
        passive producer, once its input pair is gone; that range is not in the QDQ model, so the nodes
        still asking for the pair are excluded too, which removes it."""
        chosen = list(dict.fromkeys(nodes))
        changed = True
        while changed:
            changed = False
            present = set(chosen)
            removed = set(self.removed(present))
            for producer, pairs in self.produced_by.items():
                source = self.input_pair.get(producer)
                if source is None:
                    continue
                for pair in pairs:
                    if pair in removed or self.params[pair] != self.params[source]:
                        continue
                    if producer in present or (producer == self.passive_producer.get(pair) and source in removed):
                        extra = sorted(n for n in self.active[pair] if n not in present)
                        chosen += extra
                        present |= set(extra)
                        changed = changed or bool(extra)
        return chosen


def exclude_qdq(qdq: onnx.ModelProto, nodes: Iterable[str], fp32: Optional[onnx.ModelProto] = None,
                fp32_names: Optional[Mapping[str, str]] = None,
                quantisers: Optional[Quantisers] = None) -> onnx.ModelProto:
    """A copy of `qdq` as its quantiser would build it with `nodes` excluded (module docstring); raises
    KeyError for a node the model does not have. `quantisers` (of `qdq`) saves re-indexing per call."""
    nodes = list(nodes)
    quantisers = quantisers or Quantisers(qdq)
    patcher = _Patcher(qdq, fp32, fp32_names)
    for name in nodes:
        patcher.float_weights(patcher.node(name))
    for q_output in quantisers.removed(nodes):
        q = patcher.index.producer.get(q_output)
        if q is not None and q.op_type == "QuantizeLinear":
            patcher.remove_quantiser(q)
    _prune_and_sort(patcher.model.graph)
    return patcher.model
