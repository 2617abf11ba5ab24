"""Keeping nodes in float as a quantiser's exclude list does it (onnxruntime's `nodes_to_exclude`).

A QDQ quantiser puts one QuantizeLinear -> DequantizeLinear pair on an activation tensor when any node
it quantises touches that tensor: the node producing it or a node reading it. Excluding a node keeps
its own arithmetic and weights in float, but a tensor it shares with a node still quantised keeps its
pair, and the excluded node reads the dequantised value (onnxruntime's QDQ quantizer rewires every
reader of the tensor, excluded ones included). So the model that `quantize_static(...,
nodes_to_exclude=S)` builds is the QDQ model with:

- the weights and biases of every node of S in float (a weight shared with a node not in S stays
  quantised: the quantiser dequantises it for every reader), and
- the pair of a tensor removed only when every node that asks for it is in S (`Quantisers.removed`:
  active askers, passive ops that ask only while their input is quantised), and S closed over the pairs
  quantize_static would re-calibrate (`Quantisers.close`).

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

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

import onnx

from .qdq_patch import QDQ_OPS, GraphIndex, _Patcher, _prune_and_sort

VALUE_PRESERVING = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
"""Passive ops whose output holds exactly the input's values: calibrated on its own, the output gets the
parameters it shared, so their sharing never needs closing over."""
MOVABLE = VALUE_PRESERVING | {"Pad"}
"""Ops a quantiser may sit before instead of after: NNCF puts a Conv's input quantiser before the Pad in front of
it, where onnxruntime's quantiser puts a pair on each side. Their output holds the input's values (a Pad adds
its constant, 0, which every calibrated range holds), so the pair's parameters fit the value after them."""
DATA_INPUTS = {"Where": (1, 2)}
"""The inputs a passive op needs quantised before it quantises its output (default: input 0)."""


ONNXRUNTIME, NNCF = "onnxruntime", "nncf"
_NNCF_QUANTISER = re.compile(r"QuantizeLinear_(?P<tensor>.+)")


def quantiser_rules(model: onnx.ModelProto) -> str:
    """Whose rules placed the model's quantisers: NNCF's ONNX backend names every activation QuantizeLinear
    `QuantizeLinear_<tensor>_<k>` writing `q_output_<tensor>_<k>`, and places a quantiser only on the inputs of
    the ops it quantises; anything else is read by onnxruntime's (a pair on each tensor a quantised node
    produces or reads)."""
    inits = {t.name for t in model.graph.initializer}
    names = [(n.name, n.output[0]) for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inits]
    matches = [_NNCF_QUANTISER.fullmatch(name) for name, _ in names]
    nncf = bool(names) and all(m is not None and out == f"q_output_{m['tensor']}" for m, (_, out) in zip(matches, names))
    return NNCF if nncf else ONNXRUNTIME


@dataclass(frozen=True)
class QuantiserOps:
    """What onnxruntime's static quantizer does with each op type (its registries)."""

    asking: FrozenSet[str]
    """Op types it quantises by default (inputs and outputs)."""
    passive: FrozenSet[str]
    """Among them, the ops that ask for nothing on their input and quantise their output only while their
    data inputs are quantised: Reshape, Transpose, MaxPool, AveragePool, Resize, Slice, Gather, Relu/Clip, Where."""
    sharing: FrozenSet[str]
    """Ops whose output pair takes their input's parameters (passive ones but Where, Relu/Clip; Split, Pad)."""


