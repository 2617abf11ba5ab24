"""When a follower joins the chain of the node before it (compare/pairing/semantic.py
`_sole_consumer`): only when it is the one node that computes with that value, looking through
Identity aliases and ignoring Shape reads, but counting every other reader, an integer Cast
included (scripts/mutation.sh pairing survivors)."""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi


def chains(nodes: List[onnx.NodeProto], outputs: List[str]) -> List[str]:
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), *nodes], [vi("x", [1, 3, 4, 4])],
                       [vi(o, None) for o in outputs], [init("w", np.ones((2, 3, 1, 1), np.float32))])
    return [c.ops() for c in SemanticGraph.build(ModelGraph.from_proto(model)).chains]


def relu(x: str) -> onnx.NodeProto:
    return helper.make_node("Relu", [x], ["r"], name="relu")


def test_a_relu_behind_an_identity_joins_the_conv() -> None:
    assert chains([helper.make_node("Identity", ["c"], ["i"], name="id"), relu("i")], ["r"]) == ["Conv+Relu"]


def test_an_alias_nobody_reads_does_not_matter() -> None:
    assert chains([helper.make_node("Identity", ["c"], ["i"], name="id"), relu("c")], ["r"]) == ["Conv+Relu"]  # i: read by nothing, not an output


def test_a_shape_read_does_not_count_but_a_reader_after_it_does() -> None:
    assert chains([helper.make_node("Shape", ["c"], ["s"], name="shape"), relu("c")], ["r", "s"]) == ["Conv+Relu"]
    assert chains([helper.make_node("Shape", ["c"], ["s"], name="shape"), helper.make_node("Neg", ["c"], ["n"], name="neg"),
                   relu("c")], ["r", "s", "n"]) == ["Conv", "Neg", "Relu"]


def test_a_reader_after_an_identity_counts() -> None:
    nodes = [helper.make_node("Identity", ["c"], ["i"], name="id"), helper.make_node("Neg", ["c"], ["n"], name="neg"),
             relu("i")]
    assert chains(nodes, ["r", "n"]) == ["Conv", "Neg", "Relu"]


def test_an_integer_cast_is_a_reader() -> None:
    nodes = [helper.make_node("Cast", ["c"], ["k"], name="cast", to=TensorProto.INT32), relu("c")]
    assert chains(nodes, ["r", "k"])[0] == "Conv"
