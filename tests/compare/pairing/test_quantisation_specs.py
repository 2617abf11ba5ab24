"""Which tensors hold quantised integers and with which scale, zero point and axis
(compare/pairing/semantic.py `SemanticGraph._quantisation`): a QuantizeLinear's output, a
DequantizeLinear's input, an omitted zero point, a per-axis quantisation, the integers a QOperator op
reads with its own parameters, and a Split's outputs (scripts/mutation.sh pairing survivors)."""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.quantparams import QuantSpec

from ...fixtures.helpers import init, make_model, vi

PARAMS = [init("sc", np.array(0.1, np.float32)), init("zp", np.array(0, np.uint8)),
          init("sc2", np.array(0.2, np.float32)), init("zp2", np.array(3, np.uint8)),
          init("chs", np.array([0.1, 0.2], np.float32)), init("sizes", np.array([2, 2], np.int64))]


def sem(nodes: List[onnx.NodeProto], inputs: List[onnx.ValueInfoProto], outputs: List[onnx.ValueInfoProto]) -> SemanticGraph:
    model = make_model(nodes, inputs, outputs, PARAMS)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return SemanticGraph.build(ModelGraph.from_proto(model))


U8 = TensorProto.UINT8


def test_a_quantize_without_zero_point_and_its_dequantize() -> None:
    g = sem([helper.make_node("QuantizeLinear", ["x", "sc"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "sc"], ["d"], name="dq")],
            [vi("x", [2, 2])], [vi("d", [2, 2])])
    assert g.quant_of == {"q": QuantSpec("sc", None, 1)}


def test_a_quantisation_per_axis_keeps_its_axis() -> None:
    g = sem([helper.make_node("QuantizeLinear", ["x", "chs", "zp"], ["q"], name="q", axis=0)],
            [vi("x", [2, 2])], [vi("q", [2, 2], U8)])
    assert g.quant_of == {"q": QuantSpec("chs", "zp", 0)}  # the output of Q, not its float input


def test_a_dequantize_of_a_graph_input_quantises_that_input() -> None:
    g = sem([helper.make_node("DequantizeLinear", ["n", "sc", "zp"], ["d"], name="dq")],
            [vi("n", [2], U8)], [vi("d", [2])])
    assert g.quant_of == {"n": QuantSpec("sc", "zp", 1)}


def qsigmoid(x: str, scale: str, zero: str) -> onnx.NodeProto:
    return helper.make_node("QLinearSigmoid", [x, scale, zero, "sc", "zp"], ["y"], name="qsig", domain="com.microsoft")


def test_a_qoperator_op_quantises_the_integers_it_reads_with_its_own_parameters() -> None:
    g = sem([qsigmoid("n", "sc2", "zp2")], [vi("n", [2], U8)], [vi("y", [2], U8)])
    assert g.quant_of == {"y": QuantSpec("sc", "zp", 1), "n": QuantSpec("sc2", "zp2", 1)}
    # an omitted zero point
    g = sem([qsigmoid("n", "sc2", "")], [vi("n", [2], U8)], [vi("y", [2], U8)])
    assert g.quant_of["n"] == QuantSpec("sc2", None, 1)


def test_integers_a_quantize_made_keep_its_parameters() -> None:
    g = sem([helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], name="q"), qsigmoid("q", "sc2", "zp2")],
            [vi("x", [2])], [vi("y", [2], U8)])
    assert g.quant_of["q"] == QuantSpec("sc", "zp", 1)


def test_a_split_of_quantised_integers_is_quantised_alike_and_its_outputs_are_its_chain() -> None:
    g = sem([helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], name="q"),
             helper.make_node("Split", ["q", "sizes"], ["s0", "s1"], name="split", axis=0)],
            [vi("x", [4])], [vi("s0", [2], U8), vi("s1", [2], U8)])
    assert g.quant_of["s0"] == g.quant_of["s1"] == QuantSpec("sc", "zp", 1)
    assert g.chain_of["s1"] is g.chain_of["s0"]


def test_a_maxpool_of_integers_quantises_its_values_not_its_indices() -> None:
    g = sem([helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], name="q"),
             helper.make_node("MaxPool", ["q"], ["p", "idx"], name="pool", kernel_shape=[2])],
            [vi("x", [1, 1, 4])], [vi("p", [1, 1, 3], U8), vi("idx", [1, 1, 3], TensorProto.INT64)])
    assert g.quant_of["p"] == QuantSpec("sc", "zp", 1)
    assert "idx" not in g.quant_of


def test_a_qoperator_output_without_its_zero_point_input() -> None:
    node = helper.make_node("QLinearSigmoid", ["n", "sc", "zp", "sc2"], ["y"], name="qsig", domain="com.microsoft")
    g = sem([node], [vi("n", [2], U8)], [vi("y", [2], U8)])
    assert g.quant_of["y"] == QuantSpec("sc2", None, 1)
