"""Aligning two located chains (match._Matcher.align): fused ends, the reasons given to the unfused
interior on each side, extra outputs; candidates whose names another chain claims; chains that
extend only over single readers (scripts/mutation.sh pairing)."""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import helper

from inspector_cli.compare.pairing.match import match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi
from .chains import W, append_step


def sem(nodes: List[onnx.NodeProto], outputs: List[str], inits=(), x: str = "x") -> SemanticGraph:
    model = make_model(nodes, [vi(x, [1, 3, 4, 4])], [vi(o, None) for o in outputs], list(inits))
    return SemanticGraph.build(ModelGraph.from_proto(model))


def conv_chain(ops: List[str], x: str, prefix: str) -> SemanticGraph:
    """x -> Conv -> [BatchNormalization] -> Relu, tensors named prefix + op."""
    nodes, t, inits = [], x, [init("w", W)]
    for op in ops:
        out = prefix + op.lower()
        append_step(op, t, out, nodes, inits)
        t = out
    return sem(nodes, [t], inits, x)


def test_the_reference_runs_the_batchnorm_the_candidate_folded() -> None:
    a = conv_chain(["Conv", "BatchNormalization", "Relu"], "x", "a_")
    b = conv_chain(["Conv", "Relu"], "in", "b_")
    m = match_tensors(a, b, inputs=[("x", "in")])
    pairs = {p.a: p for p in m.pairs}
    # the Relus align from the end; Conv+BN of A then matches B's Conv: fused
    assert (pairs["a_relu"].b, pairs["a_relu"].method) == ("b_relu", "structural")
    assert (pairs["a_batchnormalization"].b, pairs["a_batchnormalization"].method) == ("b_conv", "fused")
    assert pairs["a_batchnormalization"].op_a == "Conv+BatchNormalization"
    assert [(u.tensor, u.reason) for u in m.unpaired_a] == [
        ("a_conv", "fused into 'a_batchnormalization' (Conv+BatchNormalization) to match Conv in the other model")]
    assert m.unpaired_b == []


def test_the_candidate_runs_the_batchnorm_the_reference_folded() -> None:
    a = conv_chain(["Conv", "Relu"], "x", "a_")
    b = conv_chain(["Conv", "BatchNormalization", "Relu"], "in", "b_")
    m = match_tensors(a, b, inputs=[("x", "in")])
    pairs = {p.a: p for p in m.pairs}
    assert (pairs["a_conv"].b, pairs["a_conv"].method) == ("b_batchnormalization", "fused")
    assert [(u.tensor, u.reason) for u in m.unpaired_b] == [
        ("b_conv", "fused: Conv+BatchNormalization matches Conv of the reference")]


def adds(count: int, x: str, prefix: str) -> SemanticGraph:
    """x -> Add(c) -> ... count times: one chain (an Add follows an Add)."""
    nodes, t = [], x
    for k in range(count):
        nodes.append(helper.make_node("Add", [t, "c"], [f"{prefix}{k}"], name=f"{prefix}{k}"))
        t = f"{prefix}{k}"
    return sem(nodes, [t], [init("c", np.array(1.0, np.float32))], x)


def test_a_head_repeated_in_the_longer_chain_is_not_aligned_past_the_head() -> None:
    one, two = adds(1, "x", "a"), adds(2, "in", "b")
    m = match_tensors(one, two, inputs=[("x", "in")])
    assert [(p.a, p.b, p.method) for p in m.pairs] == [("a0", "b1", "fused")]
    assert [(u.tensor, u.reason) for u in m.unpaired_b] == [("b0", "fused: Add+Add matches Add of the reference")]
    back = match_tensors(two, one, inputs=[("in", "x")])
    assert [(p.a, p.b, p.method) for p in back.pairs] == [("b1", "a0", "fused")]
    assert [(u.tensor, u.reason) for u in back.unpaired_a] == [
        ("b0", "fused into 'b1' (Add+Add) to match Add in the other model")]


def test_extra_outputs_of_a_multi_output_head_pair_as_chain_ends() -> None:
    def split(x: str, prefix: str) -> SemanticGraph:
        node = helper.make_node("Split", [x, "sizes"], [prefix + "0", prefix + "1"], name=prefix, axis=1)
        return sem([node], [prefix + "0", prefix + "1"], [init("sizes", np.array([1, 2], np.int64))], x)

    m = match_tensors(split("x", "a"), split("in", "b"), inputs=[("x", "in")])
    pairs = {p.a: p for p in m.pairs}
    assert (pairs["a1"].b, pairs["a1"].op_a, pairs["a1"].op_b, pairs["a1"].chain_end) == ("b1", "Split", "Split", True)
    assert pairs["a0"].b == "b0"


def test_a_candidate_named_like_another_reference_chain_is_not_taken_by_structure() -> None:
    # A: s = Sigmoid(x), t = Tanh(x); B computes the same but names them crosswise
    a = sem([helper.make_node("Sigmoid", ["x"], ["s"], name="n1"), helper.make_node("Tanh", ["x"], ["t"], name="n2")],
            ["s", "t"])
    b = sem([helper.make_node("Sigmoid", ["in"], ["t"], name="m1"), helper.make_node("Tanh", ["in"], ["s"], name="m2")],
            ["s", "t"], x="in")
    m = match_tensors(a, b, inputs=[("x", "in")])
    assert m.pairs == []  # the names say "t" is A's Tanh: structure alone must not pair it with A's Sigmoid
    assert {u.tensor: u.reason for u in m.unpaired_a} == {
        "s": "same name, but 's' in the other model is computed by Tanh, not Sigmoid",
        "t": "same name, but 't' in the other model is computed by Sigmoid, not Tanh"}


def test_a_chain_extends_only_over_a_value_read_once() -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "bias"], ["a"], name="add"),
             helper.make_node("Relu", ["m"], ["r"], name="relu")]
    model = make_model(nodes, [vi("x", [1, 4])], [vi("a", None), vi("r", None)],
                       [init("w", np.ones((4, 4), np.float32)), init("bias", np.ones(4, np.float32))])
    graph = SemanticGraph.build(ModelGraph.from_proto(model))
    # m has two readers: the Add cannot be fused into the MatMul, nor the Relu
    assert [c.ops() for c in graph.chains] == ["MatMul", "Add", "Relu"]
    assert [n.name for n in graph.consumers("m")] == ["add", "relu"]
