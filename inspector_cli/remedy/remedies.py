"""Remedies with a cost: what `mi fix` may do to a candidate (a node with the nodes sharing its quantisers).

| remedy | what changes (for every node of the candidate) | what it costs on the device |
|---|---|---|
| `calibration` | its activation quantisers re-calibrated (percentile or entropy range of the tensor on the calibration samples) | nothing: the same int8 kernels |
| `per-channel` | its per-tensor weights re-quantised per output channel (symmetric int8) | a scale per channel |
| `a16` | its activation quantisers at 16 bits (uint16/int16, the 8-bit range): A16W8 | 16-bit activations (1 byte more per element), 16-bit kernels |
| `a16+per-channel` | both of the above (a node whose error is in its activations and its weight) | both |
| `float` | excluded as `quantize_static(nodes_to_exclude=...)` builds it (`exclusion.exclude_qdq`) | float kernels and weights |

`COST_ORDER` is the order a candidate's remedies are tried in, cheapest first; the plan's cost is counted as
(nodes in float, tensors at 16 bits, bytes added) (`PlanCost`), compared in that order. Every remedy is
built on the model `exclude_qdq` gives for the float candidates, so a plan mixing remedies is what the
quantiser builds from the exported `nodes_to_exclude` and `TensorQuantOverrides` (remedy/export.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import onnx

from .exclusion import Quantisers, exclude_qdq
from .qdq_patch import GraphIndex, _prune_and_sort, weight_input
from .requant import PairEditor, PairParams, requantize_bias_inplace, requantize_weight_inplace, weight_axis

FLOAT, A16, PER_CHANNEL, CALIBRATION = "float", "a16", "per-channel", "calibration"
A16_PER_CHANNEL = "a16+per-channel"
COST_ORDER: Tuple[str, ...] = (CALIBRATION, PER_CHANNEL, A16, A16_PER_CHANNEL, FLOAT)
"""Cheapest first: a re-calibration costs nothing on the device, per-channel weights a scale per channel,
16-bit activations a byte per element and slower kernels, float the most (float kernels on an NPU).
`a16+per-channel` is allowed whenever both of its parts are."""
REMEDIES = frozenset(COST_ORDER)


def parse_remedies(text: "str | Iterable[str]") -> Tuple[str, ...]:
    """'float,a16,per-channel' -> the remedies in cost order; raises ValueError naming an unknown one."""
    names = [t.strip().lower() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    aliases = {"fp32": FLOAT, "16bit": A16, "a16w8": A16, "perchannel": PER_CHANNEL, "pc": PER_CHANNEL,
               "calibrate": CALIBRATION, "percentile": CALIBRATION, "entropy": CALIBRATION}
    chosen = {aliases.get(n, n) for n in names}
    if {A16, PER_CHANNEL} <= chosen:
        chosen.add(A16_PER_CHANNEL)
    unknown = sorted(chosen - REMEDIES)
    if unknown:
        raise ValueError(f"unknown remedy '{unknown[0]}' (choose from {', '.join(COST_ORDER)})")
    if not chosen:
        raise ValueError(f"no remedy given (choose from {', '.join(COST_ORDER)})")
    return tuple(r for r in COST_ORDER if r in chosen)


@dataclass(frozen=True)
class Choice:
    """One candidate with the remedy chosen for it: `nodes` (QDQ names, the head first) and `remedy`."""

    nodes: Tuple[str, ...]
    remedy: str = FLOAT

    @property
    def head(self) -> str:
        return self.nodes[0]

    def key(self) -> Tuple[str, Tuple[str, ...]]:
        return self.remedy, tuple(sorted(self.nodes))


@dataclass
class PlanCost:
    """What a plan costs: nodes in float, tensors at 16 bits, weights per channel, bytes added."""

    float_nodes: int = 0
    tensors_16bit: int = 0
    per_channel_weights: int = 0
    recalibrated_tensors: int = 0
    added_bytes: Optional[int] = 0
    """None when a 16-bit tensor's size is not known from the model's shapes."""

    def order_key(self) -> Tuple[int, int, int, int]:
        return (self.float_nodes, self.tensors_16bit, self.per_channel_weights, self.recalibrated_tensors)

    def to_dict(self) -> Dict[str, Optional[int]]:
        return {"float_nodes": self.float_nodes, "tensors_16bit": self.tensors_16bit,
                "per_channel_weights": self.per_channel_weights, "recalibrated_tensors": self.recalibrated_tensors,
                "added_bytes": self.added_bytes}


@dataclass
class Applied:
    """What building a plan did: the float nodes (closed as quantize_static would), the pairs at 16 bits
    and re-calibrated with their parameters, the weights made per channel, and the cost."""

    float_nodes: List[str] = field(default_factory=list)
    pairs_16bit: Dict[str, PairParams] = field(default_factory=dict)
    pairs_recalibrated: Dict[str, PairParams] = field(default_factory=dict)
    per_channel: Dict[str, str] = field(default_factory=dict)
    """node -> its weight initializer's name in the QDQ model."""
    cost: PlanCost = field(default_factory=PlanCost)


