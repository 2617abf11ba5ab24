"""Pairing tensors of two different graphs: each method on a model pair built for it."""
from __future__ import annotations

import onnx
import pytest

from inspector_cli.core.graph import ModelGraph, load_model
from inspector_cli.compare.pairing.match import match_tensors, parse_tensor_map
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.errors import UsageError

from ..fixtures.layer_models import conv_relu_conv, fp16_with_casts, renamed, softmax_swapped, twin_branches


def sem(model: "onnx.ModelProto | str") -> SemanticGraph:
    graph = ModelGraph.from_proto(model) if isinstance(model, onnx.ModelProto) else load_model(model)
    return SemanticGraph.build(graph)


def pairs_by_a(matching):  # type: ignore[no-untyped-def]
    return {p.a: p for p in matching.pairs}


def test_exact_names_pair_every_tensor_with_full_confidence():
    a = sem(conv_relu_conv())
    m = match_tensors(a, sem(conv_relu_conv()), inputs=[("x", "x")])
    got = pairs_by_a(m)
    assert set(got) == {"c", "r", "y"}
    assert all(p.method == "name" and p.confidence == 1.0 and p.b == p.a for p in m.pairs)
    assert [p.chain_end for p in m.pairs] == [False, True, True]  # Conv is inside the Conv+Relu chain
    assert not m.unpaired_a and not m.unpaired_b


def test_fused_conv_relu_pairs_the_chain_end_and_reports_the_interior():
    m = match_tensors(sem(conv_relu_conv()), sem(conv_relu_conv(fused=True)), inputs=[("x", "x")])
    got = pairs_by_a(m)
    assert got["r"].method == "fused" and got["r"].b == "r" and got["r"].op_a == "Conv+Relu" and got["r"].op_b == "FusedConv"
    assert got["r"].confidence >= 0.9  # the Relu is explained by FusedConv's activation attribute
    assert got["y"].method == "name"
    [interior] = m.unpaired_a
    assert interior.tensor == "c" and interior.reason.startswith("fused into 'r'")


def test_fp16_casts_and_identity_are_looked_through():
    a, b = fp16_with_casts()
    m = match_tensors(sem(a), sem(b), inputs=[("x", "x")])
    got = pairs_by_a(m)
    assert got["y"].method == "cast" and got["y"].b == "y_fp16"  # B's 'y' is a Cast of 'y_fp16'
    assert got["y"].view_b.expose == "y"  # read where it is free: B's graph output
    assert got["r"].method == "identity" and got["r"].b == "relu_raw"
    assert got["c"].method == "name"
    assert not m.unpaired_a


def test_qdq_model_with_arbitrary_names_pairs_by_graph_structure(cnn_pair):
    fp32, int8, _ = cnn_pair
    qdq, names = renamed(onnx.load(str(int8)), prefix="q")
    reference = match_tensors(sem(str(fp32)), sem(str(int8)), inputs=[("input", "input")])
    m = match_tensors(sem(str(fp32)), sem(qdq), inputs=[("input", "input")])
    assert len(m.pairs) == len(reference.pairs) == 11
    first = m.pairs[0]  # the candidate quantises its input: that rounding is the first row
    assert first.a == first.b == "input" and first.method == "qdq" and first.op_a == "input"
    assert first.view_b.quant is not None
    expected = {p.a: names.get(p.b, p.b) for p in reference.pairs}
    for pair in m.pairs[1:]:
        assert pair.b == expected[pair.a], pair  # the same counterpart as with the quantiser's own names
        assert pair.method in ("qdq", "fused")
        if pair.a == "logits":  # DQ(Q(Gemm)) is B's graph output: read there, by name
            assert pair.view_b.expose == "logits" and pair.located_by == "name"
        else:  # B's int8 QuantizeLinear output, read dequantised
            assert pair.view_b.quant is not None and pair.view_b.expose.startswith("q")
            assert pair.located_by == "structure" and 0.85 <= pair.confidence <= 0.95
    fused = [p for p in m.pairs if p.method == "fused"]
    assert {p.a for p in fused} >= {"relu_3_out", "relu_6_out", "bn_8_out"}  # Conv+BN(+Relu) vs one Conv
    assert all(u.reason.startswith("fused into") for u in m.unpaired_a)


