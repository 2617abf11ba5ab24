"""Locating original tensors in onnxruntime's optimised graph (compare/pairing/optgraph.py) on a
hand-written "optimised" graph: layouts followed through inserted Transposes and channels-last
kernels, quantisation parameters of QDQ and QOperator nodes, a fused QLinearConv found by its
original node's name (with ORT's `_token_N` suffix) and an output scale equal by value, renamed
fp16 tensors (scripts/mutation.sh pairing: only the slow deployed-capture workflow test reached
this module, and it checked one layout)."""
from __future__ import annotations

from typing import List

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.optgraph import UNKNOWN, OptimizedGraph, OptView
from inspector_cli.compare.pairing.semantic import SemanticGraph, TensorView
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.quantparams import QuantSpec

from ...fixtures.helpers import init, make_model, vi

S_IN, S_OUT = np.array(0.1, np.float32), np.array(0.25, np.float32)
Z = np.array(3, np.uint8)
WQ = np.ones((2, 3, 1, 1), np.uint8)


def original() -> SemanticGraph:
    """x -Q/DQ-> Conv 'conv' -> c -Q 'q_c'/DQ-> Relu -> r; and x -> Cast(fp16) -> h -> Sigmoid -> g."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"], name="q_x"),
        helper.make_node("DequantizeLinear", ["xq", "s_in", "z"], ["xd"], name="dq_x"),
        helper.make_node("Conv", ["xd", "w"], ["c"], name="conv"),
        helper.make_node("QuantizeLinear", ["c", "s_out", "z"], ["cq"], name="q_c"),
        helper.make_node("DequantizeLinear", ["cq", "s_out", "z"], ["cd"], name="dq_c"),
        helper.make_node("Relu", ["cd"], ["r"], name="relu"),
        helper.make_node("Sigmoid", ["x"], ["g"], name="sig"),
        helper.make_node("ArgMax", ["x"], ["i"], name="argmax", axis=1),
    ]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])],
                       [vi("r", [1, 2, 4, 4]), vi("g", [1, 3, 4, 4]), vi("i", [1, 1, 4, 4], TensorProto.INT64)],
                       [init("s_in", S_IN), init("s_out", S_OUT), init("z", Z),
                        init("w", np.ones((2, 3, 1, 1), np.float32))])
    return SemanticGraph.build(ModelGraph.from_proto(model))


def optimised(out_scale: np.ndarray = S_OUT, own_transpose: bool = False) -> OptimizedGraph:
    """What onnxruntime makes of it: NHWC QLinearConv named after 'conv' between inserted Transposes,
    its output scale a shared constant of the same value under another name."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"], name="q_x"),
        helper.make_node("Transpose", ["xq"], ["xt"], name="nhwc_in", perm=[0, 2, 3, 1]),
        helper.make_node("QLinearConv", ["xt", "s_in", "z", "wq", "ws", "z", "s_shared", "z"], ["ct"],
                         name="conv_token_7", domain="com.microsoft", channels_last=1),
        helper.make_node("Transpose", ["ct"], ["ctn"], name="nchw_out", perm=[0, 3, 1, 2]),
        helper.make_node("DequantizeLinear", ["ctn", "s_shared", "z"], ["cd"], name="dq_c"),
        helper.make_node("Relu", ["cd"], ["r"], name="relu"),
        helper.make_node("Sigmoid", ["InsertedPrecisionFreeCast_x"], ["g"], name="sig"),
        helper.make_node("Transpose", ["g"], ["gt"], name="sig_t_token_2" if own_transpose else "ort_t",
                         perm=[0, 2, 3, 1]),
        helper.make_node("Identity", ["gt"], ["gi"], name="id"),
    ]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4]), vi("InsertedPrecisionFreeCast_x", [1, 3, 4, 4])],
                       [vi("r", None), vi("gi", None)],
                       [init("s_in", S_IN), init("z", Z), init("wq", WQ), init("ws", np.array(0.5, np.float32)),
                        init("s_shared", out_scale)])
    graph = ModelGraph.from_proto(model)
    return OptimizedGraph(graph, {"q_x", "conv", "q_c", "dq_c", "relu", "sig", "sig_t"})


