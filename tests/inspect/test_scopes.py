"""The scope tree: names, torch metadata, local functions, the structural fallback, and the numbers."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from inspector_cli.core.graph import ModelGraph, load_model
from inspector_cli.core.scope_tree import build_scope_tree
from inspector_cli.core.scopes import name_scope, node_scopes, torch_scope
from inspector_cli.testing.models import build_cnn
from inspector_cli.testing.transformer import build_transformer

from .models import function_model, rename_like_paddle


def test_torch_scope_lists_become_module_paths():
    assert torch_scope(["", "layer1", "layer1.0", "layer1.0.bn", "batch_norm"]) == ("layer1", "0", "bn")
    assert torch_scope(["", "mean"]) == ()


@pytest.mark.parametrize("name, op, expected", [
    ("/layer1/layer1.0/conv/Conv", "Conv", ("layer1", "0", "conv")),
    ("/encoder/layer.3/attention/MatMul", "MatMul", ("encoder", "layer", "3", "attention")),
    ("a/b/c", "Relu", ("a", "b")),
    ("a.b.c", "Relu", ("a", "b")),
    ("p2o.Conv.12", "Conv", ("p2o",)),
    ("Conv_35", "Conv", ()),
])
def test_name_scopes(name, op, expected):
    node = onnx.helper.make_node(op, ["x"], ["y"], name=name)
    model = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [], []))
    graph = ModelGraph.from_proto(model)
    assert name_scope(graph.nodes[0]) == expected


def test_node_scopes_one_segment_prefixes_as_name_scope():
    # node_scopes reads `a.b/Op` prefixes without name_scope's walk: the same paths, empty parts dropped
    names = {"a..b/Relu": ("a", "b"), ".x./Relu_1": ("x",), "/Relu_2": (),
             "layers.17.q_proj/MatMul": ("layers", "17", "q_proj"), "a/b.c/Relu_3": ("a", "b", "c"),
             "/a/a.0/Relu_4": ("a", "0")}
    nodes = [onnx.helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=n) for i, n in enumerate(names)]
    graph = ModelGraph.from_proto(onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [], [])))
    paths, _, source = node_scopes(graph)
    assert source == "names"
    assert {n.name: paths[n.name] for n in graph.nodes} == names
    assert all(paths[n.name] == name_scope(n) for n in graph.nodes)


def test_transformer_names_give_its_module_hierarchy():
    graph = ModelGraph.from_proto(build_transformer(layers=2))
    tree = build_scope_tree(graph)
    assert tree.source == "names"
    assert sorted(tree.root.children) == ["embeddings", "final_norm", "layers"]
    layer = tree.get(("layers", "1"))
    assert sorted(layer.children) == ["activation", "linear1", "linear2", "norm1", "norm2", "self_attn"]
    # the layer reads the previous layer's output and hands its own on
    assert list(layer.inputs) == ["layers.0/Add_ffn_out"]
    assert list(layer.outputs) == ["layers.1/Add_ffn_out"]
    q = tree.get(("layers", "1", "self_attn", "q_proj"))
    assert q.params == 64 * 64 + 64 and q.param_bytes == 4 * (64 * 64 + 64)
    assert q.ops == {"MatMul": 1, "Add": 1}
    # the numbers of a scope are the sums over its children and own nodes
    assert layer.params == sum(c.params for c in layer.children.values())
    # every weight counted once (scalars too), however many nodes read it
    assert tree.root.params == sum(int(np.prod(t.dims)) for t in graph.model.graph.initializer)


def test_scope_less_cnn_falls_back_to_its_residual_blocks(tmp_path):
    model = rename_like_paddle(build_cnn(blocks=2))
    graph = ModelGraph.from_proto(model)
    tree = build_scope_tree(graph)
    assert tree.source == "structure"
    blocks = [s for s in tree.scopes() if s.path]
    ops = [tuple(graph.node_by_name[n].op_type for n in b.nodes) for b in blocks]
    residual = ("Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization", "Add", "Relu")
    # stem, two residual blocks at 16 channels, a downsampling block (projection), one more, the head
    assert ops[0] == ("Conv", "BatchNormalization", "Relu")
    assert ops[1] == residual and ops[2] == residual and ops[4] == residual
    assert ops[3].count("Conv") == 3 and ops[3][-2:] == ("Add", "Relu")
    assert ops[5] == ("GlobalAveragePool", "Flatten", "Gemm", "Softmax")
    # each residual block is bounded by one tensor on each side
    assert len(blocks[1].inputs) == 1 and len(blocks[1].outputs) == 1
    assert list(blocks[1].outputs) == list(blocks[2].inputs)


def test_local_functions_are_scopes(tmp_path):
    tree = build_scope_tree(load_model(function_model(tmp_path / "f.onnx")))
    enc = tree.get(("enc",))
    assert sorted(enc.children) == ["first", "second"]
    assert enc.children["first"].kind == "function"
    assert list(enc.children["second"].inputs) == ["h"] and list(enc.outputs) == ["g"]


def test_flops_and_activation_bytes_of_a_conv_scope():
    graph = ModelGraph.from_proto(build_cnn(blocks=1))
    tree = build_scope_tree(graph)
    stem = [s for s in tree.scopes() if s.path][0]
    # 3x3 conv 3->16 on 32x32 with bias: 2*MACs + bias; BN 2/elem; Relu 1/elem
    out = 16 * 32 * 32
    assert stem.flops == 2 * out * 3 * 9 + out + 2 * out + out
    assert stem.activation_bytes == 3 * out * 4


def test_scope_tree_fast_paths_agree_with_the_cost_model():
    """The tree computes per-element FLOPs inline and memoises MatMul costs by shape: every node's
    FLOPs must still be exactly `node_cost`'s, and a scope made without the dataclass's __init__ must
    equal one made with it (a field added to `Scope` and forgotten in `_new_scope` fails here)."""
    from inspector_cli.core.cost import node_cost
    from inspector_cli.core.scope_tree import Scope, _new_scope

    for model in (build_transformer(layers=2), build_cnn(blocks=2)):
        graph = ModelGraph.from_proto(model)
        info = graph.all_tensor_info()

        def shape_of(tensor):
            ti = info.get(tensor)
            return None if ti is None or ti.shape is None else tuple(
                d if isinstance(d, int) and d >= 0 else 1 for d in ti.shape)

        tree = build_scope_tree(graph)
        expected = {n.name: (None if n.op_type == "Constant" else
                             getattr(node_cost(graph, n, shape_of), "flops", None)) for n in graph.nodes}
        assert tree.node_flops == expected
        assert sum(f for f in expected.values() if f) > 0
    assert _new_scope(("a", "b"), "block") == Scope(path=("a", "b"), kind="block")
