"""Graph patterns that usually mean lost performance: shared by `validate` hints and `profile` hints.

Each detector returns `PatternMatch`es naming the nodes involved, so a caller can report them
(validate) or add up their measured time (profile).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import onnx

from .graph import ModelGraph, NodeInfo


@dataclass(frozen=True)
class PatternMatch:
    pattern: str
    """Stable pattern id: conv-bn, transpose-pair, reshape-chain, cast-roundtrip, identity, constant-subgraph."""
    nodes: Tuple[str, ...]
    message: str


def _single_consumer(graph: ModelGraph, tensor: str) -> Optional[NodeInfo]:
    consumers = graph.consumers.get(tensor, [])
    if len(consumers) != 1 or tensor in graph.output_names:
        return None
    return consumers[0]


def _attr(graph: ModelGraph, node: NodeInfo, name: str) -> object:
    return graph.node_attribute(node.name, name)


def conv_bn(graph: ModelGraph) -> List[PatternMatch]:
    """Conv -> BatchNormalization (-> Relu) left unfolded: BN can be folded into the Conv weights."""
    found = []
    for node in graph.nodes:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul") or not node.outputs:
            continue
        bn = _single_consumer(graph, node.outputs[0])
        if bn is None or bn.op_type != "BatchNormalization":
            continue
        chain = [node.name, bn.name]
        relu = _single_consumer(graph, bn.outputs[0]) if bn.outputs else None
        if relu is not None and relu.op_type in ("Relu", "Clip", "LeakyRelu"):
            chain.append(relu.name)
        found.append(PatternMatch("conv-bn", tuple(chain),
                                  f"{node.op_type} '{node.name}' feeds BatchNormalization '{bn.name}' unfolded; "
                                  "fold BN into the weights (onnxruntime does at opt level basic+, converters often can)"))
    return found


def transpose_pairs(graph: ModelGraph) -> List[PatternMatch]:
    """Transpose -> Transpose whose permutations compose to the identity."""
    found = []
    for node in graph.nodes:
        if node.op_type != "Transpose" or not node.outputs:
            continue
        nxt = _single_consumer(graph, node.outputs[0])
        if nxt is None or nxt.op_type != "Transpose":
            continue
        p1, p2 = _attr(graph, node, "perm"), _attr(graph, nxt, "perm")
        if isinstance(p1, list) and isinstance(p2, list) and len(p1) == len(p2) \
                and [p1[i] for i in p2] == list(range(len(p1))):
            found.append(PatternMatch("transpose-pair", (node.name, nxt.name),
                                      f"Transpose '{node.name}' and '{nxt.name}' cancel out; remove both"))
    return found


def reshape_chains(graph: ModelGraph) -> List[PatternMatch]:
    """Reshape/Flatten/Squeeze/Unsqueeze directly feeding another one: one reshape suffices."""
    kinds = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}
    found = []
    for node in graph.nodes:
        if node.op_type not in kinds or not node.outputs:
            continue
        nxt = _single_consumer(graph, node.outputs[0])
        if nxt is not None and nxt.op_type in kinds:
            found.append(PatternMatch("reshape-chain", (node.name, nxt.name),
                                      f"{node.op_type} '{node.name}' feeds {nxt.op_type} '{nxt.name}'; merge them into one Reshape"))
    return found


def cast_roundtrips(graph: ModelGraph) -> List[PatternMatch]:
    """Cast to T then straight back to the original type."""
    found = []
    for node in graph.nodes:
        if node.op_type != "Cast" or not node.outputs or not node.inputs:
            continue
        nxt = _single_consumer(graph, node.outputs[0])
        if nxt is None or nxt.op_type != "Cast":
            continue
        source = graph.tensor_info(node.inputs[0]).elem_type
        if source and _attr(graph, nxt, "to") == source:
            found.append(PatternMatch("cast-roundtrip", (node.name, nxt.name),
                                      f"Cast '{node.name}' -> Cast '{nxt.name}' returns to {onnx.TensorProto.DataType.Name(source).lower()}; "
                                      "remove both (or keep only if the precision loss is intended)"))
    return found


def identities(graph: ModelGraph) -> List[PatternMatch]:
    return [PatternMatch("identity", (n.name,), f"Identity '{n.name}' does nothing at run time; remove it")
            for n in graph.nodes if n.op_type == "Identity" and not any(o in graph.output_names for o in n.outputs)]


def constant_subgraphs(graph: ModelGraph) -> List[PatternMatch]:
    """Nodes whose inputs are all constants (initializers or Constant outputs), except Constant itself."""
    constant = set(graph.initializer_names)
    found = []
    for node in graph.nodes:
        if node.op_type == "Constant":
            constant.update(o for o in node.outputs if o)
            continue
        inputs = node.all_inputs
        if inputs and all(t in constant for t in inputs) and node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            constant.update(o for o in node.outputs if o)
            found.append(PatternMatch("constant-subgraph", (node.name,),
                                      f"{node.op_type} '{node.name}' computes a constant; fold it (onnxruntime does at load, "
                                      "other runtimes may not)"))
    return found


DETECTORS: Dict[str, Callable[[ModelGraph], List[PatternMatch]]] = {
    "conv-bn": conv_bn,
    "transpose-pair": transpose_pairs,
    "reshape-chain": reshape_chains,
    "cast-roundtrip": cast_roundtrips,
    "identity": identities,
    "constant-subgraph": constant_subgraphs,
}


def find_patterns(graph: ModelGraph, names: Sequence[str] = tuple(DETECTORS)) -> List[PatternMatch]:
    """All matches of the chosen detectors, in detector order then topological order."""
    found: List[PatternMatch] = []
    for name in names:
        found.extend(DETECTORS[name](graph))
    return found
