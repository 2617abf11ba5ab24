"""Names of a QDQ model's nodes as the fp32 model (and so the quantiser) knows them.

onnxruntime's quantize_static keeps node names, so an exclude list is the QDQ names as they are.
Another tool may rename everything (`n17`, `t42`): then each QDQ compute node is paired with an
fp32 node through the tensor pairing of `compare --layers` (compare/pairing: structure, Q/DQ
transparency, fused chains), and within a fused chain of the fp32 model (Conv+Relu) with the node
of the same op type.
"""
from __future__ import annotations

from typing import Dict, Sequence

import onnx

from ..core.graph import ModelGraph
from ..compare.pairing.match import match_tensors
from ..compare.pairing.semantic import SemanticGraph

_QDQ = ("QuantizeLinear", "DequantizeLinear")


def fp32_node_names(fp32: onnx.ModelProto, qdq: onnx.ModelProto, nodes: Sequence[str]) -> Dict[str, str]:
    """QDQ node name -> fp32 node name for `nodes`; names found in both models with the same op type
    map to themselves; nodes with no counterpart are left out."""
    ref = {n.name: n.op_type for n in fp32.graph.node if n.name}
    own = {n.name: n.op_type for n in qdq.graph.node if n.name}
    mapping = {n: n for n in nodes if n in ref and ref[n] == own.get(n)}
    missing = [n for n in nodes if n not in mapping]
    if not missing:
        return mapping
    ga, gb = ModelGraph.from_proto(onnx.ModelProto.FromString(fp32.SerializeToString())), \
        ModelGraph.from_proto(onnx.ModelProto.FromString(qdq.SerializeToString()))
    sa, sb = SemanticGraph.build(ga), SemanticGraph.build(gb)
    inputs = [(x, y) for x, y in zip(ga.input_names, gb.input_names)]
    matching = match_tensors(sa, sb, inputs=inputs)
    for pair in matching.pairs:
        node_b = gb.producer_through(pair.b, _QDQ)
        if node_b is None or node_b.name not in missing:
            continue
        chain = sa.chain_of.get(pair.a)
        candidates = chain.nodes if chain is not None else []
        same = [n for n in candidates if n.op_type == node_b.op_type]
        if same:
            mapping.setdefault(node_b.name, same[0].name)
    return mapping

