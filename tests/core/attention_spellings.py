"""Attention masks as other exporters spell them (issue 42), each a small explicit graph.

The ONNX `Attention` function (opset 23/24, the backend tests' `test_attention_*_expanded`) builds its
bias with `Where(mask, 0, -inf)`, pads it with -inf, tests "is the row's max -inf?" with
`Equal(ReduceMax(bias), CastLike(-inf))` and replaces the rows that test true with 0 after the
Softmax; a caller may pass the additive mask as a float input holding -inf; the masked scores may be
an output; the fused ops (the ONNX `Attention` op, onnxruntime's `MultiHeadAttention`) take the bias
as an input. Every -inf here is intended.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.fixtures.helpers import init, make_model, save, vi

F, B = TensorProto.FLOAT, TensorProto.BOOL
ALLOWED = np.array([[True, True, False], [False, False, False]])
"""Query 0 sees keys 0 and 1; query 1 sees nothing (a fully masked row)."""
SCORES = np.array([[[[0.0, np.log(3.0), 5.0], [1.0, 2.0, 3.0]]]], np.float32)
"""[1, 1, 2, 3]: row 0 over its open keys is softmax([0, ln 3]) = [0.25, 0.75]."""


def _constant(name: str, value: float) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=f"const_{name}",
                            value=numpy_helper.from_array(np.array([value], np.float32), name))


def _row_guard(bias: str, probs: str, out: str) -> List[onnx.NodeProto]:
    """The ONNX Attention function's tail: rows whose bias is -inf everywhere become 0, not NaN."""
    return [helper.make_node("ReduceMax", [bias, "last_axis"], ["row_max"], name="row_max", keepdims=1),
            helper.make_node("CastLike", ["neginf", bias], ["neginf_like"], name="neginf_like"),
            helper.make_node("Equal", ["row_max", "neginf_like"], ["row_all_masked"], name="row_all_masked"),
            helper.make_node("CastLike", ["zero", probs], ["zero_like"], name="zero_like"),
            helper.make_node("Where", ["row_all_masked", "zero_like", probs], [out], name="row_guard")]


def row_guard_model(path: Path) -> Path:
    """bias = Where(allowed, 0, -inf); p = Cast(Softmax(scores + bias)); y = Where(rowmax(bias) == -inf, 0, p).

    Inputs: scores [1, 1, 2, 3] float, allowed [2, 3] bool."""
    nodes = [_constant("zero", 0.0), _constant("neginf", -np.inf),
             helper.make_node("Where", ["allowed", "zero", "neginf"], ["bias"], name="bias_where"),
             helper.make_node("Add", ["scores", "bias"], ["s"], name="bias_add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
             helper.make_node("Cast", ["p"], ["p_out"], name="softmax_cast", to=F),
             *_row_guard("bias", "p_out", "y")]
    model = make_model(nodes, [vi("scores", [1, 1, 2, 3]), vi("allowed", [2, 3], B)], [vi("y", [1, 1, 2, 3])],
                       [init("last_axis", np.array([-1], np.int64))], opset=18)
    return save(model, path)


def sentinel_model(path: Path) -> Path:
    """No mask at all, only the guard: the -inf constant is compared, never computed with
    (test_attention_4d_expanded). y = Where(rowmax(x) == -inf, 0, x). Input x [2, 3]."""
    nodes = [_constant("zero", 0.0), _constant("neginf", -np.inf), *_row_guard("x", "x", "y")]
    model = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], [init("last_axis", np.array([-1], np.int64))],
                       opset=18)
    return save(model, path)


