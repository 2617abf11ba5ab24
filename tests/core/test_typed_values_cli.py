"""Every tensor type onnxruntime runs, through the commands as a user runs them (issue 42): bfloat16, float8
and int4 inputs and outputs, sequence and optional inputs from .pb files, .npz samples of ml_dtypes arrays,
synthetic samples of these types, and compare --golden --rtol/--atol. Exit codes from real processes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..fixtures.subproc import assert_status, run_mi

BF16, F8, F8E5, INT4 = TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.INT4


def _model(nodes: List[onnx.NodeProto], inputs: list, outputs: list, path: Path, opset: int = 21,
           initializers: list = ()) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    path.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path / "model.onnx"))
    return path / "model.onnx"


def _data_set(folder: Path, inputs: list, outputs: list) -> Path:
    data = folder / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    for k, proto in enumerate(inputs):
        (data / f"input_{k}.pb").write_bytes(proto.SerializeToString())
    for k, proto in enumerate(outputs):
        (data / f"output_{k}.pb").write_bytes(proto.SerializeToString())
    return folder


def _golden(tmp_path: Path, model: Path, folder: Path, *extra: str) -> dict:
    out = tmp_path / "golden.json"
    ran = run_mi(["-q", "compare", model, "--golden", folder, "--json", out, *extra], cwd=tmp_path)
    return {"ran": ran, "doc": json.loads(out.read_text()) if out.exists() else None}


def test_a_float8_output_is_compared_by_its_values(tmp_path: Path) -> None:
    """Cast float -> float8e4m3fn: onnxruntime returned the uint8 codes, and golden compared byte 47 with the
    float8 value 0.46875 (exit 1, '13 of 15 value(s) differ'; dtype_b uint8). Now exit 0, max abs 0,
    both sides named float8e4m3fn. Fails on the code before (exit 1)."""
    x = np.array([[0.46875, 1.0, -2.5], [448.0, 0.001953125, 3.0]], np.float32)
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=F8)], [helper.make_tensor_value_info("x", 1, [2, 3])],
                   [helper.make_tensor_value_info("y", F8, [2, 3])], tmp_path / "case")
    folder = _data_set(tmp_path / "case", [numpy_helper.from_array(x, "x")],
                       [numpy_helper.from_array(x.astype(ml_dtypes.float8_e4m3fn), "y")])
    got = _golden(tmp_path, model, folder)
    assert_status(got["ran"], 0)
    (output,) = got["doc"]["results"]["outputs"]
    assert (output["dtype_a"], output["dtype_b"]) == ("float8e4m3fn", "float8e4m3fn")
    assert output["dataset"]["max_abs"] == 0.0
    # the same as an .npz golden file (np.load reads the float8 output back as void items)
    npz = tmp_path / "npz"
    npz.mkdir()
    np.savez(npz / "g.npz", x=x, y=x.astype(ml_dtypes.float8_e4m3fn))
    got = _golden(tmp_path, model, npz)
    assert_status(got["ran"], 0)
    assert got["doc"]["results"]["outputs"][0]["dtype_a"] == "float8e4m3fn"


def test_bfloat16_and_float8_inputs_run(tmp_path: Path) -> None:
    """A bfloat16 and a float8e5m2 input: 'Numpy_type 256 can't be converted to MLDataType', exit 3 before."""
    a = np.array([1.5, -2.0, 0.25], ml_dtypes.bfloat16)
    b = np.array([0.5, 4.0, -0.125], ml_dtypes.float8_e5m2)
    nodes = [helper.make_node("Cast", ["a"], ["fa"], to=1), helper.make_node("Cast", ["b"], ["fb"], to=1),
             helper.make_node("Add", ["fa", "fb"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("a", BF16, [3]), helper.make_tensor_value_info("b", F8E5, [3])],
                   [helper.make_tensor_value_info("y", 1, [3])], tmp_path / "case")
    expected = a.astype(np.float32) + b.astype(np.float32)
    folder = _data_set(tmp_path / "case", [numpy_helper.from_array(a, "a"), numpy_helper.from_array(b, "b")],
                       [numpy_helper.from_array(expected, "y")])
    got = _golden(tmp_path, model, folder)
    assert_status(got["ran"], 0)
    assert got["doc"]["results"]["outputs"][0]["dataset"]["max_abs"] == 0.0
    # the same inputs as an .npz of ml_dtypes arrays (np.load gives void items, and refuses float8_e5m2's '<f1')
    np.savez(tmp_path / "sample.npz", a=a, b=b)
    for command in (["probe", model, "--inputs", tmp_path / "sample.npz"],
                    ["nan-bisect", model, "--inputs", tmp_path / "sample.npz"],
                    ["profile", model, "--inputs", tmp_path / "sample.npz", "--runs", "2"],
                    ["probe", model]):  # synthetic bfloat16 and float8 samples
        assert_status(run_mi(["-q", *command], cwd=tmp_path), 0)


def test_an_int4_output_and_the_tolerance_check(tmp_path: Path) -> None:
    """QuantizeLinear to int4: 'No corresponding Numpy type for Tensor Type. Int4x2', exit 3 before. With
    --rtol/--atol a value outside the tolerance is MI806 (exit 1) naming it; within, exit 0."""
    x = np.array([0.4, -3.2, 6.9, 7.6, -8.0], np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])]
    inits = [helper.make_tensor("s", 1, [], [1.0]), helper.make_tensor("z", INT4, [], [0])]
    model = _model(nodes, [helper.make_tensor_value_info("x", 1, [5])], [helper.make_tensor_value_info("q", INT4, [5])],
                   tmp_path / "case", initializers=inits)
    right = np.array([0, -3, 7, 7, -8], np.int8).astype(ml_dtypes.int4)
    folder = _data_set(tmp_path / "case", [numpy_helper.from_array(x, "x")], [numpy_helper.from_array(right, "q")])
    got = _golden(tmp_path, model, folder)
    assert_status(got["ran"], 0)
    assert got["doc"]["results"]["outputs"][0]["dtype_b"] == "int4"
    assert_status(_golden(tmp_path, model, folder, "--rtol", "0", "--atol", "0")["ran"], 0)
    wrong = np.array([0, -3, 6, 7, -8], np.int8).astype(ml_dtypes.int4)
    _data_set(tmp_path / "case", [numpy_helper.from_array(x, "x")], [numpy_helper.from_array(wrong, "q")])
    got = _golden(tmp_path, model, folder, "--atol", "0.5")
    assert_status(got["ran"], 1)
    (finding,) = [f for f in got["doc"]["results"]["findings"] if f["rule"] == "MI806"]
    assert finding["message"] == ("output 'q': 1 of 5 value(s) outside rtol 0, atol 0.5 on 1 sample(s); first on "
                                  "sample test_data_set_0 at [2]: expected 6, got 7")
    assert got["doc"]["results"]["outputs"][0]["dataset"]["max_abs"] == 1.0