def test_qoperator_model_pairs_dequantised_outputs(tmp_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from inspector_cli.testing.models import build_cnn, image_samples

    onnx.save(build_cnn(seed=0), tmp_path / "fp32.onnx")
    calibration = iter(image_samples(4, seed=3))

    class Reader(CalibrationDataReader):
        def get_next(self):  # type: ignore[no-untyped-def]
            return next(calibration, None)

    quantize_static(str(tmp_path / "fp32.onnx"), str(tmp_path / "qop.onnx"), Reader(), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8)
    m = match_tensors(sem(str(tmp_path / "fp32.onnx")), sem(str(tmp_path / "qop.onnx")), inputs=[("input", "input")])
    got = pairs_by_a(m)
    assert got["stem_1_out"].op_b == "QLinearConv" and got["stem_1_out"].method == "qdq"
    assert got["stem_1_out"].view_b.quant is not None  # QLinearConv's uint8 output with its y_scale
    assert got["relu_10_out"].op_b == "QLinearAdd" and got["relu_10_out"].method == "fused"  # Add+Relu vs QLinearAdd
    assert got["logits"].op_b == "QGemm"


def test_renamed_reexport_pairs_structurally():
    from inspector_cli.testing.models import build_cnn

    a = build_cnn(seed=1)
    b, names = renamed(a)
    m = match_tensors(sem(a), sem(b), inputs=[("input", "input")])
    assert len(m.pairs) == len(SemanticGraph.build(ModelGraph.from_proto(a)).chain_of) == 22  # every tensor
    for pair in m.pairs:
        assert pair.b == names.get(pair.a, pair.a) and pair.method in ("structural", "name")
    assert {p.method for p in m.pairs if p.a != "probs"} == {"structural"}
    assert min(p.confidence for p in m.pairs) >= 0.85


def test_identical_siblings_pair_as_the_same_computation():
    """Relu(x) twice: provably equal values (same op on the same input), so either counterpart is right."""
    a, b = twin_branches()
    m = match_tensors(sem(a), sem(b), inputs=[("x", "x")])
    got = pairs_by_a(m)
    relus = [n.output[0] for n in b.graph.node if n.op_type == "Relu"]
    assert (got["left"].b, got["right"].b) == (relus[0], relus[1])
    assert "first of 2 identical computations" in got["left"].evidence
    assert got["y"].b == "y" and not m.unpaired_a


def test_siblings_structure_cannot_tell_apart_stay_unpaired_instead_of_pairing_by_position():
    """B reads x through an Identity per sibling: the same values, but not the same computation as A's,
    and nothing else separates the two Relus."""
    a, b = twin_branches()
    relus = [n for n in b.graph.node if n.op_type == "Relu"]
    for k, node in enumerate(relus):
        b.graph.node.insert(0, onnx.helper.make_node("Identity", ["x"], [f"x_copy{k}"], name=f"copy{k}"))
        node.input[0] = f"x_copy{k}"
    onnx.checker.check_model(b)
    m = match_tensors(sem(a), sem(b), inputs=[("x", "x")])
    assert {u.tensor for u in m.unpaired_a} >= {"left", "right"}
    assert all(u.reason.startswith("ambiguous: 2 equally likely") for u in m.unpaired_a if u.tensor != "y")
    assert "left" not in pairs_by_a(m)


def test_user_map_pairs_what_structure_cannot():
    a, b = twin_branches()
    left_b = [n.output[0] for n in b.graph.node if n.op_type == "Relu"][0]
    m = match_tensors(sem(a), sem(b), inputs=[("x", "x")], user_map=[("left", left_b)])
    got = pairs_by_a(m)
    assert got["left"].method == "map" and got["left"].b == left_b and got["left"].confidence == 1.0
    right_b = [n.output[0] for n in b.graph.node if n.op_type == "Relu"][1]
    assert got["right"].b == right_b  # the other sibling is no longer ambiguous


def test_unpaired_report_names_both_sides_with_reasons():
    a, b = softmax_swapped()
    m = match_tensors(sem(a), sem(b), inputs=[("x", "x")])
    assert set(pairs_by_a(m)) == {"c", "r"}
    [ua] = m.unpaired_a
    assert ua.tensor == "y" and ua.op == "Softmax" and "computed by LogSoftmax, not Softmax" in ua.reason
    [ub] = m.unpaired_b
    assert ub.tensor == "y" and ub.op == "LogSoftmax" and ub.reason == "no counterpart in the reference"


def test_map_entries_must_name_real_tensors():
    a, b = ModelGraph.from_proto(conv_relu_conv()), ModelGraph.from_proto(conv_relu_conv())
    assert parse_tensor_map([("y", "y"), ("c", "c")], a, b) == [("c", "c")]  # outputs pair elsewhere
    with pytest.raises(UsageError, match="first model has no tensor 'nope'"):
        parse_tensor_map([("nope", "c")], a, b)
    with pytest.raises(UsageError, match="second model has no tensor 'nope'"):
        parse_tensor_map([("c", "nope")], a, b)
