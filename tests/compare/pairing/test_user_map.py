"""The user's map (`--map a=b`) in match_tensors: every field of the pair it makes, the views of
exactly the named tensors (the candidate's int8 tensor read dequantised), the op strings up to
the mapped step, and the anchor that lets the next chain pair by structure (scripts/mutation.sh
pairing: only the slow workflow tests reached user_pair, and they checked none of this)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.match import TensorPair, match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph, TensorView
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.quantparams import QuantSpec

from ...fixtures.helpers import init, make_model, vi

W = np.arange(16, dtype=np.float32).reshape(4, 4) / 16
BIAS = np.array([0.5, -0.5, 0.25, 0.0], np.float32)


def reference() -> onnx.ModelProto:
    """x -> MatMul -> m -> Add -> a -> Relu -> r -> Softmax -> s, and r -> ArgMax -> i (int64)."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "bias"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=-1),
        helper.make_node("ArgMax", ["r"], ["i"], name="argmax", axis=-1),
    ]
    return make_model(nodes, [vi("x", [1, 4])], [vi("s", [1, 4]), vi("i", [1, 1], TensorProto.INT64)],
                      [init("W", W), init("bias", BIAS)])


def candidate() -> onnx.ModelProto:
    """The same renamed, the MatMul output quantised (Q -> int8 'mq' -> DQ) before the bias."""
    nodes = [
        helper.make_node("MatMul", ["in", "W2"], ["m2"], name="mm2"),
        helper.make_node("QuantizeLinear", ["m2", "sc", "zp"], ["mq"], name="q"),
        helper.make_node("DequantizeLinear", ["mq", "sc", "zp"], ["md"], name="dq"),
        helper.make_node("Add", ["md", "bias2"], ["a2"], name="add2"),
        helper.make_node("Relu", ["a2"], ["r2"], name="relu2"),
        helper.make_node("Softmax", ["r2"], ["s2"], name="softmax2", axis=-1),
        helper.make_node("ArgMax", ["r2"], ["i2"], name="argmax2", axis=-1),
    ]
    return make_model(nodes, [vi("in", [1, 4])], [vi("s2", [1, 4]), vi("i2", [1, 1], TensorProto.INT64)],
                      [init("W2", W), init("bias2", BIAS), init("sc", np.array(0.05, np.float32)),
                       init("zp", np.array(0, np.int8))])


def matched(user_map):
    a = SemanticGraph.build(ModelGraph.from_proto(reference()))
    b = SemanticGraph.build(ModelGraph.from_proto(candidate()))
    return match_tensors(a, b, inputs=[("x", "in")], user_map=user_map)


def test_a_mapped_inner_tensor_is_paired_exactly_as_named() -> None:
    pairs = {p.a: p for p in matched([("m", "mq")]).pairs}
    assert pairs["m"] == TensorPair(
        a="m", b="m2",  # canonical names: 'mq' is the Q->DQ re-materialisation of 'm2'
        view_a=TensorView("m", "m"),  # a float tensor: read as is
        view_b=TensorView("mq", "mq", QuantSpec("sc", "zp", 1)),  # the int8 tensor named, dequantised
        method="map", confidence=1.0, located_by="map", evidence="--map m=mq",
        op_a="MatMul", op_b="MatMul",  # the ops up to the mapped step, not the whole chain
        chain_end=False)  # inside MatMul+Add+Relu


def test_a_mapped_chain_end_anchors_the_next_chain() -> None:
    matching = matched([("r", "r2")])
    pairs = {p.a: p for p in matching.pairs}
    assert (pairs["r"].op_a, pairs["r"].op_b, pairs["r"].chain_end) == ("MatMul+Add+Relu", "MatMul+Add+Relu", True)
    assert (pairs["r"].view_a, pairs["r"].view_b) == (TensorView("r", "r"), TensorView("r2", "r2"))
    # the Softmax reads the mapped tensor: its inputs are paired, so it pairs by structure
    assert pairs["s"].b == "s2" and pairs["s"].method == "structural" and pairs["s"].located_by == "structure"
    assert pairs["s"].evidence == "inputs paired, same size"


def test_without_the_map_the_renamed_chain_pairs_by_structure_from_the_input() -> None:
    pairs = {p.a: p for p in matched([]).pairs}
    assert pairs["r"].b == "r2" and pairs["r"].method == "structural" and pairs["s"].b == "s2"


def test_a_tensor_outside_every_chain_maps_with_unknown_ops() -> None:
    # ArgMax gives integers that are not quantised values: no chain holds them
    pairs = {p.a: p for p in matched([("i", "i2")]).pairs}
    assert pairs["i"] == TensorPair(a="i", b="i2", view_a=TensorView("i", "i"), view_b=TensorView("i2", "i2"),
                                    method="map", confidence=1.0, located_by="map", evidence="--map i=i2",
                                    op_a="?", op_b="?", chain_end=True)


def test_the_pairs_are_counted_by_method() -> None:
    assert matched([("r", "r2")]).counts() == {"map": 1, "structural": 1}  # r mapped; s by structure
    assert matched([("m", "mq")]).counts() == {"map": 1}  # the rest of m's chain stays unpaired
    # m is read through the candidate's Q/DQ (qdq); a, r and s by structure
    assert matched([]).counts() == {"qdq": 1, "structural": 3}
