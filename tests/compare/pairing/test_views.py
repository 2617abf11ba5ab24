"""How a graph output is read (compare/pairing/semantic.py `SemanticGraph.view`): an integer output
of a QuantizeLinear is fetched as it is and dequantised, a float output as it is (scripts/mutation.sh
pairing: no test had a quantised graph output)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.semantic import SemanticGraph, TensorView
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.quantparams import QuantSpec

from ...fixtures.helpers import init, make_model, vi


def test_a_quantised_graph_output_is_read_dequantised_and_a_float_one_as_it_is() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "sc", "zp"], ["q"], name="q")]
    model = make_model(nodes, [vi("x", [1, 4])], [vi("r", [1, 4]), vi("q", [1, 4], TensorProto.INT8)],
                       [init("sc", np.array(0.1, np.float32)), init("zp", np.array(0, np.int8))])
    sem = SemanticGraph.build(ModelGraph.from_proto(model))
    assert sem.canonical("q") == "r"  # a Q looked through: one value
    # r is itself an output, float: read as it is
    assert sem.view("r") == TensorView("r", "r", None)
    only_q = make_model(nodes, [vi("x", [1, 4])], [vi("q", [1, 4], TensorProto.INT8)],
                        [init("sc", np.array(0.1, np.float32)), init("zp", np.array(0, np.int8))])
    sem = SemanticGraph.build(ModelGraph.from_proto(only_q))
    assert sem.view("r") == TensorView("q", "q", QuantSpec("sc", "zp", 1))