def test_layouts_follow_inserted_transposes_and_channels_last_kernels() -> None:
    opt = optimised()
    assert opt.perm["xq"] is None
    assert opt.perm["xt"] == (0, 2, 3, 1)  # an inserted Transpose relays the tensor
    assert opt.perm["ct"] == (0, 2, 3, 1)  # a channels-last kernel writes NHWC
    assert opt.perm["ctn"] is None  # ... and the Transpose back restores NCHW: (0,2,3,1)[(0,3,1,2)] = identity
    assert opt.perm["cd"] is None and opt.perm["r"] is None  # elementwise ops keep the layout
    assert opt.perm["gt"] == (0, 2, 3, 1) and opt.perm["gi"] == (0, 2, 3, 1)  # Identity keeps it too


def test_a_transpose_of_the_model_itself_on_a_relaid_tensor_loses_the_layout() -> None:
    opt = optimised(own_transpose=True)  # 'sig_t_token_2' is the original's 'sig_t'
    assert opt.perm["gt"] is None  # on an NCHW tensor the model's own transpose is the model's business
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], name="ort", perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["a"], ["b"], name="mine", perm=[0, 3, 1, 2]),
        helper.make_node("Relu", ["b"], ["c"], name="relu"),
        helper.make_node("Transpose", ["c"], ["d"], name="ort2", perm=[0, 2, 3, 1]),
        helper.make_node("MaxPool", ["b"], ["e"], name="pool", kernel_shape=[1, 1]),
    ]
    graph = ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("d", None), vi("e", None)]))
    opt = OptimizedGraph(graph, {"mine"})
    # relaid by ORT, then transposed by the model: the layout is no longer known, and stays unknown
    # through elementwise ops and further transposes; an op that is neither starts afresh
    assert opt.perm["a"] == (0, 2, 3, 1) and opt.perm["b"] == UNKNOWN
    assert opt.perm["c"] == UNKNOWN and opt.perm["d"] == UNKNOWN and opt.perm["e"] is None


def test_quantisation_of_qdq_and_qoperator_outputs() -> None:
    opt = optimised()
    assert opt.quant["xq"] == QuantSpec("s_in", "z", 1)  # QuantizeLinear: its output
    assert opt.quant["xt"] == QuantSpec("s_in", "z", 1)  # a Transpose passes the integers' parameters on
    assert opt.quant["ct"] == QuantSpec("s_shared", "z")  # QLinearConv: output scale/zero point at 6, 7
    assert opt.quant["ctn"] == QuantSpec("s_shared", "z")  # DequantizeLinear: its input (set by the Transpose first)
    assert "cd" not in opt.quant and "r" not in opt.quant


def test_a_dequantize_linear_gives_its_input_the_parameters_with_the_axis() -> None:
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["d"], name="dq", axis=0),
             helper.make_node("DequantizeLinear", ["q2", "s"], ["d2"], name="dq2")]
    model = make_model(nodes, [vi("q", [2, 2], TensorProto.UINT8), vi("q2", [2], TensorProto.UINT8)],
                       [vi("d", None), vi("d2", None)],
                       [init("s", np.array([0.5, 2.0], np.float32)), init("zp", np.array([1, 2], np.uint8))])
    opt = OptimizedGraph(ModelGraph.from_proto(model))
    assert opt.quant == {"q": QuantSpec("s", "zp", 0), "q2": QuantSpec("s", None, 1)}
    # per-channel along axis 0: row 0 is (q - 1) * 0.5, row 1 (q - 2) * 2
    values = np.array([[3, 5], [4, 6]], np.uint8)
    assert opt.dequantize(values, opt.quant["q"]).tolist() == [[1.0, 2.0], [4.0, 8.0]]
    # no zero point: 0; a 1-D tensor takes the two scales element by element: 4 * 0.5, 6 * 2
    assert opt.dequantize(np.array([4, 6], np.uint8), opt.quant["q2"]).tolist() == [2.0, 12.0]
    assert opt.array("s").tolist() == [0.5, 2.0] and opt.array("q") is None  # not a stored constant


