"""Names onnxruntime's QOperator quantizer gives: an integer output named after the float tensor it
replaces, '<name>_quantized' ('<name>quantized' for Split outputs), is that tensor's name for
pairing (compare/pairing/match.py `_Matcher.__init__`, `candidates`); a chain's tensors left out
of the report are not reported unpaired, the later ones still are; a multi-output head's extra
outputs pair by name, not as fused (scripts/mutation.sh pairing survivors)."""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.match import match_tensors
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi

PARAMS = [init("sc", np.array(0.05, np.float32)), init("zp", np.array(0, np.uint8))]


def sem(model: onnx.ModelProto) -> SemanticGraph:
    return SemanticGraph.build(ModelGraph.from_proto(model))


def reference() -> SemanticGraph:
    return sem(make_model([helper.make_node("Sigmoid", ["x"], ["prob"], name="sig")], [vi("x", [1, 4])], [vi("prob", [1, 4])]))


def qoperator(output: str, shape_named_prob: bool = False) -> SemanticGraph:
    """in -> QuantizeLinear -> QLinearSigmoid -> `output` (uint8, a graph output); with `shape_named_prob`
    also Shape(in) -> 'prob'."""
    extra = [helper.make_node("Shape", ["in"], ["prob"], name="shape")] if shape_named_prob else []
    nodes = extra + [helper.make_node("QuantizeLinear", ["in", "sc", "zp"], ["xq"], name="q"),
             helper.make_node("QLinearSigmoid", ["xq", "sc", "zp", "sc", "zp"], [output], name="qsig",
                              domain="com.microsoft")]
    outputs = [vi(output, [1, 4], TensorProto.UINT8)] + ([vi("prob", [2], TensorProto.INT64)] if shape_named_prob else [])
    model = make_model(nodes, [vi("in", [1, 4])], outputs, PARAMS)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return sem(model)


def test_an_integer_output_named_name_quantized_carries_name() -> None:
    for output in ("prob_quantized", "probquantized"):
        # (the first row is the input the candidate quantises)
        x, pair = match_tensors(reference(), qoperator(output), inputs=[("x", "in")]).pairs
        assert (x.a, x.b) == ("x", "in")
        assert (pair.b, pair.method, pair.located_by) == (output, "qdq", "name"), output
        assert pair.evidence == "name 'prob', inputs paired, same size", output


def test_a_name_quantized_is_not_taken_when_the_float_name_exists_too() -> None:
    # 'prob_quantized' stands for 'prob' only when the candidate has no tensor 'prob' of its own
    b = qoperator("prob_quantized", shape_named_prob=True)  # a tensor 'prob' elsewhere in the candidate
    _, pair = match_tensors(reference(), b, inputs=[("x", "in")]).pairs
    assert (pair.b, pair.located_by) == ("prob_quantized", "structure")


def conv_bn(x: str, p: str, with_bn: bool) -> List[onnx.NodeProto]:
    nodes = [helper.make_node("Conv", [x, "w"], [p + "c"], name=p + "conv")]
    if with_bn:
        nodes.append(helper.make_node("BatchNormalization", [p + "c", "sc", "b", "mu", "var"], [p + "bn"], name=p + "bn"))
    nodes.append(helper.make_node("Relu", [nodes[-1].output[0]], [p + "r"], name=p + "relu"))
    return nodes


def test_a_fused_tensor_left_out_of_the_report_does_not_hide_the_next_one() -> None:
    inits = [init("w", np.ones((2, 3, 1, 1), np.float32))] + [
        init(n, np.full(2, v, np.float32)) for n, v in (("sc", 1.0), ("b", 0.0), ("mu", 0.0), ("var", 1.0))]
    a = sem(make_model(conv_bn("x", "a_", True), [vi("x", [1, 3, 4, 4])], [vi("a_r", None)], inits))
    # B: a lone Conv (its Relu and BN folded away): A's Conv and BN are both fused into it
    b = sem(make_model([helper.make_node("Conv", ["in", "w"], ["b_c"], name="b_conv")], [vi("in", [1, 3, 4, 4])],
                       [vi("b_c", None)], inits[:1]))
    m = match_tensors(a, b, inputs=[("x", "in")], selected={"a_bn", "a_r"})
    assert [(p.a, p.b, p.method) for p in m.pairs] == [("a_r", "b_c", "fused")]
    assert [u.tensor for u in m.unpaired_a] == ["a_bn"]


def test_the_rest_of_a_chain_the_user_mapped_into_has_no_counterpart() -> None:
    inits = [init("w", np.ones((2, 3, 1, 1), np.float32))]
    nodes = conv_bn("x", "a_", False)
    a = sem(make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("a_r", None)], inits))
    b = sem(make_model(conv_bn("in", "b_", False), [vi("in", [1, 3, 4, 4])], [vi("b_r", None)], inits))
    m = match_tensors(a, b, inputs=[("x", "in")], user_map=[("a_c", "b_c")])
    assert [(p.a, p.method) for p in m.pairs] == [("a_c", "map")]
    assert [(u.tensor, u.reason) for u in m.unpaired_a] == [("a_r", "no counterpart found")]


def test_extra_outputs_of_a_split_pair_as_chain_ends_not_fused() -> None:
    def split(x: str, prefix: str) -> SemanticGraph:
        node = helper.make_node("Split", [x, "sizes"], [prefix + "0", prefix + "1"], name=prefix, axis=1)
        model = make_model([node], [vi(x, [1, 3])], [vi(prefix + "0", None), vi(prefix + "1", None)],
                           [init("sizes", np.array([1, 2], np.int64))])
        return sem(model)

    pairs = {p.a: p for p in match_tensors(split("x", "a"), split("in", "b"), inputs=[("x", "in")]).pairs}
    assert [(t, pairs[t].b, pairs[t].method) for t in ("a0", "a1")] == [("a0", "b0", "structural"),
                                                                        ("a1", "b1", "structural")]


def test_only_names_ending_in_quantized_are_read_as_another_tensors_name() -> None:
    # 'probabilities' is quantised and 9 characters longer than 'prob': no name of 'prob' for all that
    _, pair = match_tensors(reference(), qoperator("probabilities"), inputs=[("x", "in")]).pairs
    assert (pair.b, pair.located_by) == ("probabilities", "structure")
