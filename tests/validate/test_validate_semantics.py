"""Behaviour beyond single rules: all kernel gaps at once, no duplicate findings, the coverage arithmetic."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from inspector_cli.validate.config import InputRange, ValidateConfig
from inspector_cli.render.sarif import validate_to_sarif
from inspector_cli.render.validate_view import validate_view
from inspector_cli.serialize import envelope, result_from_document
from inspector_cli.validate.catalog import RULES
from inspector_cli.validate.quant_range import coverage
from inspector_cli.workflows.validate import validate_model

from ..fixtures.helpers import init, invoke, make_model, save, vi
from ..fixtures.validate_cases import input_q, node, qdq_pair, relu_model

BF16 = TensorProto.BFLOAT16


def rules_and_nodes(result):
    return sorted((f.rule, f.node or "") for f in result.findings)


def test_every_node_without_a_kernel_is_listed_not_just_the_first(tmp_path):
    nodes = [node("Mod", ["a", "b"], ["c"], "mod_a"), node("Mod", ["c", "b"], ["d"], "mod_b"),
             node("ImageDecoder", ["img"], ["pixels"], "decode")]
    model = make_model(nodes, [vi("a", [2], BF16), vi("b", [2], BF16), vi("img", [64], TensorProto.UINT8)],
                       [vi("d", [2], BF16), vi("pixels", [None, None, 3], TensorProto.UINT8)], opset=20)
    result = validate_model(save(model, tmp_path / "m.onnx"))
    gaps = {f.node: f.message for f in result.findings if f.rule == "MI401"}
    assert set(gaps) == {"mod_a", "mod_b", "decode"}
    assert "no kernel for ImageDecoder(20) on any requested provider" in gaps["decode"]
    assert "T=bfloat16" in gaps["mod_b"] and "float16" in gaps["mod_b"]  # what it has instead
    assert result.runtime["session"] == "failed"


@pytest.mark.parametrize("model,expected", [
    (make_model([node("Relu", ["zz"], ["y"], "relu")], [vi("x", [1])], [vi("y", [1])]),
     [("MI301", "relu"), ("MI305", "")]),
    (make_model([node("Add", ["a", "b"], ["c"], "add")], [vi("a", [2]), vi("b", [2], TensorProto.INT64)],
                [vi("c", [2])]), [("MI203", "add")]),
    (make_model([node("Relux", ["x"], ["y"], "r")], [vi("x", [1])], [vi("y", [1])]), [("MI205", "r")]),
])
def test_onnxruntime_refusal_of_an_explained_defect_is_not_repeated(tmp_path, model, expected):
    result = validate_model(save(model, tmp_path / "m.onnx"))
    assert rules_and_nodes(result) == expected
    assert result.runtime["session"] == "failed"  # onnxruntime did refuse it


def test_coverage_per_channel_by_hand():
    scale, zp = np.array([1 / 128, 1.0]), np.array([0.0, -128.0])
    low, high, lost, used = coverage(scale, zp, -128, 127, 0.0, 255.0)
    assert low.tolist() == [-1.0, 0.0] and high.tolist() == [127 / 128, 255.0]
    assert lost[0] == pytest.approx((255 - 127.5 / 128) / 255) and lost[1] == 0.0
    assert used[1] == pytest.approx(255 / 256)
    # exactly at the edges and half a step beyond is still representable (rounding, not clipping)
    assert coverage(np.array([1.0]), np.array([0.0]), 0, 255, -0.5, 255.5)[2][0] == 0.0


def test_input_range_through_a_transpose_and_for_every_input(tmp_path):
    model = input_q(1 / 128, 0)
    model.graph.node.insert(0, node("Transpose", ["raw"], ["input_t"], "to_nchw", perm=[1, 0]))
    model.graph.node[1].input[0] = "input_t"
    model.graph.input[0].CopyFrom(vi("raw", [3, 1]))
    result = validate_model(save(model, tmp_path / "m.onnx"), ValidateConfig(input_ranges=(InputRange("", 0, 255),)))
    saturate = [f for f in result.findings if f.rule == "MI507"]
    assert len(saturate) == 1 and saturate[0].tensor == "raw" and saturate[0].node == "input_q"


def test_input_range_on_an_input_without_quantizer_is_a_note(tmp_path):
    path = save(relu_model(), tmp_path / "m.onnx")
    from inspector_cli.validate.config import parse_input_range

    result = validate_model(path, ValidateConfig(input_ranges=(parse_input_range("x:0,1"),)))
    assert result.notes == ["--input-range x:0,1: no QuantizeLinear reads input 'x' (directly or through "
                            "Cast/Transpose/Reshape); nothing to check"]


def test_qdq_pair_zero_point_and_matching_pairs(tmp_path):
    ok = validate_model(save(qdq_pair(0.1, 0.1), tmp_path / "ok.onnx"))
    assert not [f for f in ok.findings if f.rule == "MI506"]
    model = qdq_pair(0.1, 0.1)
    model.graph.initializer.append(init("z2", np.array(3, np.int8)))
    model.graph.node[1].input[2] = "z2"
    bad = validate_model(save(model, tmp_path / "bad.onnx"))
    assert [f.message for f in bad.findings if f.rule == "MI506"] == [
        "QuantizeLinear 'q' -> DequantizeLinear 'dq': zero point 0 vs 3"]


def test_result_rerenders_identically_from_its_json(tmp_path):
    path = save(input_q(1 / 128, 0), tmp_path / "m.onnx")
    from inspector_cli.validate.config import parse_input_range

    result = validate_model(path, ValidateConfig(input_ranges=(parse_input_range("input:0,255"),)))
    again = result_from_document(envelope(result))
    assert validate_view(again) == validate_view(result)
    assert validate_to_sarif(again) == validate_to_sarif(result)


def test_progress_reports_each_family(tmp_path):
    seen = []
    validate_model(save(relu_model(), tmp_path / "m.onnx"), progress=lambda done, total, label: seen.append(
        (done, total, label)))
    assert seen == [(1, 6, "loading"), (2, 6, "checker"), (3, 6, "integrity"), (4, 6, "runtime"),
                    (5, 6, "quantisation"), (6, 6, "hints")]


def test_unloadable_reference_cannot_be_analysed(tmp_path):
    path = save(relu_model(), tmp_path / "m.onnx")
    (tmp_path / "ref.onnx").write_bytes(b"\x00garbage")
    result = invoke(["validate", path, "--against", tmp_path / "ref.onnx"], exit_code=3)
    assert result.stderr.startswith("Error: ") and "ref.onnx" in result.stderr


def test_broken_custom_op_library_is_not_a_model_defect(tmp_path):
    from ..fixtures.validate_cases import custom_op_model

    path = save(custom_op_model(), tmp_path / "m.onnx")
    lib = tmp_path / "libnot.so"
    lib.write_bytes(b"not a shared library")
    result = invoke(["validate", path, "--custom-op-lib", lib], exit_code=3)
    assert "custom-op library" in result.stderr and "could not be registered" in result.stderr


def test_disabling_the_runtime_rules_skips_the_session(tmp_path):
    result = validate_model(save(relu_model(), tmp_path / "m.onnx"),
                            ValidateConfig(disable=("MI401", "MI402", "MI403", "MI404")))
    assert result.runtime["session"] == "skipped: rules disabled"


def test_many_matches_of_one_hint_become_one_finding(tmp_path):
    """Exporters repeat Identity copies of weights dozens of times: one finding lists them."""
    nodes, current = [], "x"
    for i in range(7):
        nodes.append(node("Identity", [current], [f"i{i}"], f"copy_{i}"))
        nodes.append(node("Relu", [f"i{i}"], [f"r{i}"], f"relu_{i}"))
        current = f"r{i}"
    model = make_model(nodes, [vi("x", [2])], [vi(current, [2])])
    result = validate_model(save(model, tmp_path / "m.onnx"))
    hints = [f for f in result.findings if f.rule == "MI605"]
    assert len(hints) == 1 and hints[0].node == "copy_0"
    assert hints[0].message.startswith("7x Identity node: Identity 'copy_0' does nothing at run time")
    assert "(and copy_1, copy_2, copy_3, copy_4, copy_5, ...)" in hints[0].message
    assert hints[0].data["nodes"] == [f"copy_{i}" for i in range(7)]


def test_errors_only_data_propagation_reports_are_a_note_not_a_finding(tmp_path, monkeypatch):
    """onnx's data propagation has had bugs: an error it alone reports must not fail a clean model."""
    import onnx

    real = onnx.shape_inference.infer_shapes

    def flaky(model, check_type=False, strict_mode=False, data_prop=False):
        if data_prop and strict_mode:
            raise onnx.shape_inference.InferenceError(
                "[ShapeInferenceError] Inference error(s): (op_type:Relu, node name: relu): [ShapeInferenceError] bogus")
        return real(model, check_type=check_type, strict_mode=strict_mode, data_prop=data_prop)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", flaky)
    result = validate_model(save(relu_model(), tmp_path / "m.onnx"))
    assert result.findings == []
    assert result.notes and "does not confirm; not reported" in result.notes[0] and "bogus" in result.notes[0]


