"""Graph patterns shared by validate and profile hints, and reading weights."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.patterns import find_patterns
from inspector_cli.core.weights import nonfinite_initializers

from ..fixtures.helpers import init, make_model, vi


def test_each_pattern_is_found():
    w = np.ones((4, 3, 1, 1), np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Transpose", ["r"], ["t1"], name="tA", perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["t1"], ["t2"], name="tB", perm=[0, 3, 1, 2]),
        helper.make_node("Cast", ["t2"], ["h"], name="to16", to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["h"], ["f"], name="to32", to=TensorProto.FLOAT),
        helper.make_node("Identity", ["f"], ["i"], name="ident"),
        helper.make_node("Flatten", ["i"], ["fl"], name="flat"),
        helper.make_node("Reshape", ["fl", "shape"], ["y"], name="reshape"),
        helper.make_node("Mul", ["s", "s"], ["s2"], name="const_mul"),
    ]
    ones = np.ones(4, np.float32)
    model = make_model(nodes, [vi("x", [1, 3, 2, 2])], [vi("y", [1, 16]), vi("s2", [4])],
                       [init("w", w), init("s", ones), init("b", ones), init("m", ones), init("v", ones),
                        init("shape", np.array([1, 16], np.int64))])
    matches = {m.pattern: m.nodes for m in find_patterns(ModelGraph.from_proto(model))}
    assert matches == {
        "conv-bn": ("conv", "bn", "relu"),
        "transpose-pair": ("tA", "tB"),
        "cast-roundtrip": ("to16", "to32"),
        "identity": ("ident",),
        "reshape-chain": ("flat", "reshape"),
        "constant-subgraph": ("const_mul",),
    }


def test_transposes_that_do_not_cancel_are_left_alone():
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], name="a", perm=[1, 2, 0]),
             helper.make_node("Transpose", ["t1"], ["y"], name="b", perm=[1, 2, 0])]
    model = make_model(nodes, [vi("x", [2, 3, 4])], [vi("y", [4, 2, 3])])
    assert find_patterns(ModelGraph.from_proto(model), ["transpose-pair"]) == []


def test_nonfinite_initializers_with_consumers():
    w = np.ones(4, np.float32)
    w[1], w[2] = np.nan, np.inf
    model = make_model([helper.make_node("Mul", ["x", "w"], ["y"], name="scale")], [vi("x", [4])], [vi("y", [4])],
                       [init("w", w)])
    (bad,) = nonfinite_initializers(ModelGraph.from_proto(model))
    assert (bad.tensor, bad.nan, bad.inf, bad.size, bad.consumers) == ("w", 1, 1, 4, ("scale",))


def test_structure_diff_of_fp32_and_qdq(cnn_pair):
    from inspector_cli.core.graph import load_model
    from inspector_cli.core.structure import structure_diff

    fp32, int8, _ = cnn_pair
    diff = structure_diff(load_model(fp32), load_model(int8))
    assert diff.op_counts["Conv"][0] == diff.op_counts["Conv"][1] > 0
    assert diff.op_counts["QuantizeLinear"][0] == 0 and diff.qdq_pairs[0] == 0 and diff.qdq_pairs[1] > 10
    assert diff.op_counts["BatchNormalization"] == (diff.op_counts["BatchNormalization"][0], 0)
    assert "BatchNormalization" in diff.only_a  # folded by quantisation pre-processing
    assert diff.signature == []
    assert diff.initializer_bytes[1] < diff.initializer_bytes[0]  # int8 weights


def test_structure_signature_differences():
    from inspector_cli.core.structure import structure_diff

    from ..fixtures.helpers import affine_model

    a = ModelGraph.from_proto(affine_model(shape=(1, 4)))
    b = ModelGraph.from_proto(affine_model(shape=(1, 8), out="z"))
    sig = {(d.kind, d.name): (d.a, d.b) for d in structure_diff(a, b).signature}
    assert sig == {("input", "x"): ("float32 [1, 4]", "float32 [1, 8]"),
                   ("output", "y"): ("float32 [1, 4]", "-"), ("output", "z"): ("-", "float32 [1, 8]")}