@lru_cache(maxsize=1)
def quantiser_ops() -> Optional[QuantiserOps]:
    """onnxruntime's view of the op types, None where its quantization tools are absent (then every node
    touching a quantised tensor asks for it, and nothing is passive)."""
    try:
        from onnxruntime.quantization.operators.activation import QDQRemovableActivation
        from onnxruntime.quantization.operators.direct_q8 import QDQDirect8BitOp
        from onnxruntime.quantization.operators.gather import QDQGather
        from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry
    except Exception:  # noqa: BLE001 - an onnxruntime build without its quantization tools
        return None
    shared = frozenset(op for op, cls in QDQRegistry.items() if issubclass(cls, (QDQDirect8BitOp, QDQGather)))
    removable = frozenset(op for op, cls in QDQRegistry.items() if issubclass(cls, QDQRemovableActivation))
    return QuantiserOps(asking=frozenset(QDQRegistry) | frozenset(QLinearOpsRegistry),
                        passive=shared | removable | ({"Where"} & frozenset(QDQRegistry)),
                        sharing=shared | (frozenset({"Split", "Pad"}) & frozenset(QDQRegistry)))


class Quantisers:
    """The activation quantisers (Q/DQ pairs) of a QDQ model, keyed by the QuantizeLinear's output, and the
    nodes that ask for each."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.index = GraphIndex(model.graph)
        self.ops = quantiser_ops()
        self.active: Dict[str, FrozenSet[str]] = {}
        """pair -> the nodes that ask for it whatever else is quantised (its producer and readers)."""
        self.passive_producer: Dict[str, str] = {}
        """pair -> its producer, when that is a passive op (it asks only while its data inputs are quantised)."""
        self.input_pairs: Dict[str, Dict[int, str]] = {}
        """node -> input position -> the pair it reads there."""
        self.produced_by: Dict[str, List[str]] = {}
        """node -> the pairs on the tensors it produces."""
        self.tensors_of: Dict[str, Set[str]] = {}
        """node -> the pairs on the tensors it produces or reads."""
        self.pair_producer: Dict[str, str] = {}
        """pair -> the node producing its tensor."""
        self.passive_readers: Dict[str, List[str]] = {}
        """pair -> the passive ops reading it."""
        self.order: List[str] = []
        """the pairs in graph order."""
        self.position = {n.name: k for k, n in enumerate(model.graph.node) if n.name}
        self.moved_readers: Dict[str, List[Tuple[str, int, str]]] = {}
        """pair -> (node, input position, tensor) of the nodes asking for quantisation that read the pair's value
        through movable ops with no pair after them (NNCF's placement): what they read once the pair is gone."""
        self.behind: Dict[str, Set[str]] = {}
        """pair -> the nodes asking for quantisation that read the pair's value through passive or movable ops
        with no pair after them (the ops NNCF placed the quantiser for)."""
        self.rules = quantiser_rules(model)
        """Whose rules the model's quantisers follow, and so its rebuild: `ONNXRUNTIME` or `NNCF`."""
        for q in model.graph.node:
            if q.op_type != "QuantizeLinear" or q.input[0] in self.index.inits:
                continue
            after = self.index.consumers.get(q.output[0], [])
            if not after or any(d.op_type != "DequantizeLinear" for d in after):
                continue  # feeds an integer kernel (QOperator) or a graph output: not a QDQ pair
            self._add_pair(q, after)
        if self.rules == NNCF and self.ops is not None:
            self._nncf_askers()

    def _nncf_askers(self) -> None:
        """NNCF's rule: a quantiser belongs to the inputs of the ops it quantises (read directly, or through ops
        it moves quantisers across), whatever produces the tensor. So its rebuild drops a pair every reader of
        which is ignored even where the producer stays quantised (a Conv's output read only by an ignored Add,
        a squeeze-excite Sigmoid's read by an ignored Mul), which onnxruntime's rules keep: the askers of a pair
        are its readers alone, and a pair nobody is seen to ask for is kept as the model has it."""
        assert self.ops is not None
        for pair in self.order:
            readers = {r.name for d in self.index.consumers.get(pair, []) if d.op_type == "DequantizeLinear"
                       for r in self.index.consumers.get(d.output[0], [])
                       if r.name and r.op_type in self.ops.asking and r.op_type not in self.ops.passive}
            self.active[pair] = frozenset(readers | self.behind.get(pair, set()))
            self.passive_producer.pop(pair, None)

    def _add_pair(self, q: onnx.NodeProto, after: List[onnx.NodeProto]) -> None:
        pair = q.output[0]
        self.order.append(pair)
        outputs = {d.output[0] for d in after}
        producer = self.index.producer.get(q.input[0])
        readers = [c for d in after for c in self.index.consumers.get(d.output[0], [])]
        asking: Set[str] = set()
        for node, reads in [(producer, False)] * (producer is not None) + [(r, True) for r in readers]:
            if not node.name or node.op_type in QDQ_OPS:
                continue
            self.tensors_of.setdefault(node.name, set()).add(pair)
            if reads:
                for position, name in enumerate(node.input):
                    if name in outputs:
                        self.input_pairs.setdefault(node.name, {})[position] = pair
            else:
                self.produced_by.setdefault(node.name, []).append(pair)
                self.pair_producer[pair] = node.name
            if self.ops is None:
                asking.add(node.name)
            elif node.op_type in self.ops.passive:
                if not reads and node.input and self.index.weight_dq(node.input[0]):  # an embedding Gather asks
                    asking.add(node.name)
                elif not reads:
                    self.passive_producer[pair] = node.name
                else:
                    self.passive_readers.setdefault(pair, []).append(node.name)
            elif node.op_type in self.ops.asking:
                asking.add(node.name)
        self.active[pair] = frozenset(asking)
        if self.ops is not None:
            self._find_moved_readers(pair, outputs)

    def _find_moved_readers(self, pair: str, dequantised: Set[str]) -> None:
        """`moved_readers[pair]`: the asking nodes that read the pair's value through movable ops only (a
        movable op quantised again after it ends the walk: that pair is its readers')."""
        assert self.ops is not None
        frontier = [(t, True) for t in dequantised]
        seen: Set[str] = set()
        found: List[Tuple[str, int, str]] = []
        behind: Set[str] = set()
        while frontier:
            tensor, movable = frontier.pop()
            for reader in self.index.consumers.get(tensor, []):
                if reader.op_type in QDQ_OPS or not reader.name:
                    continue
                passes = reader.op_type in MOVABLE or reader.op_type in self.ops.passive
                if passes and reader.input and reader.input[0] == tensor:
                    if reader.name in seen:
                        continue
                    seen.add(reader.name)
                    after = self.index.consumers.get(reader.output[0], [])
                    if not any(c.op_type == "QuantizeLinear" for c in after):
                        frontier.append((reader.output[0], movable and reader.op_type in MOVABLE
                                         and _pads_zero(self.index, reader)))
                elif tensor not in dequantised and reader.op_type in self.ops.asking and reader.op_type not in self.ops.passive:
                    behind.add(reader.name)
                    if movable:
                        found += [(reader.name, k, tensor) for k, name in enumerate(reader.input) if name == tensor]
        if found:
            self.moved_readers[pair] = found
        if behind:
            self.behind[pair] = behind

    def removed(self, nodes: Iterable[str]) -> List[str]:
        """The pairs that excluding `nodes` removes: nobody asks for them any more (a pair nobody was
        seen to ask for is kept as the model has it)."""
        chosen = set(nodes)
        kept: Dict[str, bool] = {}

        def data_input_kept(node: onnx.NodeProto, position: int) -> bool:
            pair = self.input_pairs.get(node.name, {}).get(position)
            if pair is not None:
                return is_kept(pair)
            return position < len(node.input) and self.index.weight_dq(node.input[position]) is not None

        def is_kept(pair: str) -> bool:
            if pair not in kept:
                kept[pair] = True  # a cycle (through a loop body) keeps the pair
                passive = self.passive_producer.get(pair)
                if not self.active[pair] and passive is None:
                    kept[pair] = True
                elif any(n not in chosen for n in self.active[pair]):
                    kept[pair] = True
                elif passive is None or passive in chosen:
                    kept[pair] = False
                else:
                    node = self.index.by_name[passive]
                    positions = DATA_INPUTS.get(node.op_type, (0,))
                    # a passive op reading nothing quantised has a pair its quantiser's rules would not make
                    # (NNCF quantises a MaxPool's input, not a Relu's): kept as the model has it
                    unexplained = not any(k in self.input_pairs.get(node.name, {}) for k in positions)
                    kept[pair] = unexplained or all(data_input_kept(node, k) for k in positions)
            return kept[pair]

        return [pair for pair in self.order if not is_kept(pair)]

    def unit(self, node: str) -> List[str]:
        """`node` and the nodes to exclude with it so that none of its tensors stays quantised (`node`
        first, then the others in graph order). A tensor is followed through the passive ops that move it
        (a Conv's output through Reshape and Transpose to the LayerNorm that reads it: the LayerNorm asks for
        the pair after the Transpose, so the Conv reads and writes float only with it excluded too)."""
        names: Set[str] = {node}
        for pair in self.pairs_around([node]):
            names |= self.active.get(pair, frozenset())
        names = set(self.close(names)) - {node}
        return [node] + sorted(names, key=lambda n: self.position.get(n, -1))

    def pairs_around(self, nodes: Iterable[str]) -> Set[str]:
        """The pairs on the tensors `nodes` produce or read, followed through the passive ops that move them
        (what `unit` excludes around a node; what a 16-bit or re-calibration remedy changes for it)."""
        pairs: Set[str] = set()
        for node in nodes:
            pairs |= self.tensors_of.get(node, set())
        frontier = list(pairs)
        while frontier:
            pair = frontier.pop()
            moved = [out for reader in self.passive_readers.get(pair, ()) for out in self.produced_by.get(reader, ())]
            producer = self.passive_producer.get(pair)
            if producer is not None:
                moved += list(self.input_pairs.get(producer, {}).values())
            for other in moved:
                if other not in pairs:
                    pairs.add(other)
                    frontier.append(other)
        return pairs

    def close(self, nodes: Iterable[str]) -> List[str]:
        """`nodes` plus what keeps their exclusion reproducible. Some output pairs take parameters that hold
        only while their producer is quantised: a sharing op's (MaxPool, AveragePool, Resize, Slice, Gather,
        Split, Pad take their input's), a Softmax's ([0, 1]). quantize_static calibrates such a pair on its
        own once the producer is excluded, or, for a passive producer, once its input pair is gone; that
        range is not in the QDQ model, so the nodes still asking for the pair are excluded too, which removes
        it. Value-preserving ops (Reshape, Transpose, ...) calibrate to the range they shared: nothing to do."""
        chosen = list(dict.fromkeys(nodes))
        if self.ops is None or self.rules == NNCF:  # NNCF calibrates every quantiser on its own tensor
            return chosen
        changed = True
        while changed:
            changed = False
            present = set(chosen)
            removed = set(self.removed(present))
            for producer, pairs in self.produced_by.items():
                node = self.index.by_name.get(producer)
                if node is None or not self._recalibrated(node, present, removed):
                    continue
                for pair in pairs:
                    if pair in removed:
                        continue
                    extra = sorted(n for n in self.active[pair] if n not in present)
                    chosen += extra
                    present |= set(extra)
                    changed = changed or bool(extra)
        return chosen

    def _recalibrated(self, node: onnx.NodeProto, present: Set[str], removed: Set[str]) -> bool:
        """Would quantize_static give `node`'s output pairs other parameters than the model holds?"""
        assert self.ops is not None
        if node.op_type == "Softmax":
            return node.name in present
        if node.op_type not in self.ops.sharing:
            return False
        source = self.input_pairs.get(node.name, {}).get(0)
        fresh = node.name in present or (node.op_type in self.ops.passive and source is not None
                                          and source in removed)
        return fresh and self._range_changes(node)

    def _range_changes(self, node: onnx.NodeProto) -> bool:
        """Does `node`'s output range differ from that of the pair its parameters were shared from? Only
        when an op on the way back to that pair changes the values' range (MaxPool, AveragePool, Resize,
        Slice...): Reshape, Transpose and the like keep it (EfficientNet's Mul -> AveragePool -> Reshape ->
        Gemm: the Reshape's pair holds the Mul's parameters, its own range is the AveragePool's)."""
        assert self.ops is not None
        current: Optional[onnx.NodeProto] = node
        seen: Set[str] = set()
        while current is not None and current.name not in seen:
            seen.add(current.name)
            if current.op_type not in self.ops.sharing:
                return False  # the pair the parameters come from: calibrated on its own range
            if current.op_type not in VALUE_PRESERVING:
                return True
            source = self.input_pairs.get(current.name, {}).get(0)
            producer = self.pair_producer.get(source) if source is not None else None
            current = self.index.by_name.get(producer) if producer is not None else None
        return False


def _pads_zero(index: GraphIndex, node: onnx.NodeProto) -> bool:
    """A node that is not a Pad, or a Pad whose value (a constant-mode Pad's third input, default 0) is 0:
    the padded tensor's range is its input's (a calibrated range always holds 0)."""
    if node.op_type != "Pad" or len(node.input) < 3 or not node.input[2]:
        return True
    value = index.constant(node.input[2])
    return value is not None and not value.any()


def exclude_qdq(qdq: onnx.ModelProto, nodes: Iterable[str], fp32: Optional[onnx.ModelProto] = None,
                fp32_names: Optional[Mapping[str, str]] = None,
                quantisers: Optional[Quantisers] = None) -> onnx.ModelProto:
    """A copy of `qdq` as its quantiser would build it with `nodes` excluded (module docstring); raises
    KeyError for a node the model does not have. `quantisers` (of `qdq`) saves re-indexing per call."""
    nodes = list(nodes)
    quantisers = quantisers or Quantisers(qdq)
    patcher = _Patcher(qdq, fp32, fp32_names)
    excluded = set(nodes)
    for name in nodes:
        patcher.float_weights(patcher.node(name), readers_within=excluded)
    moved: Dict[str, str] = {}
    for q_output in quantisers.removed(nodes):
        q = patcher.index.producer.get(q_output)
        if q is not None and q.op_type == "QuantizeLinear":
            patcher.remove_quantiser(q)
            for reader, position, tensor in quantisers.moved_readers.get(q_output, []):
                if reader not in excluded:
                    _requantise_input(patcher, q, patcher.node(reader), position, tensor, moved)
    _prune_and_sort(patcher.model.graph)
    return patcher.model


def _requantise_input(patcher: _Patcher, q: onnx.NodeProto, reader: onnx.NodeProto, position: int, tensor: str,
                      moved: Dict[str, str]) -> None:
    """`reader`, still quantised, reads `tensor` (the float value after a movable op whose pair before it went)
    through a pair of its own with the removed pair's parameters: a quantiser asked to quantise `reader` puts
    one on its input, calibrated on the same range (NNCF's int8 MobileNetV2: Clip -> pair -> Pad -> Conv with
    the Clip and Pad in float; NNCF's and onnxruntime's rebuilds quantise the Conv's input after the Pad)."""
    if tensor not in moved:  # the pair's DequantizeLinear is an Identity now: both take the Q's parameters
        new_q, new_dq = onnx.NodeProto(), onnx.NodeProto()
        new_q.CopyFrom(q)
        new_q.name, new_q.output[0] = f"{tensor}__moved_QuantizeLinear", f"{tensor}__moved_q"
        del new_q.input[:]
        new_q.input.extend([tensor, *q.input[1:]])
        new_dq.CopyFrom(new_q)
        new_dq.op_type, new_dq.name = "DequantizeLinear", f"{tensor}__moved_DequantizeLinear"
        del new_dq.input[:]
        new_dq.input.extend([new_q.output[0], *q.input[1:]])
        new_dq.output[0] = f"{tensor}__moved_dq"
        patcher.model.graph.node.extend([new_q, new_dq])
        moved[tensor] = new_dq.output[0]
    reader.input[position] = moved[tensor]