class RemedyBuilder:
    """Builds the model of a plan (a list of `Choice`s) from one QDQ model, as its quantiser would."""

    def __init__(self, qdq: onnx.ModelProto, fp32: Optional[onnx.ModelProto], fp32_names: Mapping[str, str],
                 quantisers: Optional[Quantisers] = None,
                 ranges: Optional[Mapping[str, Tuple[float, float]]] = None) -> None:
        self.qdq, self.fp32, self.fp32_names = qdq, fp32, dict(fp32_names)
        self.quantisers = quantisers or Quantisers(qdq)
        self.index = self.quantisers.index
        self.ranges: Dict[str, Tuple[float, float]] = dict(ranges or {})
        """pair -> the re-calibrated range of its tensor (remedy/calibrate.py)."""
        self.wide_ranges: Dict[str, Tuple[float, float]] = {}
        """pair -> the range its 16-bit version is calibrated to (calibrate.minmax_16bit_ranges); else the range
        its 8-bit parameters hold."""
        self._elements: Optional[Dict[str, int]] = None

    def applicable(self, nodes: Sequence[str], remedy: str) -> bool:
        """Does `remedy` change anything for these nodes? (a per-channel remedy needs a per-tensor weight,
        a 16-bit one an 8-bit pair, a re-calibration a measured range that differs)."""
        if remedy == FLOAT:
            return True
        if remedy in (PER_CHANNEL, A16_PER_CHANNEL):
            if PairEditor(self.qdq, self.index).opset < 13:  # a per-axis DequantizeLinear needs opset 13
                return False
            return bool(self._per_tensor_weights(nodes)) and (remedy == PER_CHANNEL or self.applicable(nodes, A16))
        pairs = self.quantisers.pairs_around(nodes)
        if remedy == CALIBRATION:
            return any(p in self.ranges for p in pairs)
        editor = PairEditor(self.qdq, self.index)  # reads only: nothing is written to the QDQ model
        return any(params is not None and params.dtype.itemsize == 1 for params in map(editor.current, pairs))

    def build(self, choices: Sequence[Choice]) -> Tuple[onnx.ModelProto, Applied]:
        floats = self.quantisers.close([n for c in choices if c.remedy == FLOAT for n in c.nodes])
        applied = Applied(float_nodes=floats)
        model = exclude_qdq(self.qdq, floats, self.fp32, self.fp32_names, self.quantisers)
        removed = set(self.quantisers.removed(floats))
        index = GraphIndex(model.graph)
        editor = PairEditor(model, index)
        excluded = set(floats)
        for choice in choices:
            if choice.remedy in (A16, A16_PER_CHANNEL, CALIBRATION):
                for pair in sorted(self.quantisers.pairs_around(choice.nodes) - removed):
                    if pair in applied.pairs_16bit:
                        continue
                    if choice.remedy != CALIBRATION:
                        done = editor.to_16bit(pair, self.wide_ranges.get(pair))
                        if done is not None:
                            applied.pairs_16bit[pair] = done
                            applied.pairs_recalibrated.pop(pair, None)
                    elif pair in self.ranges:
                        done = editor.to_range(pair, *self.ranges[pair])
                        if done is not None:
                            applied.pairs_recalibrated[pair] = done
            if choice.remedy in (PER_CHANNEL, A16_PER_CHANNEL):
                for node, weight in self._per_tensor_weights(choice.nodes).items():
                    if node not in excluded and node not in applied.per_channel:
                        requantize_weight_inplace(model, index, node, self.fp32, self.fp32_names.get(node, node))
                        applied.per_channel[node] = weight
        self._requantize_biases(model, index, applied, excluded)
        _prune_and_sort(model.graph)
        applied.cost = self.cost(applied)
        return model, applied

    def _requantize_biases(self, model: onnx.ModelProto, index: GraphIndex, applied: Applied,
                           excluded: Set[str]) -> None:
        """Every quantised node reading a pair that went to 16 bits or another range: its bias from the new
        input scale (quantize_static quantises a bias from the scales it chose)."""
        readers: Dict[str, None] = {}
        for pair in [*applied.pairs_16bit, *applied.pairs_recalibrated]:
            for dq in index.consumers.get(pair, []):
                for node in index.consumers.get(dq.output[0], []) if dq.op_type == "DequantizeLinear" else []:
                    if node.name not in excluded and node.op_type in ("Conv", "ConvTranspose", "Gemm"):
                        readers[node.name] = None
        for name in readers:
            requantize_bias_inplace(model, index, name, self.fp32, self.fp32_names.get(name, name))

    def _per_tensor_weights(self, nodes: Iterable[str]) -> Dict[str, str]:
        """node -> weight initializer, for the nodes whose quantised weight has one scale."""
        found: Dict[str, str] = {}
        for name in nodes:
            node = self.index.by_name.get(name)
            where = weight_input(self.index, node) if node is not None else None
            if where is None or node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
                continue
            scale = self.index.array(where[1].input[1])
            if scale is not None and scale.size == 1:
                found[name] = where[1].input[0]
        return found

    def cost(self, applied: Applied) -> PlanCost:
        """Nodes in float, tensors at 16 bits, and the bytes added: float weights (4 bytes an element where the
        quantised one had its integer size), 16-bit activations (a byte an element), per-channel scales."""
        added: Optional[int] = 0
        for name in applied.float_nodes:
            node = self.index.by_name.get(name)
            for tensor in (node.input if node is not None else []):
                dq = self.index.weight_dq(tensor)
                stored = self.index.inits.get(dq.input[0]) if dq is not None else None
                if stored is not None:
                    count = int(np.prod(stored.dims)) if stored.dims else 1
                    size = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(stored.data_type)).itemsize
                    added += count * (4 - size)
        elements = self.elements()
        for pair in applied.pairs_16bit:
            source = self.index.producer[pair].input[0]
            if added is not None and source in elements:
                added += elements[source]
            else:
                added = None
        for node in applied.per_channel:
            where = weight_input(self.index, self.index.by_name[node])
            stored = self.index.array(where[1].input[0]) if where is not None else None
            if added is not None and stored is not None:
                added += (stored.shape[weight_axis(self.index.by_name[node]) % stored.ndim] - 1) * 5
        return PlanCost(float_nodes=len(applied.float_nodes), tensors_16bit=len(applied.pairs_16bit),
                        per_channel_weights=len(applied.per_channel),
                        recalibrated_tensors=len(applied.pairs_recalibrated), added_bytes=added)

    def elements(self) -> Dict[str, int]:
        """tensor -> elements per sample, from shape inference (symbolic dimensions taken as 1)."""
        if self._elements is None:
            self._elements = tensor_elements(self.qdq)
        return self._elements


def tensor_elements(model: onnx.ModelProto) -> Dict[str, int]:
    """tensor name -> element count from the model's inferred shapes (a symbolic or unknown dimension counts 1:
    a batch of one); tensors without a shape are left out."""
    from ..core.light import light_copy

    try:
        inferred = onnx.shape_inference.infer_shapes(light_copy(model))
    except Exception:  # noqa: BLE001 - shapes are only for the cost; a model inference refuses has none
        inferred = model
    counts: Dict[str, int] = {}
    for info in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        shape = info.type.tensor_type.shape if info.type.HasField("tensor_type") else None
        if shape is None or not info.type.tensor_type.HasField("shape"):
            continue
        counts[info.name] = int(np.prod([d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                                         for d in shape.dim])) if shape.dim else 1
    return counts


def float_set(choices: Iterable[Choice]) -> Set[str]:
    """The nodes the plan keeps in float (before closing)."""
    return {n for c in choices if c.remedy == FLOAT for n in c.nodes}
