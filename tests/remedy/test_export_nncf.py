"""The NNCF ignored scope of a plan (remedy/export.py): what NNCF must ignore for its rebuild to leave float
what the plan leaves float.

NNCF places a quantiser on every input of an op it quantises and moves it up through Reshape and the like:
its int8 EfficientNet and ResNet hold the classifier Gemm's input quantiser on the pool's output. The plan
(onnxruntime's rules) drops that pool's output quantiser once the op before the pool is in float; an ignored
scope without the Gemm kept it: NNCF's rebuild of EfficientNet's plan read all-zero logits (the pool's
quantiser saturates) where the plan's model read cosine 0.99. Fails on the code before: the scope held the
float nodes only (no Gemm, no `readers`).

Since, the plan models a reader through movable ops (Reshape, Pad...) as both rebuilds make it: the Gemm gets a
pair of its own on its input (exclusion._requantise_input), so it needs no ignoring; a reader behind an op
that changes the range (MaxPool) still reads float in the plan and is ignored."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.remedy.exclusion import Quantisers, exclude_qdq
from inspector_cli.remedy.export import nncf_readers, nncf_scope
from inspector_cli.remedy.remedies import Applied


def _pair(nodes, inits, tensor: str, scale: float) -> str:
    """tensor -> QuantizeLinear -> DequantizeLinear (uint8, zero point 0); returns the dequantised name."""
    inits += [numpy_helper.from_array(np.array(scale, np.float32), f"{tensor}_scale"),
              numpy_helper.from_array(np.array(0, np.uint8), f"{tensor}_zero")]
    nodes += [helper.make_node("QuantizeLinear", [tensor, f"{tensor}_scale", f"{tensor}_zero"], [f"{tensor}_q"],
                               name=f"{tensor}_QuantizeLinear"),
              helper.make_node("DequantizeLinear", [f"{tensor}_q", f"{tensor}_scale", f"{tensor}_zero"],
                               [f"{tensor}_dq"], name=f"{tensor}_DequantizeLinear")]
    return f"{tensor}_dq"


def _weight(nodes, inits, name: str, shape) -> str:
    inits += [numpy_helper.from_array(np.ones(shape, np.int8), f"{name}_int8"),
              numpy_helper.from_array(np.array(0.01, np.float32), f"{name}_scale"),
              numpy_helper.from_array(np.array(0, np.int8), f"{name}_zero")]
    nodes.append(helper.make_node("DequantizeLinear", [f"{name}_int8", f"{name}_scale", f"{name}_zero"], [name],
                                  name=f"{name}_DequantizeLinear"))
    return name


def _nncf_style_classifier(behind: str = "Reshape") -> onnx.ModelProto:
    """x -> Conv -> AveragePool -> Reshape -> Gemm, quantised as NNCF writes it: the Gemm's input quantiser on
    the pool's output (none after the Reshape). `behind="MaxPool"`: a MaxPool (1x1) before the Reshape."""
    nodes, inits = [], []
    x = _pair(nodes, inits, "x", 0.02)
    w = _weight(nodes, inits, "conv_w", (4, 3, 3, 3))
    nodes.append(helper.make_node("Conv", [x, w], ["conv"], name="conv_node", pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("AveragePool", [_pair(nodes, inits, "conv", 0.05)], ["pool"], name="pool_node",
                                  kernel_shape=[8, 8]))
    inits.append(numpy_helper.from_array(np.array([1, 4], np.int64), "flat_shape"))
    pooled = _pair(nodes, inits, "pool", 0.004)
    if behind == "MaxPool":
        nodes.append(helper.make_node("MaxPool", [pooled], ["maxed"], name="maxpool_node", kernel_shape=[1, 1]))
        pooled = "maxed"
    nodes.append(helper.make_node("Reshape", [pooled, "flat_shape"], ["flat"], name="reshape_node"))
    g = _weight(nodes, inits, "gemm_w", (10, 4))
    nodes.append(helper.make_node("Gemm", ["flat", g], ["y"], name="gemm_node", transB=1))
    graph = helper.make_graph(nodes, "nncf_style", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_classifier_behind_a_reshape_gets_its_own_pair_and_no_ignoring():
    qdq = _nncf_style_classifier()
    applied = Applied(float_nodes=["conv_node"])
    assert nncf_readers(applied, qdq) == []
    assert nncf_scope(applied, qdq, {})["names"] == ["conv_node"]
    planned = exclude_qdq(qdq, ["conv_node"])
    producer = {o: n for n in planned.graph.node for o in n.output}
    gemm = next(n for n in planned.graph.node if n.name == "gemm_node")
    dq = producer[gemm.input[0]]
    assert dq.op_type == "DequantizeLinear" and dq.input[1] == "pool_scale"  # the pool pair's parameters
    assert producer[producer[dq.input[0]].input[0]].name == "reshape_node"


def test_the_classifier_reading_the_float_pool_is_ignored_too():
    qdq = _nncf_style_classifier("MaxPool")
    applied = Applied(float_nodes=["conv_node"])
    assert nncf_readers(applied, qdq) == ["gemm_node"]
    scope = nncf_scope(applied, qdq, {})
    assert scope["names"] == ["conv_node", "gemm_node"]
    assert scope["readers"] == ["gemm_node"]
    assert scope["types"] == ["Conv", "Gemm"]
    assert Quantisers(qdq).moved_readers == {}  # a MaxPool changes the range: nothing moves


def test_no_reader_is_added_where_the_pool_stays_quantised_or_the_reader_is_float():
    qdq = _nncf_style_classifier("MaxPool")
    assert nncf_readers(Applied(float_nodes=["gemm_node"]), qdq) == []  # the pool's quantiser: only Gemm read it
    assert nncf_readers(Applied(float_nodes=[]), qdq) == []
    assert nncf_readers(Applied(float_nodes=["conv_node", "gemm_node"]), qdq) == []
