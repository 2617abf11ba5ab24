"""Graph core: loading (incl. external data safety), naming, order, selection, exposure."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from inspector_cli.core.expose import extract_subgraph, nodes_between, serialized_with_outputs, with_outputs
from inspector_cli.core.graph import ModelGraph, load_model
from inspector_cli.core.runner import Session, open_session
from inspector_cli.core.select import select_tensors
from inspector_cli.errors import ModelLoadError, SelectionError, UsageError

from ..fixtures.helpers import affine_model, init, invoke, make_model, vi


def chain_model(unnamed: bool = False, shuffled: bool = False) -> onnx.ModelProto:
    names = ["", "", ""] if unnamed else ["enc/layer0/conv1", "enc/layer0/relu", "enc/layer1/conv2"]
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["t1"], name=names[0]),
        helper.make_node("Relu", ["t1"], ["t2"], name=names[1]),
        helper.make_node("Add", ["t2", "x"], ["y"], name=names[2]),
    ]
    if shuffled:
        nodes = [nodes[2], nodes[0], nodes[1]]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], [init("two", np.array(2.0, np.float32))])


def test_unnamed_nodes_get_deterministic_names():
    graph = ModelGraph.from_proto(chain_model(unnamed=True))
    assert [n.name for n in graph.nodes] == ["Mul_0", "Relu_1", "Add_2"]
    assert graph.renamed_nodes == {"Mul_0": "", "Relu_1": "", "Add_2": ""}
    again = ModelGraph.from_proto(chain_model(unnamed=True))
    assert [n.name for n in again.nodes] == [n.name for n in graph.nodes]


def test_duplicate_node_names_are_made_unique():
    model = make_model([helper.make_node("Relu", ["x"], ["a"], name="n"), helper.make_node("Relu", ["a"], ["b"], name="n")],
                       [vi("x", [2])], [vi("b", [2])])
    graph = ModelGraph.from_proto(model)
    assert [n.name for n in graph.nodes] == ["n", "n_1"]
    assert graph.nodes[1].original_name == "n"


def test_topological_order_of_unsorted_file():
    graph = ModelGraph.from_proto(chain_model(shuffled=True))
    assert [n.op_type for n in graph.nodes] == ["Mul", "Relu", "Add"]
    assert graph.producer["t2"].name == "enc/layer0/relu"
    assert [n.name for n in graph.consumers["x"]] == ["enc/layer0/conv1", "enc/layer1/conv2"]


def test_cycle_is_detected():
    model = make_model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2")],
                       [vi("x", [2])], [vi("a", [2])])
    graph = ModelGraph.from_proto(model)
    assert sorted(graph.cycle_nodes) == ["n1", "n2"]


def test_if_branch_reads_outer_tensor_as_implicit_input():
    then_g = helper.make_graph([helper.make_node("Neg", ["outer"], ["r"], name="neg")], "then", [], [vi("r", [2])])
    else_g = helper.make_graph([helper.make_node("Identity", ["outer"], ["r2"], name="id")], "else", [], [vi("r2", [2])])
    nodes = [helper.make_node("Relu", ["x"], ["outer"], name="relu"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    model = make_model(nodes, [vi("x", [2]), vi("cond", [], onnx.TensorProto.BOOL)], [vi("y", [2])])
    graph = ModelGraph.from_proto(model)
    if_node = graph.node_by_name["if"]
    assert if_node.implicit_inputs == ("outer",)
    assert [n.name for n in graph.consumers["outer"]] == ["if"]


def test_selection_forms(tmp_path):
    graph = ModelGraph.from_proto(chain_model())
    assert select_tensors(graph, ["t2"]) == ["t2"]
    assert select_tensors(graph, ["enc/*/conv*"]) == ["t1", "y"]
    assert select_tensors(graph, ["re:layer1"]) == ["y"]
    assert select_tensors(graph, ["op:Relu"]) == ["t2"]
    assert select_tensors(graph, ["op:relu,mul"]) == ["t1", "t2"]
    assert select_tensors(graph, ["all"]) == ["t1", "t2", "y"]
    assert select_tensors(graph, ["enc/layer0/relu"]) == ["t2"]  # a node name selects its outputs
    with pytest.raises(SelectionError, match="did you mean 't2'"):
        select_tensors(graph, ["t3"])
    with pytest.raises(SelectionError, match="invalid regular expression"):
        select_tensors(graph, ["re:("])


def test_exposed_outputs_run_and_keep_originals():
    graph = ModelGraph.from_proto(chain_model())
    session = open_session(graph, extra_outputs=["t1", "t2"])
    x = np.array([[-1, 2, -3, 4]], np.float32)
    out = session.run({"x": x})
    assert set(out) == {"y", "t1", "t2"}
    np.testing.assert_allclose(out["t2"], np.maximum(2 * x, 0))
    assert [o.name for o in graph.model.graph.output] == ["y"]  # the proto is restored
    copy = with_outputs(graph, ["t1"])
    assert [o.name for o in copy.graph.output] == ["y", "t1"]
    assert copy.graph.output[1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


def test_untyped_exposed_output_falls_back_to_runtime_typing():
    graph = ModelGraph.from_proto(chain_model())
    graph.set_tensor_info({})  # as if shape inference could type nothing
    data = serialized_with_outputs(graph, ["t1"])
    exposed = onnx.load_from_string(data)
    assert not exposed.graph.output[1].type.HasField("tensor_type")
    out = Session(data).run({"x": np.ones((1, 4), np.float32)})
    assert out["t1"].dtype == np.float32 and out["t1"].shape == (1, 4)


def test_extract_subgraph_between_cut_tensors():
    graph = ModelGraph.from_proto(chain_model())
    assert nodes_between(graph, ["t1"], ["y"]) == ["enc/layer0/relu", "enc/layer1/conv2"]
    sub = extract_subgraph(graph, ["t1"], ["y"])
    # 'x' is read by the Add too, so it becomes an input of the cut
    assert [i.name for i in sub.graph.input] == ["t1", "x"]
    out = Session(sub.SerializeToString()).run({"t1": np.array([[-2, 4, 0, 1]], np.float32),
                                                "x": np.ones((1, 4), np.float32)})
    np.testing.assert_allclose(out["y"], [[1, 5, 1, 2]])


def _save_external(model, folder, location="weights.bin"):
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location=location, size_threshold=0)
    return folder / "m.onnx"


def _matmul_model():
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [1, 4])], [vi("y", [1, 4])],
                      [init("w", w)])


def test_external_data_inside_folder_loads_and_runs(tmp_path):
    path = _save_external(_matmul_model(), tmp_path / "model")
    graph = load_model(path)
    assert graph.uses_external_data
    assert graph.model.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL  # weights not read
    out = open_session(graph, extra_outputs=[]).run({"x": np.ones((1, 4), np.float32)})
    np.testing.assert_allclose(out["y"], np.ones((1, 4)) @ np.arange(16).reshape(4, 4))


def test_external_data_outside_folder_is_refused(tmp_path):
    path = _save_external(_matmul_model(), tmp_path / "model")
    model = onnx.load(str(path), load_external_data=False)
    (tmp_path / "secret.bin").write_bytes((tmp_path / "model" / "weights.bin").read_bytes())
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../secret.bin"
    onnx.save(model, str(path))
    with pytest.raises(ModelLoadError, match="outside the model's folder"):
        load_model(path)
    result = invoke(["compare", path, path], exit_code=3)
    assert "outside the model's folder" in result.stderr and "Traceback" not in result.stderr


def test_missing_external_data_file(tmp_path):
    path = _save_external(_matmul_model(), tmp_path / "model")
    (tmp_path / "model" / "weights.bin").unlink()
    with pytest.raises(ModelLoadError, match="not found"):
        load_model(path)


@pytest.mark.parametrize("content,match", [(b"", "empty"), (b"hello, I am text\n" * 5, "ONNX"),
                                           (None, "not a valid ONNX protobuf")])
def test_broken_model_files(tmp_path, content, match):
    path = tmp_path / "bad.onnx"
    if content is None:  # truncated real model
        data = affine_model().SerializeToString()
        content = data[: len(data) // 2]
    path.write_bytes(content)
    with pytest.raises(ModelLoadError, match=match):
        load_model(path)
    result = invoke(["compare", path, path], exit_code=3)
    assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr


def test_directory_and_missing_paths_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="is a directory"):
        load_model(tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        load_model(tmp_path / "nope.onnx")
    invoke(["compare", tmp_path, tmp_path], exit_code=2)


def test_model_over_2gb_with_external_data(tmp_path):
    """A 2.1 GB embedding table as external data: loads without reading it and runs (mmap)."""
    rows, width = 2 ** 31 // (4 * 64) + 1024, 64
    folder = tmp_path / "big"
    folder.mkdir()
    table = folder / "table.bin"
    with open(table, "wb") as handle:  # sparse file: the size is real, the disk use is not
        handle.truncate(rows * width * 4)
    tensor = onnx.TensorProto(name="table", data_type=onnx.TensorProto.FLOAT, dims=[rows, width])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "table.bin"), ("offset", "0"), ("length", str(rows * width * 4))):
        tensor.external_data.add(key=key, value=value)
    model = make_model([helper.make_node("Gather", ["table", "ids"], ["emb"], name="gather")],
                       [vi("ids", [2], onnx.TensorProto.INT64)], [vi("emb", [2, width])], [tensor])
    onnx.save(model, str(folder / "big.onnx"))
    graph = load_model(folder / "big.onnx")
    assert table.stat().st_size > 2 ** 31
    out = open_session(graph).run({"ids": np.array([0, rows - 1], np.int64)})
    assert out["emb"].shape == (2, width) and not out["emb"].any()


def test_light_copy_stubs_weights_only_when_they_outweigh_the_nodes():
    """A model whose inline weights are few bytes per node goes to shape inference as is (copying
    every node costs more than passing the weights); a weight-heavy one gets stubs; types agree."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from inspector_cli.core.light import BYTES_PER_NODE, light_copy

    def model(weight_elements: int) -> onnx.ModelProto:
        w = numpy_helper.from_array(np.ones((1, weight_elements), np.float32), "w")
        nodes = [helper.make_node("Add", ["x", "w"], ["y0"], name="add0")]
        nodes += [helper.make_node("Relu", [f"y{i}"], [f"y{i + 1}"], name=f"relu{i}") for i in range(3)]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", weight_elements])],
                                  [helper.make_tensor_value_info("y3", TensorProto.FLOAT, None)], [w])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    small = model(100)  # 400 bytes for 4 nodes
    assert light_copy(small) is small
    heavy = model(4 * BYTES_PER_NODE)  # 32 KiB for 4 nodes
    stubbed = light_copy(heavy)
    assert stubbed is not heavy
    assert not stubbed.graph.initializer[0].raw_data and list(stubbed.graph.initializer[0].dims) == [1, 4 * BYTES_PER_NODE]
    assert ModelGraph.from_proto(heavy).tensor_info("y3").shape == ("n", 4 * BYTES_PER_NODE)
