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

from inspector_cli.remedy.exclusion import Quantisers, exclude_qdq, quantiser_rules
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


def _nncf_named(tensor_pairs: bool = True) -> onnx.ModelProto:
    """x -> conv (int8 weight) -> h -> add(h, k) -> y and h -> conv2 -> z, with activation pairs on x and h named
    as NNCF's ONNX backend names them (`QuantizeLinear_<t>_1` -> `q_output_<t>_1`), or, with
    `tensor_pairs=False`, as onnxruntime's quantiser does (`<t>_QuantizeLinear`)."""
    nodes, inits = [], []

    def pair(tensor: str, scale: float) -> str:
        inits.extend([numpy_helper.from_array(np.array(scale, np.float32), f"{tensor}_scale"),
                      numpy_helper.from_array(np.array(128, np.uint8), f"{tensor}_zero")])
        q, dq = ((f"QuantizeLinear_{tensor}_1", f"q_output_{tensor}_1"), (f"DequantizeLinear_{tensor}_1", f"dq_output_{tensor}_1")) \
            if tensor_pairs else ((f"{tensor}_QuantizeLinear", f"{tensor}_q"), (f"{tensor}_DequantizeLinear", f"{tensor}_dq"))
        nodes.extend([helper.make_node("QuantizeLinear", [tensor, f"{tensor}_scale", f"{tensor}_zero"], [q[1]], name=q[0]),
                      helper.make_node("DequantizeLinear", [q[1], f"{tensor}_scale", f"{tensor}_zero"], [dq[1]], name=dq[0])])
        return dq[1]

    x = pair("x", 0.02)
    nodes.append(helper.make_node("Conv", [x, _weight(nodes, inits, "conv_w", (4, 3, 3, 3))], ["h"], name="conv",
                                  pads=[1, 1, 1, 1]))
    h = pair("h", 0.05)
    inits.append(numpy_helper.from_array(np.full((1, 4, 1, 1), 0.5, np.float32), "k"))
    nodes.append(helper.make_node("Add", [h, "k"], ["y"], name="add"))
    nodes.append(helper.make_node("Conv", [h, _weight(nodes, inits, "conv2_w", (4, 4, 1, 1))], ["z"], name="conv2"))
    graph = helper.make_graph(nodes, "named", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_an_nncf_model_is_planned_by_nncfs_rules():
    """NNCF places a quantiser on the inputs of the ops it quantises, whatever produces the tensor: with add and
    conv2 ignored, its rebuild has no pair on h although conv (its producer) stays quantised; onnxruntime's
    rules keep it (conv asks for its output). The zoo's NNCF int8 EfficientNet: a squeeze-excite Sigmoid's pair
    read only by an ignored Mul, which the plan kept. Fails before: one rule for every model (the pair kept)."""
    nncf, ort_named = _nncf_named(), _nncf_named(tensor_pairs=False)
    assert quantiser_rules(nncf) == "nncf" and quantiser_rules(ort_named) == "onnxruntime"
    assert Quantisers(nncf).removed(["add", "conv2"]) == ["q_output_h_1"]
    assert Quantisers(ort_named).removed(["add", "conv2"]) == []
    # a reader still quantised keeps it under both rules
    assert Quantisers(nncf).removed(["add"]) == [] and Quantisers(ort_named).removed(["add"]) == []
    planned = exclude_qdq(nncf, ["add", "conv2"])
    add = next(n for n in planned.graph.node if n.name == "add")
    producer = {o: n for n in planned.graph.node for o in n.output}
    source = producer[add.input[0]]  # the pair's DequantizeLinear, now an Identity of the float h
    assert source.op_type == "Identity" and list(source.input) == ["h"]
    session_inputs = {"x": np.random.default_rng(0).normal(0, 1, (1, 3, 8, 8)).astype(np.float32)}
    import onnxruntime as ort

    y = ort.InferenceSession(planned.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], session_inputs)[0]
    assert np.isfinite(y).all()