def test_a_fused_convs_output_is_found_by_the_original_nodes_name_and_the_scales_value() -> None:
    sem, opt = original(), optimised()
    view = sem.view("c")
    assert view == TensorView("cd", "cq", QuantSpec("s_out", "z", 1))
    # 'cq' is gone; 'conv_token_7' carries the Conv's name, its output scale 's_shared' equals 's_out'
    assert opt.locate(sem, view) == OptView("ct", QuantSpec("s_shared", "z"), (0, 2, 3, 1))


def test_another_output_scale_is_another_quantity() -> None:
    sem = original()
    assert optimised(out_scale=np.array(0.5, np.float32)).locate(sem, sem.view("c")) is None
    assert optimised(out_scale=np.array([0.25, 0.25], np.float32)).locate(sem, sem.view("c")) is None  # shape


def test_a_quantised_tensor_kept_under_its_name_is_read_with_its_own_parameters() -> None:
    sem, opt = original(), optimised()
    view = TensorView("xd", "xq", QuantSpec("s_in", "z", 1))
    assert opt.locate(sem, view) == OptView("xq", QuantSpec("s_in", "z", 1), None)
    # kept, but quantised with another scale: not the same integers; nothing fused carries its name
    other = TensorView("xd", "xq", QuantSpec("s_out", "z", 1))
    assert opt.locate(sem, other) is None


def test_float_tensors_by_name_or_by_the_fp16_rename() -> None:
    sem, opt = original(), optimised()
    assert opt.locate(sem, TensorView("r", "r")) == OptView("r", None, None)
    assert opt.locate(sem, TensorView("x", "x")) == OptView("x", None, None)
    assert opt.locate(sem, TensorView("i", "i")) is None  # int64: never a float tensor to read
    assert opt.locate(sem, TensorView("nowhere", "nowhere")) is None


def test_decode_transposes_back_then_dequantises() -> None:
    opt = optimised()
    nhwc = np.arange(24, dtype=np.uint8).reshape(1, 2, 3, 4)  # an NCHW (1, 4, 2, 3) tensor stored NHWC
    view = OptView("ct", QuantSpec("s_shared", "z"), (0, 2, 3, 1))
    decoded = view.decode(nhwc, opt)
    assert decoded.shape == (1, 4, 2, 3)
    expected = (nhwc.transpose(0, 3, 1, 2).astype(np.float32) - 3) * 0.25
    assert np.array_equal(decoded, expected)
    plain = OptView("r").decode(np.ones((1, 2), np.float32), opt)
    assert plain.tolist() == [[1.0, 1.0]]


