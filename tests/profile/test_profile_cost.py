"""FLOPs and MACs of original nodes, against hand-computed values."""
from __future__ import annotations

import numpy as np
from onnx import helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.profile.cost import node_cost
from inspector_cli.profile.shapes import runtime_tensors

from ..fixtures.helpers import init, make_model, vi


def cost_of(model, name, input_shapes=None):
    graph = ModelGraph.from_proto(model)
    tensors = runtime_tensors(graph, input_shapes or {})
    node = graph.node_by_name[name]
    return node_cost(graph, node, lambda t: tensors[t].shape if t in tensors else None)


def test_conv_with_bias():
    # [1,3,8,8] * [4,3,3,3], pad 1 -> [1,4,8,8]: 256 outputs x 27 MACs; + 256 bias adds.
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])],
                       [vi("x", [1, 3, 8, 8])], [vi("y", None)],
                       [init("w", np.zeros((4, 3, 3, 3), np.float32)), init("b", np.zeros(4, np.float32))])
    cost = cost_of(model, "conv")
    assert cost.macs == 6912 and cost.flops == 2 * 6912 + 256


def test_grouped_and_strided_conv_without_bias():
    # depthwise: [1,4,8,8] * [4,1,3,3], group 4, stride 2, pad 1 -> [1,4,4,4]: 64 outputs x 9 MACs.
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=4, strides=[2, 2],
                                         pads=[1, 1, 1, 1])],
                       [vi("x", [1, 4, 8, 8])], [vi("y", None)], [init("w", np.zeros((4, 1, 3, 3), np.float32))])
    cost = cost_of(model, "dw")
    assert cost.macs == 576 and cost.flops == 1152


def test_conv_transpose():
    # [1,2,4,4] * [2,3,3,3]: every input pixel (2 x 16) scatters 3 x 9 MACs.
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up")],
                       [vi("x", [1, 2, 4, 4])], [vi("y", None)], [init("w", np.zeros((2, 3, 3, 3), np.float32))])
    assert cost_of(model, "up").macs == 864


def test_batched_matmul_broadcasts_the_weight():
    # [2,3,4] x [4,5]: batch 2, M 3, K 4, N 5.
    model = make_model([helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")],
                       [vi("a", [2, 3, 4])], [vi("y", None)], [init("w", np.zeros((4, 5), np.float32))])
    cost = cost_of(model, "mm")
    assert cost.macs == 120 and cost.flops == 240


def test_matmul_with_dynamic_batch_uses_the_fed_shape():
    model = make_model([helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")],
                       [vi("a", ["batch", 3, 4])], [vi("y", None)], [init("w", np.zeros((4, 5), np.float32))])
    assert cost_of(model, "mm", {"a": (7, 3, 4)}).macs == 7 * 60


def test_gemm_with_transposed_b_and_bias():
    # A [3,4], B [5,4] transB -> M 3, K 4, N 5; bias adds 15.
    model = make_model([helper.make_node("Gemm", ["a", "w", "c"], ["y"], name="fc", transB=1)],
                       [vi("a", [3, 4])], [vi("y", None)],
                       [init("w", np.zeros((5, 4), np.float32)), init("c", np.zeros(5, np.float32))])
    cost = cost_of(model, "fc")
    assert cost.macs == 60 and cost.flops == 135


def test_einsum_contraction_and_elementwise_ops():
    nodes = [helper.make_node("Einsum", ["a", "b"], ["e"], name="es", equation="bij,bjk->bik"),
             helper.make_node("Relu", ["e"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["s"], name="sm"),
             helper.make_node("Reshape", ["s", "shape"], ["y"], name="rs")]
    model = make_model(nodes, [vi("a", [2, 3, 4]), vi("b", [2, 4, 5])], [vi("y", None)],
                       [init("shape", np.array([-1], np.int64))])
    assert cost_of(model, "es").macs == 2 * 3 * 4 * 5
    assert cost_of(model, "relu").flops == 30
    assert cost_of(model, "sm").flops == 90
    assert cost_of(model, "rs").flops == 0