def test_duplicate_graph_input_names(tmp_path):
    model = make_model([node("Add", ["x", "x"], ["y"], "add")], [vi("x", [2]), vi("x", [2])], [vi("y", [2])])
    result = validate_model(save(model, tmp_path / "m.onnx"))
    assert [(f.rule, f.tensor, f.message) for f in result.findings if f.rule == "MI302"] == [
        ("MI302", "x", "graph input name 'x' is declared 2 times")]


def test_a_family_whose_rules_are_all_disabled_is_skipped(tmp_path):
    result = validate_model(save(relu_model(), tmp_path / "m.onnx"), ValidateConfig(
        disable=tuple(r for r in RULES if r.startswith(("MI2", "MI6")))))
    assert result.checked == ["loading", "integrity", "runtime", "quantisation"]
    assert result.skipped == {"checker": "all its rules are disabled", "hints": "all its rules are disabled"}


def test_checks_and_node_values_for_the_reporting_layer(tmp_path):
    """JUnit / report diffs / graph overlays; active once results.base has Check and NodeValues."""
    from inspector_cli.results import base

    if not hasattr(base, "Check") or not hasattr(base, "NodeValues"):
        pytest.skip("this branch predates the reporting foundation (Check, NodeValues)")
    model = make_model([node("Add", ["a", "b"], ["c"], "skip_add"), node("Identity", ["c"], ["y"], "ident"),
                        node("Relu", ["y"], ["z"], "relu")],
                       [vi("a", [1, 4]), vi("b", [1, 2]), vi("extra", [1])], [vi("z", [1, 4])])
    result = validate_model(save(model, tmp_path / "m.onnx"))
    checks = {c.name: (c.group, c.passed) for c in result.checks()}
    assert checks["MI202 on node skip_add"] == ("validate.checker", False)
    assert checks["integrity rules"] == ("validate.integrity", True)  # MI305 is a warning: below --fail-on
    assert "MI305 on tensor extra" not in checks
    values = result.node_values()[0]
    assert values.key == "node" and values.values == {"skip_add": 3.0, "ident": 1.0}