def through(relus: int, branch: bool = False) -> OptimizedGraph:
    """'conv' kept as a float Conv, then `relus` Relus, then a QuantizeLinear with the output scale."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="conv")]
    for k in range(relus):
        nodes.append(helper.make_node("Relu", [f"t{k}"], [f"t{k + 1}"], name=f"relu{k}"))
    nodes.append(helper.make_node("QuantizeLinear", [f"t{relus}", "s_out", "z"], ["out"], name="q"))
    outputs = [vi("out", None)]
    if branch:  # a second reader of the Conv's output: the value may go elsewhere
        nodes.append(helper.make_node("Sigmoid", ["t0"], ["side"], name="side"))
        outputs.append(vi("side", None))
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], outputs,
                       [init("w", np.ones((2, 3, 1, 1), np.float32)), init("s_out", S_OUT), init("z", Z)])
    return OptimizedGraph(ModelGraph.from_proto(model))


@pytest.mark.parametrize("relus, found", [(0, True), (2, True), (3, False)])
def test_the_quantised_output_is_followed_through_up_to_three_single_consumers(relus: int, found: bool) -> None:
    sem = original()
    expected = OptView("out", QuantSpec("s_out", "z", 1), None) if found else None
    assert through(relus).locate(sem, sem.view("c")) == expected


def test_a_value_read_by_two_nodes_is_not_followed() -> None:
    sem = original()
    assert through(1, branch=True).locate(sem, sem.view("c")) is None


def test_kept_names_are_read_in_their_layout() -> None:
    sem, opt = original(), optimised()
    # 'gi' is a float tensor only the optimised graph has (type unknown to the original): relaid NHWC
    assert opt.locate(sem, TensorView("gi", "gi")) == OptView("gi", None, (0, 2, 3, 1))
    # 'xt', the quantised input relaid by an inserted Transpose, kept under its name
    assert opt.locate(sem, TensorView("xd", "xt", QuantSpec("s_in", "z", 1))) == \
        OptView("xt", QuantSpec("s_in", "z", 1), (0, 2, 3, 1))
    # an integer tensor is not read as a float one, though the name is there
    assert opt.locate(sem, TensorView("xq", "xq")) is None


def test_a_kept_quantised_name_is_found_whatever_its_producer_is_called() -> None:
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"], name="renamed_by_ort")]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("xq", None)], [init("s_in", S_IN), init("z", Z)])
    opt = OptimizedGraph(ModelGraph.from_proto(model))
    view = TensorView("xd", "xq", QuantSpec("s_in", "z", 1))
    assert opt.locate(original(), view) == OptView("xq", QuantSpec("s_in", "z", 1), None)
    # a quantised tensor the original does not produce, and that is not kept: nothing to follow
    assert opt.locate(original(), TensorView("n", "nowhere", QuantSpec("s_in", "z", 1))) is None


def test_the_quantise_nodes_name_is_followed_when_the_producers_is_gone() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="fused_away"),
             helper.make_node("QuantizeLinear", ["t0", "s_out", "z"], ["out"], name="q_c")]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("out", None)],
                       [init("w", np.ones((2, 3, 1, 1), np.float32)), init("s_out", S_OUT), init("z", Z)])
    sem = original()
    assert OptimizedGraph(ModelGraph.from_proto(model)).locate(sem, sem.view("c")) == \
        OptView("out", QuantSpec("s_out", "z", 1), None)


def test_a_named_node_whose_output_nothing_reads_holds_nothing_quantised() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="conv")]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("t0", None)], [init("w", np.ones((2, 3, 1, 1), np.float32))])
    sem = original()
    assert OptimizedGraph(ModelGraph.from_proto(model)).locate(sem, sem.view("c")) is None


def test_an_unknown_layout_is_not_read() -> None:
    nodes = [helper.make_node("Transpose", ["x"], ["a"], name="ort", perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["a"], ["b"], name="mine", perm=[0, 3, 1, 2])]
    opt = OptimizedGraph(ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("b", None)])), {"mine"})
    assert opt.locate(original(), TensorView("b", "b")) is None
    assert opt.locate(original(), TensorView("a", "a")) == OptView("a", None, (0, 2, 3, 1))


@pytest.mark.parametrize("op, attrs, extra", [
    ("MaxPool", {"kernel_shape": [1, 1]}, []), ("NhwcMaxPool", {"kernel_shape": [1, 1]}, []),
    ("Reshape", {}, ["shape"]), ("Flatten", {}, []), ("Squeeze", {}, []), ("Unsqueeze", {}, ["axes"]),
    ("Identity", {}, []), ("Slice", {}, ["starts", "ends"]), ("Gather", {}, ["idx"]),
])
def test_integer_passthrough_ops_keep_the_parameters(op: str, attrs: dict, extra: List[str]) -> None:
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"], name="q"),
             helper.make_node(op, ["xq", *extra], ["out"], name="op", **attrs),
             helper.make_node("Relu", ["xq"], ["other"], name="relu")]
    inits = [init("s_in", S_IN), init("z", Z), init("shape", np.array([-1], np.int64)), init("axes", np.array([0], np.int64)),
             init("starts", np.array([0], np.int64)), init("ends", np.array([1], np.int64)), init("idx", np.array([0], np.int64))]
    opt = OptimizedGraph(ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("out", None), vi("other", None)], inits)))
    assert opt.quant["out"] == QuantSpec("s_in", "z", 1)
    assert "other" not in opt.quant  # a Relu computes: its output has no parameters of its own here


def test_qoperator_parameters_need_the_inputs_that_hold_them() -> None:
    nodes = [helper.make_node("QLinearSigmoid", ["xq", "s", "z", "so", "zo"], ["full"], name="a", domain="com.microsoft"),
             helper.make_node("QLinearSigmoid", ["xq", "s", "z", "so"], ["no_zero"], name="b", domain="com.microsoft"),
             helper.make_node("QLinearSigmoid", ["xq", "s", "z", "so", ""], ["empty_zero"], name="c", domain="com.microsoft"),
             helper.make_node("QLinearSigmoid", ["xq", "s", "z"], ["truncated"], name="d", domain="com.microsoft")]
    model = make_model(nodes, [vi("xq", [4], TensorProto.UINT8)],
                       [vi(n, None) for n in ("full", "no_zero", "empty_zero", "truncated")])
    opt = OptimizedGraph(ModelGraph.from_proto(model))
    assert opt.quant == {"full": QuantSpec("so", "zo"), "no_zero": QuantSpec("so", None),
                         "empty_zero": QuantSpec("so", None)}


def test_an_elementwise_op_takes_the_layout_of_its_data_input_not_of_a_constant() -> None:
    nodes = [helper.make_node("Transpose", ["x"], ["a"], name="ort", perm=[0, 2, 3, 1]),
             helper.make_node("Add", ["bias", "a"], ["b"], name="add"),
             helper.make_node("Constant", [], ["k"], name="const", value=helper.make_tensor("v", TensorProto.FLOAT, [], [1.0]))]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("b", None), vi("k", None)],
                       [init("bias", np.ones((1, 4, 4, 3), np.float32))])
    opt = OptimizedGraph(ModelGraph.from_proto(model))
    assert opt.perm["b"] == (0, 2, 3, 1) and opt.perm["k"] is None  # a node without data inputs: no layout


def test_an_inserted_transpose_from_a_tensor_of_its_own_to_an_original_one_is_a_moved_transpose() -> None:
    """Llama's rotary embedding (issue 30): the model's MatMul -> Transpose -> Concat is run as MatMul ->
    Concat 'cat' (onnxruntime's tensor) -> inserted Transpose writing the original 'c': 'c' is in the
    original layout. From an original tensor, an inserted Transpose is still a relayout."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Concat", ["m", "m"], ["cat"], name="cat", axis=-1),
             helper.make_node("Transpose", ["cat"], ["c"], name="Transpose", perm=[0, 2, 1]),
             helper.make_node("Transpose", ["m"], ["mt"], name="Transpose_1", perm=[0, 2, 1]),
             helper.make_node("Transpose", ["InsertedPrecisionFreeCast_m"], ["m2"], name="Transpose_2", perm=[0, 2, 1])]
    model = make_model(nodes, [vi("x", [1, 8, 4]), vi("InsertedPrecisionFreeCast_m", [1, 8, 16])],
                       [vi("c", None), vi("mt", None), vi("m2", None)], [init("w", np.ones((4, 16), np.float32))])
    original = {"x", "m", "t", "c", "out", "m2"}
    opt = OptimizedGraph(ModelGraph.from_proto(model), {"mm", "tr", "cat", "cos"}, original)
    assert opt.perm["c"] is None
    assert opt.perm["mt"] == (0, 2, 1) and opt.perm["m2"] == (0, 2, 1)
    assert OptimizedGraph(ModelGraph.from_proto(model), {"mm", "tr", "cat", "cos"}).perm["c"] == (0, 2, 1)
