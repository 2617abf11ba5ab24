"""`mi inspect`: the tree, --find on each pattern kind, --node, Q/DQ parameters, errors, JSON schema."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from inspector_cli.testing.transformer import build_transformer

from ..cli.test_reports import validate_document
from ..fixtures.helpers import invoke, read_json, save


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    return save(build_transformer(layers=2), tmp_path_factory.mktemp("tr") / "tr.onnx")


def _json(args, tmp_path, exit_code=0):
    out = tmp_path / "r.json"
    invoke([*args, "--json", out], exit_code=exit_code)
    document = read_json(out)
    validate_document(document)
    assert document["kind"] == "inspect"
    return document["results"]


def test_tree_to_depth(transformer, tmp_path):
    doc = _json(["inspect", transformer, "--depth", "1"], tmp_path)
    assert doc["mode"] == "tree" and doc["scope_map"]["source"] == "names"
    paths = [s["path"] for s in doc["scope_map"]["scopes"]]
    assert paths[:4] == ["", "embeddings", "layers", "layers/0"]
    assert doc["scope_map"]["node_scope"]["layers.1.self_attn/Softmax"] == "layers/1/self_attn"
    layer = next(s for s in doc["scope_map"]["scopes"] if s["path"] == "layers/1")
    assert layer["nodes"] == 33 and layer["outputs"] == ["layers.1/Add_ffn_out"]
    assert doc["model_inputs"][0] == {"name": "input_ids", "dtype": "int64", "shape": "[batch, seq]", "kind": "input"}


@pytest.mark.parametrize("pattern, expected", [
    ("layers/*/self_attn/Softmax", ["layers.0.self_attn/Softmax", "layers.1.self_attn/Softmax"]),
    ("re:layers/1/self_attn/(q|k)_proj/MatMul$", ["layers.1.self_attn.q_proj/MatMul",
                                                   "layers.1.self_attn.k_proj/MatMul"]),
    ("op:LayerNormalization", ["layers.0.norm1/LayerNormalization", "layers.0.norm2/LayerNormalization",
                               "layers.1.norm1/LayerNormalization", "layers.1.norm2/LayerNormalization",
                               "final_norm/LayerNormalization"]),
    ("shape:*x256", ["layers.0.linear1/MatMul", "layers.0.linear1/Add", "layers.0.activation/Div",
                     "layers.0.activation/Erf", "layers.0.activation/Add", "layers.0.activation/Mul",
                     "layers.0.activation/Mul_1", "layers.1.linear1/MatMul", "layers.1.linear1/Add",
                     "layers.1.activation/Div", "layers.1.activation/Erf", "layers.1.activation/Add",
                     "layers.1.activation/Mul", "layers.1.activation/Mul_1"]),
])
def test_find_each_pattern_kind(transformer, tmp_path, pattern, expected):
    doc = _json(["inspect", transformer, "--find", pattern], tmp_path)
    assert [m["name"] for m in doc["matches"]] == expected


def test_find_reports_static_facts(transformer, tmp_path):
    doc = _json(["inspect", transformer, "--find", "layers/0/self_attn/q_proj/MatMul"], tmp_path)
    (match,) = doc["matches"]
    assert match["scope"] == "layers/0/self_attn/q_proj" and match["op_type"] == "MatMul"
    assert match["params"] == 64 * 64
    assert [t["kind"] for t in match["inputs"]] == ["activation", "weight"]
    assert match["inputs"][1]["shape"] == "[64, 64]"
    assert match["consumers"] == ["layers.0.self_attn.q_proj/Add"]


def test_qdq_scale_and_zero_point(cnn_pair, tmp_path):
    _, int8, _ = cnn_pair
    doc = _json(["inspect", int8, "--find", "op:DequantizeLinear"], tmp_path)
    model = onnx.load(str(int8))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    per_channel = [m for m in doc["matches"] if m["quant"][0]["scale"]["count"] > 1]
    assert per_channel, "quantize_static quantises Conv weights per channel"
    for match in doc["matches"]:
        node = next(n for n in model.graph.node if n.name == match["name"])
        scale = inits[node.input[1]].astype(np.float64)
        fact = match["quant"][0]
        assert fact["role"] == "input"
        assert fact["scale"]["count"] == scale.size
        assert fact["scale"]["min"] == pytest.approx(scale.min()) and fact["scale"]["max"] == pytest.approx(scale.max())
        zero = inits[node.input[2]]
        assert fact["zero_point"]["min"] == float(zero.min()) and fact["zero_point"]["dtype"] == str(zero.dtype)


def test_node_lists_producers_and_consumers(transformer, tmp_path):
    doc = _json(["inspect", transformer, "--node", "layers.1/Add_attn"], tmp_path)
    (facts,) = doc["matches"]
    assert facts["scope"] == "layers/1"
    assert facts["producers"] == ["layers.0/Add_ffn", "layers.1.self_attn.out_proj/Add"]
    assert facts["consumers"] == ["layers.1.norm2/LayerNormalization", "layers.1/Add_ffn"]


def test_errors_are_one_line_usage_errors(transformer):
    result = invoke(["inspect", transformer, "--node", "layers.1/Add_atn"], exit_code=2)
    assert "Error: --node 'layers.1/Add_atn'" in result.output and "layers.1/Add_attn" in result.output
    assert "Traceback" not in result.output
    result = invoke(["inspect", transformer, "--find", "re:("], exit_code=2)
    assert "invalid regular expression" in result.output
    invoke(["inspect", transformer, "--find", "op:Relu", "--node", "x"], exit_code=2)


def test_model_that_does_not_load_exits_3(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    result = invoke(["inspect", bad], exit_code=3)
    assert "Error:" in result.output and "Traceback" not in result.output


def test_json_to_stdout_is_the_result(transformer):
    result = invoke(["inspect", transformer, "--json", "-"])
    document = json.loads(result.output)
    assert document["kind"] == "inspect" and document["config"]["depth"] == 2
