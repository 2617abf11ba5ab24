"""Structural pairing of a renamed transformer encoder: the Q, K and V projections read the same
tensor with the same op and shape, so only their weights tell them apart (issue 15, planted bug:
deleting the weight-correlation score in compare/pairing/score.py, or flipping its sign, dropped
the correct pairs from 45/45 to 3/45 and no test noticed)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import onnx
from onnx import helper

from inspector_cli.compare.pairing.match import match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ..fixtures.helpers import init, make_model, vi
from ..fixtures.layer_models import renamed

LAYERS, SEQ, DIM = 5, 8, 16  # 16x16 weights: more than 64 values, so compared by correlation


def encoder(seed: int = 0) -> onnx.ModelProto:
    """LAYERS blocks of single-head attention without biases (nothing but the weights separates
    Q, K and V): q/k/v = x @ W; softmax(q @ k^T) @ v @ Wo; residual Add."""
    rng = np.random.default_rng(seed)
    nodes: List[onnx.NodeProto] = []
    inits: List[onnx.TensorProto] = []
    x = "x"
    for layer in range(LAYERS):
        p = f"l{layer}_"
        for role in ("q", "k", "v", "o"):
            inits.append(init(f"{p}W{role}", rng.standard_normal((DIM, DIM)).astype(np.float32) / 4))
        for role in ("q", "k", "v"):
            nodes.append(helper.make_node("MatMul", [x, f"{p}W{role}"], [f"{p}{role}"], name=f"{p}{role}_proj"))
        nodes += [
            helper.make_node("Transpose", [f"{p}k"], [f"{p}kt"], name=f"{p}k_t", perm=[0, 2, 1]),
            helper.make_node("MatMul", [f"{p}q", f"{p}kt"], [f"{p}scores"], name=f"{p}scores"),
            helper.make_node("Softmax", [f"{p}scores"], [f"{p}probs"], name=f"{p}softmax", axis=-1),
            helper.make_node("MatMul", [f"{p}probs", f"{p}v"], [f"{p}ctx"], name=f"{p}ctx"),
            helper.make_node("MatMul", [f"{p}ctx", f"{p}Wo"], [f"{p}attn"], name=f"{p}out_proj"),
            helper.make_node("Add", [x, f"{p}attn"], [f"{p}res"], name=f"{p}residual"),
        ]
        x = f"{p}res"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="final"))
    return make_model(nodes, [vi("x", [1, SEQ, DIM])], [vi("y", [1, SEQ, DIM])], inits)


def reexported(model: onnx.ModelProto) -> Tuple[onnx.ModelProto, Dict[str, str]]:
    """Every name changed, nodes shuffled within each layer's Q/K/V group, weights rounded to fp16
    precision (a re-export): correlations near 1, never exactly equal."""
    copy, names = renamed(model)
    for tensor in copy.graph.initializer:
        value = onnx.numpy_helper.to_array(tensor)
        tensor.CopyFrom(onnx.numpy_helper.from_array(value.astype(np.float16).astype(np.float32), tensor.name))
    nodes = list(copy.graph.node)
    for start in range(0, len(nodes) - 1, 9):  # reverse q, k, v: position must not decide
        nodes[start:start + 3] = nodes[start:start + 3][::-1]
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy, names


def test_renamed_encoder_pairs_every_projection_to_its_own_weights() -> None:
    a = encoder()
    b, names = reexported(a)
    sem_a, sem_b = SemanticGraph.build(ModelGraph.from_proto(a)), SemanticGraph.build(ModelGraph.from_proto(b))
    matching = match_tensors(sem_a, sem_b, inputs=[("x", "x")])
    correct = [p for p in matching.pairs if p.b == names.get(p.a, p.a)]
    wrong = [(p.a, p.b) for p in matching.pairs if p.b != names.get(p.a, p.a)]
    assert wrong == [] and len(correct) == len(sem_a.chain_of) == 45  # 45/45: 9 data tensors per layer (y: an Identity)
    projections = {f"l{i}_{r}" for i in range(LAYERS) for r in "qkv"}
    paired = {p.a: p for p in matching.pairs}
    assert projections <= set(paired)
    for name in projections:  # each chosen by the weights (a tie among three by structure)
        assert paired[name].b == names[name] and paired[name].method == "structural"
    assert not matching.unpaired_a