def test_sequence_and_optional_inputs_from_pb(tmp_path: Path) -> None:
    """A SequenceProto and an OptionalProto input, as onnx's backend test data writes them: 'not an ONNX
    TensorProto' (exit 3) for compare --golden before, and probe/nan-bisect/profile exit 4 ('list' object has
    no attribute 'shape'). Now every command exits 0."""
    seq = [np.array([1.0, 2.0], np.float32), np.array([3.0], np.float32)]
    nodes = [helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"])]
    model = _model(nodes, [helper.make_tensor_sequence_value_info("s", 1, None),
                           helper.make_value_info("o", helper.make_optional_type_proto(
                               helper.make_tensor_type_proto(1, [2])))],
                   [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                    helper.make_tensor_value_info("has", TensorProto.BOOL, [])], tmp_path / "case", opset=18)
    folder = _data_set(tmp_path / "case", [numpy_helper.from_list(seq, "s"),
                                           numpy_helper.from_optional(np.array([5.0, 6.0], np.float32), "o")],
                       [numpy_helper.from_array(np.array(2, np.int64), "n"), numpy_helper.from_array(np.array(True), "has")])
    got = _golden(tmp_path, model, folder)
    assert_status(got["ran"], 0)
    for command in ("probe", "nan-bisect", "profile"):
        assert_status(run_mi(["-q", command, model, "--inputs", folder], cwd=tmp_path), 0)


def test_a_bfloat16_model_layer_by_layer(tmp_path: Path) -> None:
    """compare --layers on a bfloat16 graph: every layer measured on its values, labelled bfloat16."""
    nodes = [helper.make_node("Cast", ["x"], ["f"], to=1), helper.make_node("Relu", ["f"], ["r"]),
             helper.make_node("Cast", ["r"], ["y"], to=BF16)]  # onnxruntime's CPU has few bfloat16 kernels
    model = _model(nodes, [helper.make_tensor_value_info("x", BF16, [1, 2])], [helper.make_tensor_value_info("y", BF16, [1, 2])],
                   tmp_path / "case")
    out = tmp_path / "layers.json"
    assert_status(run_mi(["-q", "compare", model, model, "--layers", "all", "--json", out], cwd=tmp_path), 0)
    layers = json.loads(out.read_text())["results"]["layers"]["layers"]
    assert layers and {layer["dtype_a"] for layer in layers} == {"bfloat16"}  # y, paired through the casts
    assert all(layer["dataset"]["max_abs"] == 0.0 for layer in layers)


def test_nan_bisect_sees_a_nan_in_a_bfloat16_output(tmp_path: Path) -> None:
    """Log of a negative, cast to bfloat16: nan-bisect finds the NaN's birth at Log (exit 1) and probe counts it
    in the bfloat16 output (before: exit 3, 'No corresponding Numpy type for Tensor Type. bfloat16')."""
    nodes = [helper.make_node("Log", ["x"], ["l"], name="log"), helper.make_node("Cast", ["l"], ["y"], to=BF16, name="cast")]
    model = _model(nodes, [helper.make_tensor_value_info("x", 1, [4])], [helper.make_tensor_value_info("y", BF16, [4])],
                   tmp_path / "case")
    np.savez(tmp_path / "sample.npz", x=np.array([1.0, -1.0, 2.0, 4.0], np.float32))
    out = tmp_path / "nan.json"
    ran = run_mi(["-q", "nan-bisect", model, "--inputs", tmp_path / "sample.npz", "--json", out], cwd=tmp_path)
    assert_status(ran, 1)
    results = json.loads(out.read_text())["results"]
    assert [(g["node"], g["kind"]) for g in results["groups"]] == [("log", "origin")]
    assert results["records"][0]["outputs"] == {"y": {"nan": 1, "inf": 0}}
    probe = tmp_path / "probe.json"
    assert_status(run_mi(["-q", "probe", model, "--inputs", tmp_path / "sample.npz", "--select", "y", "--json", probe],
                         cwd=tmp_path), 1)
    (tensor,) = json.loads(probe.read_text())["results"]["tensors"]
    assert (tensor["dtype"], tensor["nan"]) == ("bfloat16", 1)


def test_inputs_show_names_the_types(tmp_path: Path) -> None:
    """`mi inputs show` of an .npz of ml_dtypes arrays: with the model, ONNX's type names and the values; without
    it, opaque items and a hint (before: exit 4, 'setting an array element with a sequence')."""
    a = np.array([1.5, np.nan, 0.25], ml_dtypes.bfloat16)
    model = _model([helper.make_node("Cast", ["a"], ["y"], to=1)], [helper.make_tensor_value_info("a", BF16, [3])],
                   [helper.make_tensor_value_info("y", 1, [3])], tmp_path / "case")
    np.savez(tmp_path / "sample.npz", a=a)
    out = tmp_path / "inputs.json"
    # exit 1: the NaN in the input is a finding of its own
    assert_status(run_mi(["-q", "inputs", "show", tmp_path / "sample.npz", "-m", model, "--json", out], cwd=tmp_path), 1)
    (row,) = json.loads(out.read_text())["results"]["stats"]
    assert (row["dtypes"], row["nan"], row["min"], row["max"]) == (["bfloat16"], 1, 0.25, 1.5)
    ran = run_mi(["inputs", "show", tmp_path / "sample.npz"], cwd=tmp_path)
    assert_status(ran, 0)
    assert "2-byte items (give -m MODEL)" in ran.stdout
