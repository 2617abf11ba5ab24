"""Every validate rule fires on a model built to trigger it: rule ID, node and message facts."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.validate.config import ValidateConfig, parse_input_range
from inspector_cli.validate.catalog import RULES
from inspector_cli.workflows.validate import validate_model

from ..fixtures.helpers import init, make_model, vi
from ..fixtures.validate_cases import (Case, F, I64, against, chain, custom_op_model, external, float_matmul, input_q,
                             no_opset, node,
                             qdq_pair, qdq_weight, raw, relu_model, saved, truncated, with_ir)

BF16 = TensorProto.BFLOAT16
ones = np.ones(4, np.float32)

CASES = {
    # loading
    "MI101": Case(raw(b""), ["is empty (0 bytes)"]),
    "MI102": Case(raw(bytes([0, 255, 19, 7, 0, 1, 2]) * 20), ["not a valid ONNX protobuf"]),
    "MI103": Case(raw(b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n"),
                  ["is a text file", "version https://git-lfs.github.com/spec/v1"]),
    "MI104": Case(truncated, ["is truncated", "field 'graph'", "declares"]),
    "MI105": Case(saved(with_ir(0)), ["ir_version is 0"]),
    "MI106": Case(saved(with_ir(3)), ["IR version 3 is older than opset 17", "IR >= 8"]),
    "MI107": Case(no_opset, ["parsed but has no opset_import"]),
    "MI108": Case(external("weights.bin", create=False), ["tensor 'w'", "'weights.bin' not found"], tensor="w"),
    "MI109": Case(external("../outside.bin", create=True), ["tensor 'w'", "outside the model's folder"], tensor="w"),
    # issue 28: a corrupt offset is not a path problem (it was reported as MI109)
    "MI110": Case(external("w.bin", create=True, offset="abc"), ["tensor 'w'", "offset 'abc' is not a non-negative"],
                  tensor="w"),
    # checker and shapes
    "MI201": Case(saved(make_model([node("Relu", ["x"], ["y"], "relu", foo=1)], [vi("x", [1, 4])], [vi("y", [1, 4])])),
                  ["Unrecognized attribute: foo"], node="relu"),
    "MI202": Case(saved(make_model([node("Add", ["a", "b"], ["c"], "skip_add")],
                                   [vi("a", [1, 64, 56, 56]), vi("b", [1, 32, 56, 56])], [vi("c", [1, 64, 56, 56])])),
                  ["Add 'skip_add'", "'a' [1, 64, 56, 56]", "'b' [1, 32, 56, 56]", "Incompatible dimensions"],
                  node="skip_add"),
    "MI203": Case(saved(make_model([node("Add", ["a", "b"], ["c"], "add")], [vi("a", [2]), vi("b", [2], I64)],
                                   [vi("c", [2])])), ["inconsistent type", "b int64", "a float32"], node="add"),
    "MI204": Case(saved(make_model([node("Relu", ["x"], ["y"], "relu")], [vi("x", [2, 3])], [vi("y", [2, 4])])),
                  ["existing shape differ", "(3) vs (4)", "declared [2, 4]"], node="relu", tensor="y",
                  config={"strict": True}),  # onnxruntime loads it: a warning without --strict (test_runtime_view)
    "MI205": Case(saved(make_model([node("Relux", ["x"], ["y"], "r")], [vi("x", [1, 4])], [vi("y", [1, 4])])),
                  ["Relux is not an operator of ai.onnx opset 17"], node="r"),
    "MI206": Case(saved(make_model([node("Foo", ["x"], ["y"], "foo", domain="com.example")], [vi("x", [1, 4])],
                                   [vi("y", [1, 4])])), ["domain 'com.example'", "no opset import"], node="foo"),
    "MI207": Case(saved(relu_model(opset=30)), ["opset 30 is newer than the installed onnx"]),
    "MI210": Case(saved(custom_op_model(typed_output=False)), ["graph output 'y' [1, ?] has unknown dimension(s) after shape inference (dim 1)"],
                  tensor="y"),
    # integrity
    "MI301": Case(saved(make_model([node("Relu", ["zz"], ["y"], "relu")], [vi("x", [1])], [vi("y", [1])])),
                  ["Relu 'relu' reads 'zz'"], node="relu", tensor="zz"),
    "MI302": Case(saved(make_model([node("Relu", ["x"], ["y"], "a"), node("Neg", ["x"], ["y"], "b")],
                                   [vi("x", [1])], [vi("y", [1])])), ["'y' is produced by 2 nodes: a, b"], tensor="y"),
    "MI303": Case(saved(make_model([node("Relu", ["x"], ["y"], "relu")], [vi("x", [1])], [vi("y", [1]), vi("q", [1])])),
                  ["graph output 'q' is produced by no node"], tensor="q"),
    "MI304": Case(saved(relu_model(initializers=[init("w_unused", ones)])), ["initializer 'w_unused' is read by no node"],
                  tensor="w_unused"),
    "MI305": Case(saved(make_model([node("Relu", ["x"], ["y"], "relu")], [vi("x", [1]), vi("extra", [1])],
                                   [vi("y", [1])])), ["graph input 'extra' is read by no node"], tensor="extra"),
    "MI306": Case(saved(make_model([node("Relu", ["x"], ["y"], "relu"), node("Neg", ["x"], ["n"], "neg"),
                                    node("Abs", ["n"], ["d"], "dead_end")], [vi("x", [1])], [vi("y", [1])])),
                  ["Abs 'dead_end' reaches no graph output", "1 upstream node"], node="dead_end"),
    "MI307": Case(saved(make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1])], [vi("y", [1])])),
                  ["1 node(s) have no name", "Relu_0"], node="Relu_0"),
    "MI308": Case(saved(make_model([node("Relu", ["x"], ["t"], "n"), node("Neg", ["t"], ["y"], "n")],
                                   [vi("x", [1])], [vi("y", [1])])), ["2 nodes are named 'n'", "n_1"], node="n"),
    "MI309": Case(saved(make_model([node("Add", ["x", "b"], ["a"], "first"), node("Relu", ["a"], ["b"], "second"),
                                    node("Neg", ["a"], ["y"], "out")], [vi("x", [1])], [vi("y", [1])])),
                  ["cycle: first -> second -> first"], node="first"),
    "MI310": Case(saved(make_model([node("Neg", ["t"], ["y"], "late"), node("Relu", ["x"], ["t"], "early")],
                                   [vi("x", [1])], [vi("y", [1])])),
                  ["Neg 'late' comes before the producer of its input 't' (early)"], node="late", tensor="t"),
    "MI311": Case(saved(make_model([node("Add", ["x", "w"], ["y"], "add")], [vi("x", [4]), vi("w", [4])], [vi("y", [4])],
                                   [init("w", ones)])), ["initializer 'w' is also a graph input"], tensor="w"),
    # runtime support
    "MI401": Case(saved(make_model([node("Mod", ["a", "b"], ["c"], "mod")], [vi("a", [2], BF16), vi("b", [2], BF16)],
                                   [vi("c", [2], BF16)])), ["no kernel for Mod(13)", "bfloat16"], node="mod"),
    "MI402": Case(saved(relu_model(opset=30)), ["opset 30 of ai.onnx is newer than onnxruntime supports (28)"]),
    "MI403": Case(saved(custom_op_model()), ["custom domain 'com.example' (Foo)", "no --custom-op-lib"], node="foo"),
    "MI404": Case(saved(make_model([node("Resize", ["x", "", "sc"], ["y"], "rs", mode="foo")], [vi("x", [1, 1, 2, 2])],
                                   [vi("y", [1, 1, 4, 4])], [init("sc", np.array([1, 1, 2, 2], np.float32))])),
                  ["onnxruntime: mode attribute is foo"]),
    "MI405": Case(saved(make_model([node("Relu", ["x"], ["y"], "relu")], [vi("x", ["N", 4])], [vi("y", ["N", 4])])),
                  ["input 'x' [N, 4] has dynamic dimensions: N (dim 0)"], tensor="x"),
    "MI406": Case(saved(make_model([node("Relu", ["x"], ["y"], "relu")], [vi("x", [2], TensorProto.DOUBLE)],
                                   [vi("y", [2], TensorProto.DOUBLE)])), ["graph input 'x' is float64"], tensor="x"),
    "MI407": Case(saved(make_model([node("Add", ["x", "w"], ["y"], "add")], [vi("x", [4])], [vi("y", [4])],
                                   [init("w", np.array([1, np.nan, np.inf, 2], np.float32))])),
                  ["initializer 'w' holds 1 NaN and 1 Inf of 4 values", "read by add"], node="add", tensor="w"),
    "MI408": Case(saved(make_model([node("Add", ["x", "w"], ["y"], "add")], [vi("x", [1000])], [vi("y", [1000])],
                                   [init("w", np.ones(1000, np.float32))])),
                  ["initializer 'w' holds 0.0 MB (over 0.001 MB)"], node="add", tensor="w",
                  config={"large_initializer_mb": 0.001}),
    "MI409": Case(saved(make_model([node("Add", ["x", "w"], ["y"], "add")], [vi("x", [64])], [vi("y", [64])],
                                   [init("w", np.ones(64, np.float32))])),
                  ["the model file is 0.00 GiB with every weight inline", "limit is 2 GiB"],
                  patch={"inspector_cli.validate.runtime.PROTOBUF_LIMIT": 100}),
    # quantisation
    "MI501": Case(saved(qdq_weight(0.0)), ["DequantizeLinear 'w_dq': scale 'w_scale' is <= 0 (0)"], node="w_dq",
                  tensor="w_scale"),
    "MI502": Case(saved(qdq_weight([0.1, np.nan, 0.2], axis=1)), ["scale 'w_scale' is NaN or Inf",
                                                                  "1 of 3 values, first index 1 = nan"], node="w_dq"),
    "MI503": Case(saved(qdq_weight(1e-40)), ["scale 'w_scale' is denormal, below 1.18e-38 (9.99995e-41)"], node="w_dq"),
    "MI504": Case(saved(qdq_weight(0.1, zp=200, zp_type=np.int32)),
                  ["zero point 'w_zp' = 200 is outside int8 [-128, 127]"], node="w_dq", tensor="w_zp"),
    "MI505": Case(saved(qdq_weight([0.1, 0.2, 0.3], zp=[0, 0, 0], axis=0)),
                  ["'w_q' has 4 elements along axis 0 but scale 'w_scale' has 3 values"], node="w_dq", tensor="w_q"),
    "MI506": Case(saved(qdq_pair(0.1, 0.2)), ["QuantizeLinear 'q' -> DequantizeLinear 'dq'", "scale 0.1 vs 0.2",
                                               "rescaled by 2"], node="dq"),
    "MI507": Case(saved(input_q(1 / 128, 0)), ["represents [-1, 0.992188]", "99.6% of the declared range [0, 255]",
                                                "values above 0.9922 saturate at 127"],
                  node="input_q", tensor="input", config={"input_ranges": ("input:0,255",)}),
    "MI508": Case(saved(input_q(1.0, -128)), ["represents [0, 255]", "spans 1.0 of 256 levels (0.4%)"],
                  node="input_q", config={"input_ranges": ("input:0,1",)}),
    # sign-flipped weights: noise = (2w)^2, SQNR = 10 log10(1/4) = -6.02 dB
    "MI509": Case(against(qdq_weight(0.5, zp=0, w=-(np.arange(12).reshape(4, 3) - 6)), float_matmul()),
                  ["dequantised values differ", "SQNR -6.02 dB"], node="mm", tensor="w_q"),
    # every dequantised value off by +0.5: SQNR = 10 log10(36.5 / (12 * 0.25)) = 10.85 dB
    "MI510": Case(against(qdq_weight(0.5, zp=0, w=np.arange(12).reshape(4, 3) - 5), float_matmul()),
                  ["SQNR 10.85 dB against 'w' is below 20 dB", "max |diff| 0.5"], node="mm", tensor="w_q"),
    "MI511": Case(saved(make_model([*qdq_weight(0.5, zp=0).graph.node, node("MatMul", ["y", "w2"], ["z"], "float_mm")],
                                   [vi("x", [2, 4])], [vi("z", [2, 2])],
                                   [*qdq_weight(0.5, zp=0).graph.initializer, init("w2", np.ones((3, 2), np.float32))])),
                  ["1 of 2 MatMul node(s) run in float", "float_mm"], node="float_mm"),
    # optimisation hints
    "MI601": Case(saved(make_model([node("Conv", ["x", "w"], ["c"], "conv"),
                                    node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], "bn")],
                                   [vi("x", [1, 3, 2, 2])], [vi("y", [1, 4, 2, 2])],
                                   [init("w", np.ones((4, 3, 1, 1), np.float32)), init("s", ones), init("b", ones),
                                    init("m", ones), init("v", ones)])), ["feeds BatchNormalization 'bn'"], node="conv"),
    "MI602": Case(saved(make_model([node("Transpose", ["x"], ["t"], "tA", perm=[1, 0]),
                                    node("Transpose", ["t"], ["y"], "tB", perm=[1, 0])], [vi("x", [2, 3])],
                                   [vi("y", [2, 3])])), ["'tA' and 'tB' cancel out"], node="tA"),
    "MI603": Case(saved(make_model([node("Flatten", ["x"], ["f"], "flat"), node("Reshape", ["f", "shape"], ["y"], "rs")],
                                   [vi("x", [2, 3])], [vi("y", [6])], [init("shape", np.array([6], np.int64))])),
                  ["Flatten 'flat' feeds Reshape 'rs'"], node="flat"),
    "MI604": Case(saved(make_model([node("Cast", ["x"], ["h"], "to16", to=TensorProto.FLOAT16),
                                    node("Cast", ["h"], ["y"], "to32", to=F)], [vi("x", [2])], [vi("y", [2])])),
                  ["Cast 'to16' -> Cast 'to32' returns to float"], node="to16"),
    "MI605": Case(saved(make_model([node("Identity", ["x"], ["i"], "ident"), node("Relu", ["i"], ["y"], "relu")],
                                   [vi("x", [2])], [vi("y", [2])])), ["Identity 'ident' does nothing"], node="ident"),
    "MI606": Case(saved(make_model([node("Mul", ["s", "s"], ["s2"], "sq"), node("Add", ["s2", "s"], ["s3"], "plus"),
                                    node("Add", ["x", "s3"], ["y"], "add")], [vi("x", [4])], [vi("y", [4])],
                                   [init("s", ones)])), ["Add 'plus' ends a constant subgraph of 2 nodes"], node="plus"),
    # --against structure
    "MI701": Case(against(chain(["Relu", "Sigmoid"]), chain(["Relu", "Softmax"])),
                  ["Softmax (1x in", "is absent from"]),
    "MI702": Case(against(chain(["Relu", "Sigmoid"]), chain(["Relu", "Softmax"])), ["Sigmoid (1x) is not in the reference"]),
    "MI703": Case(against(relu_model(), make_model([node("Relu", ["x"], ["out"], "relu")], [vi("x", [1, 4])],
                                                   [vi("out", [1, 4])])),
                  ["output 'out' is missing from"], tensor="out"),
    "MI704": Case(against(relu_model(), make_model([node("Relu", ["x"], ["y"], "relu")], [vi("x", [1, 8])],
                                                   [vi("y", [1, 8])])),
                  ["input 'x' is float32 [1, 4] here but float32 [1, 8] in the reference"], tensor="x"),
    "MI705": Case(against(chain(["Relu"]), chain(["Relu", "Relu"])), ["Relu: 2 in the reference, 1 here"]),
    "MI706": Case(against(chain(["Relu"]), chain(["Relu", "Dropout"])),
                  ["Dropout (1x in the reference) is absent: a no-op at inference"]),
}


def test_every_rule_has_a_case():
    assert sorted(CASES) == sorted(RULES)


def run_case(case: Case, tmp_path: Path):
    path = case.build(tmp_path)
    settings = dict(case.config)
    settings["input_ranges"] = tuple(parse_input_range(r) for r in settings.get("input_ranges", ()))
    if (tmp_path / "ref.onnx").exists():
        settings["against"] = str(tmp_path / "ref.onnx")
    return validate_model(path, ValidateConfig(**settings))


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires(rule_id, tmp_path, monkeypatch):
    case = CASES[rule_id]
    for target, value in case.patch.items():
        monkeypatch.setattr(target, value)
    result = run_case(case, tmp_path)
    hits = [f for f in result.findings if f.rule == rule_id]
    assert hits, f"{rule_id} did not fire; findings: {[(f.rule, f.message) for f in result.findings]}"
    finding = next((f for f in hits if all(fact in f.message for fact in case.facts)), hits[0])
    for fact in case.facts:
        assert fact in finding.message, f"{rule_id}: {fact!r} not in {finding.message!r}"
    if case.node is not None:
        assert finding.node == case.node
    if case.tensor is not None:
        assert finding.tensor == case.tensor
    assert finding.severity == RULES[rule_id].severity
    assert result.passed == (not any(f.severity.value == "error" for f in result.findings))
    assert RULES[rule_id] in result.rules
