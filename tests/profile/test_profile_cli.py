"""`mi profile` end to end: JSON, trace file, gates, dynamic shapes and --against on a real QDQ pair."""
from __future__ import annotations

import json

import pytest

from inspector_cli.results.profile import ProfileResult
from inspector_cli.serialize import read_result

import numpy as np
from onnx import helper

from ..fixtures.helpers import affine_model, init, invoke, make_model, read_json, save, vi


@pytest.fixture()
def affine(tmp_path):
    return save(affine_model(2.0, 1.0, shape=(4, 16)), tmp_path / "affine.onnx")


def test_profile_json_trace_and_sums(tmp_path, affine):
    out, trace = tmp_path / "r.json", tmp_path / "t.json"
    result = invoke(["profile", affine, "--runs", "5", "--warmup", "1", "--opt-level", "disable",
                     "--json", out, "--trace", trace])
    assert "top kernels" in result.stdout and "time by op type" in result.stdout
    doc = read_json(out)
    assert doc["kind"] == "profile" and doc["verdict"]["exit_code"] == 0
    p = doc["results"]["profiles"][0]
    assert p["e2e"]["runs"] == 5 and p["profiled"]["runs"] == 5 and p["warmup_dropped"] == 1
    kernels = {k["name"]: k for k in p["kernels"]}
    assert set(kernels) == {"mul", "add"} and kernels["mul"]["op_type"] == "Mul"
    assert kernels["add"]["flops"] == 64 and kernels["add"]["output_shapes"] == ["float[4,16]"]
    # Op-type totals are exactly the per-kernel times of the table, and add up to the kernel sum.
    for op in p["op_types"]:
        members = [k for k in p["kernels"] if k["op_type"] == op["op_type"]]
        assert op["count"] == len(members)
        assert op["total_us"] == pytest.approx(sum(k["per_run_us"] for k in members))
        assert all(k["per_run_us"] == k["p50_us"] for k in members)      # ran once in every run
    assert sum(o["total_us"] for o in p["op_types"]) == pytest.approx(p["kernel_sum_us"])
    assert p["critical_path"]["sum_us"] == pytest.approx(p["kernel_sum_us"])
    assert [s["node"] for s in p["critical_path"]["steps"]] == ["mul", "add"]
    events = json.loads(trace.read_text())["traceEvents"]
    assert len([e for e in events if e.get("cat") == "run"]) == 5
    assert sorted({e["name"] for e in events if e.get("cat") in ("Mul", "Add")}) == ["add", "mul"]
    assert len([e for e in events if e.get("cat") in ("Mul", "Add")]) == 10
    assert isinstance(read_result(out), ProfileResult)


def test_latency_gate_fails_with_exit_1_and_keeps_the_report(tmp_path, affine):
    out = tmp_path / "r.json"
    invoke(["profile", affine, "--runs", "3", "--max-latency", "0.000001", "--json", out], exit_code=1)
    doc = read_json(out)
    gate = doc["results"]["gates"][0]
    assert gate["gate"] == "--max-latency 1e-06" and gate["passed"] is False and gate["failed_samples"] == 3
    assert doc["verdict"]["summary"].startswith("FAIL: --max-latency")
    invoke(["profile", affine, "--runs", "3", "--max-latency", "10000", "--json", out])
    assert read_json(out)["results"]["gates"][0]["passed"] is True


def test_min_speedup_needs_against(affine):
    result = invoke(["profile", affine, "--min-speedup", "2"], exit_code=2)
    assert "--min-speedup needs --against" in result.stderr


def test_dynamic_batch_is_fixed_with_shape(tmp_path):
    model = save(affine_model(shape=("N", 4)), tmp_path / "dyn.onnx")
    batch1 = tmp_path / "b1.json"  # a symbolic batch defaults to 1, said in the result (issue 14)
    invoke(["profile", model, "--runs", "2", "--no-memory-stats", "--json", batch1])
    assert read_json(batch1)["inputs"]["notes"] == [
        "input 'x' [N, 4]: symbolic batch dimension set to 1 (--shape x:... sets another)"]
    assert read_json(batch1)["results"]["profiles"][0]["memory"]["peak_bytes"] == 32  # x and m, [1,4] float32
    seq = save(affine_model(shape=("N", "seq")), tmp_path / "seq.onnx")
    invoke(["profile", seq, "--runs", "2"], exit_code=3)  # any other symbolic dim still asks for --shape
    out = tmp_path / "r.json"
    invoke(["profile", model, "--runs", "2", "--shape", "x:3x4", "--no-memory-stats", "--json", out])
    memory = read_json(out)["results"]["profiles"][0]["memory"]
    # x, m = x*s and y = m+b are [3,4] float32 (48 B): x and m are live together at 'mul'.
    assert memory["peak_bytes"] == 96 and memory["peak_node"] == "mul" and memory["unknown_tensors"] == 0
    assert memory["node_stats"] == []


def test_against_a_real_int8_qdq_model(tmp_path, cnn_pair):
    fp32, int8, data = cnn_pair
    out = tmp_path / "r.json"
    result = invoke(["profile", fp32, "--against", int8, "--inputs", data, "--runs", "6", "--warmup", "1",
                     "--format", "markdown", "--json", out])
    assert "**A vs B**" in result.stdout and "op types (base op" in result.stdout
    doc = read_json(out)["results"]
    assert [p["role"] for p in doc["profiles"]] == ["reference", "candidate"]
    c = doc["comparison"]
    assert c["ci_low"] <= c["e2e_speedup"] <= c["ci_high"] and c["matched_units"] >= 5
    conv = next(d for d in c["op_types"] if d["op_type"] == "Conv")
    assert conv["a_count"] == 6 and conv["b_count"] == 6      # QLinearConv and float Conv both count as Conv
    dq = next(d for d in c["op_types"] if d["op_type"] == "DequantizeLinear")
    assert dq["a_count"] == 0 and dq["b_count"] > 0 and dq["speedup"] is None
    # The int8 model's Conv 'conv_7' became a QLinearConv that also does its Q/DQ nodes.
    b_kernels = {k["name"]: k for k in doc["profiles"][1]["kernels"]}
    qconv = next(k for k in b_kernels.values() if k["op_type"] == "QLinearConv" and "conv_7" in k["original_nodes"])
    assert any(n.endswith("DequantizeLinear") for n in qconv["original_nodes"])
    loaded = read_result(out)
    assert loaded.comparison is not None and loaded.comparison.op_types[0].op_type == c["op_types"][0]["op_type"]


def test_kernels_inside_an_if_branch_are_not_counted_twice(tmp_path):
    then_branch = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
                                    [vi("t", [2, 4])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                                    [vi("e", [2, 4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["i"], name="branch", then_branch=then_branch, else_branch=else_branch),
             helper.make_node("MatMul", ["i", "w"], ["y"], name="mm")]
    model = save(make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])],
                            [init("zero", np.array(0, np.float32)), init("w", np.ones((4, 4), np.float32))]),
                 tmp_path / "if.onnx")
    out = tmp_path / "r.json"
    invoke(["profile", model, "--runs", "3", "--no-memory-stats", "--json", out])   # inputs in [0, 1): 'then'
    p = read_json(out)["results"]["profiles"][0]
    assert {k["name"] for k in p["kernels"]} == {"sum", "gt", "branch", "mm"}
    assert any("control-flow subgraphs" in n for n in p["notes"])
    assert sum(k["per_run_us"] for k in p["kernels"]) == pytest.approx(p["kernel_sum_us"])
