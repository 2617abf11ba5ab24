"""A QDQ model from another quantiser (NNCF puts a pair on a MaxPool's input, after a Relu that reads an
unquantised Conv output; onnxruntime's rules would not make that pair): excluding nothing must give the model
as it is. Before issue 44's fix `exclude_qdq(model, [])` removed the pair (its passive producer, the Relu, read
nothing quantised), so `mi fix` wrote NNCF's digits int8 with 2 nodes fewer quantised although the plan was
empty (scripts/bench_fix.py). Fails on the code before."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.remedy.exclusion import exclude_qdq


def _nncf_like() -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.normal(0, 1, (4, 1, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.uint8), "z")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"], name="q"),
             helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"], name="dq"),
             helper.make_node("MaxPool", ["rd"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_excluding_nothing_keeps_a_pair_the_rules_do_not_explain():
    import onnxruntime as ort

    model = _nncf_like()
    same = exclude_qdq(model, [], model)
    assert sum(n.op_type == "QuantizeLinear" for n in same.graph.node) == 1
    x = {"x": np.random.default_rng(1).normal(0, 1, (1, 1, 6, 6)).astype(np.float32)}
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]  # noqa: E731
    assert np.array_equal(run(same), run(model))


def test_a_corrected_float_bias_goes_back_to_fp32():
    """NNCF corrects the float biases of the layers it quantises (fast bias correction); a node kept in float
    must compute with the fp32 model's bias, or every node in float still differs from fp32 (the zoo's
    EfficientNet from NNCF: all 68 quantised nodes in float read cosine 0.99998 and top-1 agreement 0.89 on
    random-init logits, where NNCF's own revert reads 1.0). Fails on the code before."""
    import onnxruntime as ort

    fp32 = _nncf_like()
    for node in fp32.graph.node:  # no quantiser in the fp32 model
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            node.op_type = "Identity"
            del node.input[1:]
    fp32.graph.initializer.append(numpy_helper.from_array(np.array([0.1, -0.2, 0.3, 0.0], np.float32), "b"))
    fp32.graph.node[0].input.append("b")
    quantised = _nncf_like()
    quantised.graph.initializer.append(numpy_helper.from_array(np.array([0.12, -0.19, 0.3, 0.01], np.float32), "b"))
    quantised.graph.node[0].input.append("b")
    excluded = exclude_qdq(quantised, ["conv", "relu", "pool"], fp32)
    x = {"x": np.random.default_rng(2).normal(0, 1, (1, 1, 6, 6)).astype(np.float32)}
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]  # noqa: E731
    assert np.array_equal(run(excluded), run(fp32))