def padded_mask_model(path: Path) -> Path:
    """The opset-24 spelling: the bias of 2 keys padded with -inf to 3 keys (Pad's constant_value).
    Inputs: scores [1, 1, 2, 3], allowed [2, 2] bool."""
    nodes = [_constant("zero", 0.0), _constant("neginf", -np.inf),
             helper.make_node("Where", ["allowed", "zero", "neginf"], ["bias_short"], name="bias_where"),
             helper.make_node("CastLike", ["neginf", "bias_short"], ["pad_value"], name="pad_value"),
             helper.make_node("Pad", ["bias_short", "pads", "pad_value"], ["bias"], name="bias_pad"),
             helper.make_node("Add", ["scores", "bias"], ["s"], name="bias_add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1)]
    model = make_model(nodes, [vi("scores", [1, 1, 2, 3]), vi("allowed", [2, 2], B)], [vi("p", [1, 1, 2, 3])],
                       [init("pads", np.array([0, 0, 0, 1], np.int64))], opset=18)
    return save(model, path)


def input_mask_model(path: Path) -> Path:
    """The caller's additive mask: s = q @ k^T + Identity(attn_mask); p = Softmax(s).
    Inputs: q, k [1, 1, 2, 4], attn_mask [2, 2] float holding -inf where a query may not look."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="k_transpose", perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
             helper.make_node("Identity", ["attn_mask"], ["bias"], name="bias_copy"),
             helper.make_node("Add", ["qk", "bias"], ["s"], name="bias_add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1)]
    model = make_model(nodes, [vi("q", [1, 1, 2, 4]), vi("k", [1, 1, 2, 4]), vi("attn_mask", [2, 2])],
                       [vi("p", [1, 1, 2, 2])])
    return save(model, path)


def exported_scores_model(path: Path) -> Path:
    """torch's SDPA mask with the masked scores also an output (the Attention op's qk_matmul_output):
    m = Where(causal, 0, -inf); s = scores + m; outputs Softmax(s) and Identity(s).
    Inputs: scores [1, 1, 2, 3], allowed [2, 3] bool (row 1 keeps key 0 open here)."""
    nodes = [_constant("zero", 0.0), _constant("neginf", -np.inf),
             helper.make_node("Where", ["allowed", "zero", "neginf"], ["m"], name="mask_where"),
             helper.make_node("Add", ["scores", "m"], ["s"], name="mask_add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
             helper.make_node("Identity", ["s"], ["scores_out"], name="scores_out")]
    model = make_model(nodes, [vi("scores", [1, 1, 2, 3]), vi("allowed", [2, 3], B)],
                       [vi("p", [1, 1, 2, 3]), vi("scores_out", [1, 1, 2, 3])])
    return save(model, path)


def fused_model(path: Path, op: str) -> Path:
    """bias = Where(causal, 0, -inf) fed to a fused attention op: the ONNX `Attention` op (opset 23,
    input 3 attn_mask; q, k, v [1, 2, 4, 4]) or onnxruntime's `MultiHeadAttention` (input 5
    attention_bias; q, k, v [1, 4, 8], 2 heads)."""
    causal = np.tril(np.ones((4, 4), bool))[None, None]
    nodes = [_constant("zero", 0.0), _constant("neginf", -np.inf),
             helper.make_node("Where", ["causal", "zero", "neginf"], ["bias"], name="bias_where")]
    if op == "Attention":
        shape: List[int] = [1, 2, 4, 4]
        nodes.append(helper.make_node("Attention", ["q", "k", "v", "bias"], ["y"], name="attention"))
        opsets = [helper.make_opsetid("", 23)]
    else:
        shape = [1, 4, 8]
        nodes.append(helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "bias"], ["y"], name="attention",
                                      domain="com.microsoft", num_heads=2))
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    graph = helper.make_graph(nodes, "g", [vi(n, shape) for n in "qkv"], [vi("y", shape)], [init("causal", causal)])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10 if op == "Attention" else 8
    return save(model, path)


def fused_inputs(op: str, seed: int = 0) -> dict:
    shape = (1, 2, 4, 4) if op == "Attention" else (1, 4, 8)
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(shape).astype(np.float32) for n in "qkv"}


def empty_reduction_model(path: Path, op: str, data_shape: Optional[list] = None) -> Path:
    """reduced = OP(data, axes=[1]) (keepdims) over data [2, 0, 4] (or `data_shape`): the backend
    tests' test_reduce_*_empty_set. op 'LogOfSum' is the spelled-out ReduceLogSum: Log(ReduceSum)."""
    axes = init("axes", np.array([1], np.int64))
    if op == "LogOfSum":
        nodes = [helper.make_node("ReduceSum", ["data", "axes"], ["sum"], name="reduce_sum", keepdims=1),
                 helper.make_node("Log", ["sum"], ["reduced"], name="log")]
    else:
        nodes = [helper.make_node(op, ["data", "axes"], ["reduced"], name="reduce", keepdims=1)]
    model = make_model(nodes, [vi("data", data_shape or [2, 0, 4])], [vi("reduced", [2, 1, 4])], [axes], opset=18)
    return save(model, path)


def triu_mask_model(path: Path) -> Path:
    """nn.Transformer's square subsequent mask with the length known at run time only:
    m = Trilu(ConstantOfShape(shape(scores)[-2:], -inf), k=1); p = Softmax(scores + m).
    Input: scores [1, 1, L, L]."""
    nodes = [helper.make_node("Shape", ["scores"], ["dims"], name="dims", start=-2),
             helper.make_node("ConstantOfShape", ["dims"], ["full"], name="full",
                              value=numpy_helper.from_array(np.array([-np.inf], np.float32))),
             helper.make_node("Trilu", ["full", "one"], ["m"], name="triu", upper=1),
             helper.make_node("Add", ["scores", "m"], ["s"], name="mask_add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1)]
    model = make_model(nodes, [vi("scores", [1, 1, "L", "L"])], [vi("p", [1, 1, "L", "L"])],
                       [init("one", np.array(1, np.int64))])
    return save(model, path)
