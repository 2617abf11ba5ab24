"""What a computation signature is made of at the top level (compare/pairing/signature.py
`Signatures.__init__`, `_node`): paired graph inputs share a token across renamed models, unpaired
ones are told apart, and the op type and domain are part of the hash; an Add of the standard domain
spelled out is still commutative (scripts/mutation.sh pairing survivors)."""
from __future__ import annotations

from typing import Dict, List

import onnx
from onnx import helper

from inspector_cli.compare.pairing.signature import Signatures
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import make_model, vi


def signed(nodes: List[onnx.NodeProto], inputs: List[str], tokens: Dict[str, str], domains: tuple = ()) -> Signatures:
    model = make_model(nodes, [vi(x, [2]) for x in inputs], [vi(nodes[-1].output[0], None)])
    for domain in domains:
        model.opset_import.append(helper.make_opsetid(domain, 1))
    return Signatures(ModelGraph.from_proto(model), tokens)


def test_paired_inputs_sign_alike_under_other_names() -> None:
    a = signed([helper.make_node("Relu", ["x"], ["y"])], ["x"], {"x": "x"})
    b = signed([helper.make_node("Relu", ["in"], ["out"])], ["in"], {"in": "x"})  # 'in' is paired with 'x'
    assert a.of["y"] == b.of["out"]


def test_unpaired_inputs_are_told_apart() -> None:
    sig = signed([helper.make_node("Relu", ["x1"], ["r1"]), helper.make_node("Relu", ["x2"], ["r2"]),
                  helper.make_node("Sub", ["r1", "r2"], ["y"])], ["x1", "x2"], {})
    assert sig.of["x1"] != sig.of["x2"] and sig.of["r1"] != sig.of["r2"]


def test_the_op_type_and_the_domain_are_signed() -> None:
    relu = signed([helper.make_node("Relu", ["x"], ["y"])], ["x"], {"x": "x"}).of["y"]
    assert signed([helper.make_node("Neg", ["x"], ["y"])], ["x"], {"x": "x"}).of["y"] != relu
    custom = signed([helper.make_node("Relu", ["x"], ["y"], domain="test.custom")], ["x"], {"x": "x"},
                    ("test.custom",)).of["y"]
    assert custom != relu


def test_an_add_of_the_spelled_out_standard_domain_is_commutative() -> None:
    def add(first: str, second: str) -> int:
        node = helper.make_node("Add", [first, second], ["y"], domain="ai.onnx")
        return signed([node], ["p", "q"], {"p": "p", "q": "q"}).of["y"]

    assert add("p", "q") == add("q", "p")
