"""Mapping onnxruntime's optimised graph back to original nodes, and node -> kernel assignment."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.profile.assign import assign_nodes, kernel_cells, node_weights
from inspector_cli.profile.critical import graph_predecessors
from inspector_cli.profile.mapping import OptNode, map_nodes, optimized_nodes

from ..fixtures.helpers import init, make_model, vi


def conv_bn_relu_graph() -> ModelGraph:
    """x -> conv -> bn -> relu -> r_out -> mul(r_out, cw) -> y, where cw = const_add(w1, w2)."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c_out"], name="conv"),
             helper.make_node("BatchNormalization", ["c_out", "s", "b", "m", "v"], ["bn_out"], name="bn"),
             helper.make_node("Relu", ["bn_out"], ["r_out"], name="relu"),
             helper.make_node("Add", ["w1", "w2"], ["cw"], name="const_add"),
             helper.make_node("Mul", ["r_out", "cw"], ["y"], name="mul")]
    inits = [init("w", np.ones((2, 1, 1, 1), np.float32))] + \
        [init(n, np.ones(2, np.float32)) for n in ("s", "b", "m", "v")] + \
        [init("w1", np.ones(1, np.float32)), init("w2", np.ones(1, np.float32))]
    return ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 1, 2, 2])], [vi("y", None)], inits))


def names(graph, mapping, group_id):
    return sorted(graph.nodes[i].name for i in mapping.groups[group_id].original)


def test_fused_group_folded_constant_and_kept_node():
    graph = conv_bn_relu_graph()
    opt = [OptNode("conv", "FusedConv", "com.microsoft", ("x", "w_fused", "b_fused"), ("r_out",)),
           OptNode("mul", "Mul", "", ("r_out", "cw"), ("y",))]
    mapping = map_nodes(graph, opt, {"w_fused", "b_fused", "cw"}, ["conv", "mul"])
    fused = mapping.groups[mapping.group_of_kernel["conv"]]
    assert fused.kind == "fused" and names(graph, mapping, fused.id) == ["bn", "conv", "relu"]
    assert mapping.groups[mapping.group_of_node["const_add"]].kind == "folded"
    assert mapping.groups[mapping.group_of_kernel["mul"]].kind == "kept"
    assert graph.nodes[mapping.anchor["conv"]].name == "conv"


def test_renamed_chain_is_anchored_by_name_and_layout_kernels_do_not_steal_nodes():
    graph = conv_bn_relu_graph()
    opt = [OptNode("relu_out_nchwc", "Conv", "com.microsoft.nchwc", ("x", "w_r"), ("tok0",)),
           OptNode("ReorderOutput", "ReorderOutput", "com.microsoft.nchwc", ("tok0",), ("r_out",)),
           OptNode("mul", "Mul", "", ("r_out", "cw"), ("y",))]
    kernels = ["relu_out_nchwc", "ReorderOutput", "mul"]
    mapping = map_nodes(graph, opt, {"w_r", "cw"}, kernels)
    group = mapping.groups[mapping.group_of_kernel["relu_out_nchwc"]]
    assert group.kernels == ["relu_out_nchwc", "ReorderOutput"] and group.kind == "fused"
    assert graph.nodes[mapping.anchor["relu_out_nchwc"]].name == "relu"       # name prefix 'relu'
    assert "ReorderOutput" not in mapping.anchor                              # data movement vs Relu: no anchor
    times = {"relu_out_nchwc": 10.0, "ReorderOutput": 2.0, "mul": 1.0}
    preds = graph_predecessors(graph)
    assigned = assign_nodes(mapping, times, [n.op_type for n in graph.nodes], preds)
    assert {graph.nodes[i].name: k for i, k in assigned.items()} == {
        "conv": "relu_out_nchwc", "bn": "relu_out_nchwc", "relu": "relu_out_nchwc", "mul": "mul"}
    weights = dict(zip([n.name for n in graph.nodes], node_weights(mapping, assigned, times, len(graph.nodes))))
    assert weights == {"conv": 0.0, "bn": 0.0, "relu": 12.0, "const_add": 0.0, "mul": 1.0}
    cells = kernel_cells(mapping, assigned, times)
    assert sorted(graph.nodes[i].name for i in cells["ReorderOutput"]) == ["bn", "conv", "relu"]


def qdq_graph() -> ModelGraph:
    """x -> dq -> conv -> q -> dq2 -> relu -> out: a QDQ node unit followed by a float op."""
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sc", "zp"], ["xf"], name="dq"),
             helper.make_node("Conv", ["xf", "w"], ["cf"], name="conv"),
             helper.make_node("QuantizeLinear", ["cf", "sc", "zp"], ["cq"], name="q"),
             helper.make_node("DequantizeLinear", ["cq", "sc", "zp"], ["cd"], name="dq2"),
             helper.make_node("Relu", ["cd"], ["out"], name="relu")]
    inits = [init("sc", np.array(0.1, np.float32)), init("zp", np.array(0, np.int8)),
             init("w", np.ones((1, 1, 1, 1), np.float32))]
    return ModelGraph.from_proto(make_model(nodes, [vi("xq", [1, 1, 2, 2], onnx.TensorProto.INT8)],
                                            [vi("out", None)], inits))


def test_qdq_nodes_go_to_the_kernel_that_fuses_them():
    graph = qdq_graph()
    opt = [OptNode("conv_token_1", "QLinearConv", "com.microsoft", ("xq", "sc", "zp", "wq"), ("tq",)),
           OptNode("relu", "Relu", "", ("tq",), ("out",))]
    mapping = map_nodes(graph, opt, {"wq"}, ["conv_token_1", "relu"])
    assert len({mapping.group_of_node[n.name] for n in graph.nodes}) == 1
    assigned = assign_nodes(mapping, {"conv_token_1": 5.0, "relu": 1.0}, [n.op_type for n in graph.nodes],
                            graph_predecessors(graph))
    assert {graph.nodes[i].name: k for i, k in assigned.items()} == {
        "dq": "conv_token_1", "conv": "conv_token_1", "q": "conv_token_1", "dq2": "relu", "relu": "relu"}


def test_without_an_optimised_graph_kernels_map_by_name():
    graph = conv_bn_relu_graph()
    mapping = map_nodes(graph, None, (), ["conv", "relu", "mystery"])
    assert mapping.groups[mapping.group_of_kernel["conv"]].kind == "kept"
    assert mapping.groups[mapping.group_of_node["bn"]].kind == "folded"
    assert mapping.groups[mapping.group_of_kernel["mystery"]].kind == "added"
    assert "by name only" in mapping.notes[0]


@pytest.fixture(scope="module")
def encoder_mapping(tmp_path_factory):
    """A real onnxruntime optimisation of a one-layer BERT-style encoder."""
    import onnxruntime as ort

    from inspector_cli.testing.encoder import build_encoder

    graph = ModelGraph.from_proto(build_encoder(1))
    folder = tmp_path_factory.mktemp("enc")
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(folder / "opt.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(graph.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    opt, inits = optimized_nodes(onnx.load(str(folder / "opt.onnx")))
    return graph, opt, map_nodes(graph, opt, inits, [o.name for o in opt])


def test_real_layer_norm_fusion_is_one_group(encoder_mapping):
    graph, opt, mapping = encoder_mapping
    ln = [n.name for n in graph.nodes if n.name.startswith("layer.0/attention/LayerNorm/")]
    assert len(ln) == 9
    group = mapping.groups[mapping.group_of_node[ln[0]]]
    assert all(mapping.group_of_node[n] == group.id for n in ln)
    assert group.kind == "fused" and len(group.kernels) < len(group.original)
    # Every executed node of the optimised graph landed in a group; nothing is left unmapped.
    assert set(mapping.group_of_kernel) == {o.name for o in opt}
    assert not [g for g in mapping.groups if g.kind == "added"]
