"""Computation signatures of subgraph bodies (If/Loop) and of weights stored in a missing external
file (compare/pairing/signature.py; scripts/mutation.sh pairing found both barely tested)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector_cli.compare.pairing.signature import Signatures
from inspector_cli.core.graph import ModelGraph

from ...fixtures.helpers import init, make_model, vi


def body(op: str = "Add", operands: list[str] | None = None, const: np.ndarray | None = None,
         **attrs: object) -> onnx.GraphProto:
    """A branch computing op(x, c) (x from the outer scope), c an initializer of the body."""
    c = const if const is not None else np.array([1.0, 2.0], np.float32)
    node = helper.make_node(op, operands or ["x", "c"], ["b"], **attrs)
    return helper.make_graph([node], "branch", [], [vi("b", [2])], [init("c", c)])


def if_signature(then: onnx.GraphProto, other: onnx.GraphProto | None = None) -> Signatures:
    """y = If(flag, then, else); the else branch is `then` unless given."""
    node = helper.make_node("If", ["flag"], ["y"], name="if", then_branch=then, else_branch=other or then)
    model = make_model([node], [vi("x", [2]), vi("flag", [], TensorProto.BOOL)], [vi("y", [2])])
    return Signatures(ModelGraph.from_proto(model), {"x": "x", "flag": "flag"})


def test_branches_with_the_same_computation_give_the_same_signature() -> None:
    first, second = if_signature(body()), if_signature(body())
    assert first.of["y"] == second.of["y"]
    assert first.of["y"] not in first.inexact  # a small constant is hashed whole: exact


def test_branches_that_differ_give_different_signatures() -> None:
    reference = if_signature(body()).of["y"]
    assert if_signature(body("Mul")).of["y"] != reference  # op type
    assert if_signature(body(const=np.array([1.0, 3.0], np.float32))).of["y"] != reference  # body constant
    assert if_signature(body(), body("Sub")).of["y"] != reference  # the other branch
    softmax = if_signature(body("Softmax", ["x"], axis=0)).of["y"]
    assert if_signature(body("Softmax", ["x"], axis=-1)).of["y"] != softmax  # attribute
    assert if_signature(body("Softmax", ["x"], axis=0)).of["y"] == softmax


def test_a_commutative_op_in_a_body_is_signed_whatever_its_operand_order() -> None:
    assert if_signature(body("Add", ["c", "x"])).of["y"] == if_signature(body("Add", ["x", "c"])).of["y"]
    assert if_signature(body("Sub", ["c", "x"])).of["y"] != if_signature(body("Sub", ["x", "c"])).of["y"]


def test_a_branch_holding_a_sampled_constant_is_inexact() -> None:
    big = np.arange(2048, dtype=np.float32)  # 8 KiB: hashed by a sample, not whole
    node = helper.make_node("Gather", ["c", "i"], ["b"])
    branch = helper.make_graph([node], "branch", [], [vi("b", [2])], [init("c", big), init("i", np.array([0, 1]))])
    signatures = if_signature(branch)
    assert signatures.of["y"] in signatures.inexact


def external_model(tmp_path: Path, location: str) -> onnx.ModelProto:
    weight = init("w", np.arange(2048, dtype=np.float32))
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(2048 * 4))):
        weight.external_data.add(key=key, value=value)
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    return make_model([node], [vi("x", [2048])], [vi("y", [2048])], [weight])


def test_a_weight_whose_file_is_missing_is_signed_by_type_and_shape_only(tmp_path: Path) -> None:
    model = external_model(tmp_path, "missing.bin")
    in_folder = Signatures(ModelGraph.from_proto(model, tmp_path / "m.onnx"), {"x": "x"})
    no_folder = Signatures(ModelGraph.from_proto(model), {"x": "x"})  # a model built in memory: no folder
    assert in_folder.of["w"] == no_folder.of["w"] == hash(("external", (TensorProto.FLOAT, (2048,))))
    assert in_folder.of["y"] in in_folder.inexact and no_folder.of["w"] in no_folder.inexact


def test_a_weight_in_its_file_is_signed_by_its_content(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(np.arange(2048, dtype=np.float32).tobytes())
    (tmp_path / "v.bin").write_bytes(np.arange(2048, dtype=np.float32)[::-1].tobytes())
    w = Signatures(ModelGraph.from_proto(external_model(tmp_path, "w.bin"), tmp_path / "m.onnx"), {"x": "x"})
    v = Signatures(ModelGraph.from_proto(external_model(tmp_path, "v.bin"), tmp_path / "m.onnx"), {"x": "x"})
    assert w.of["w"] != v.of["w"] and w.of["w"] in w.inexact
    assert w.of["w"] != hash(("external", (TensorProto.FLOAT, (2048,))))


def loop_signature(first: str, second: str, names: tuple = ("i", "cond")) -> int:
    """A Loop whose body computes Sub over its two inputs (iteration number, condition) in the given order."""
    i, cond = names
    body_nodes = [helper.make_node("Cast", [i], ["fi"], to=TensorProto.FLOAT),
                  helper.make_node("Cast", [cond], ["fc"], to=TensorProto.FLOAT),
                  helper.make_node("Sub", [{"i": "fi", "cond": "fc"}[first], {"i": "fi", "cond": "fc"}[second]], ["d"]),
                  helper.make_node("Identity", [cond], ["cond_out"])]
    body = helper.make_graph(body_nodes, "body", [vi(i, [], TensorProto.INT64), vi(cond, [], TensorProto.BOOL)],
                             [vi("cond_out", [], TensorProto.BOOL), vi("d", [])])
    body_nodes[0].input[0], body_nodes[1].input[0], body_nodes[3].input[0] = i, cond, cond
    node = helper.make_node("Loop", ["n", ""], ["y"], name="loop", body=body)
    model = make_model([node], [vi("n", [], TensorProto.INT64)], [vi("y", None)])
    return Signatures(ModelGraph.from_proto(model), {"n": "n"}).of["y"]


def test_body_inputs_are_signed_by_position_not_name() -> None:
    assert loop_signature("i", "cond") == loop_signature("i", "cond", names=("iter", "keep_going"))
    assert loop_signature("i", "cond") != loop_signature("cond", "i")  # Sub(i, c) is not Sub(c, i)


def test_a_large_constant_is_sampled_at_every_byte_up_to_the_sample_size() -> None:
    # 1,100 float32 values: 4,400 bytes, over the whole-hash limit (4,096): sampled with stride 1
    base = np.arange(1100, dtype=np.float32)
    changed = base.copy()
    changed.view(np.uint8)[1] ^= 1  # the second byte differs

    def signed(value: np.ndarray) -> Signatures:
        node = helper.make_node("Add", ["x", "c"], ["y"], name="add")
        model = make_model([node], [vi("x", [1100])], [vi("y", [1100])], [init("c", value)])
        return Signatures(ModelGraph.from_proto(model), {"x": "x"})

    assert signed(base).of["c"] != signed(changed).of["c"]
    assert signed(base).of["c"] == signed(base.copy()).of["c"] and signed(base).of["c"] in signed(base).inexact


def test_a_small_weight_in_a_shared_file_is_signed_by_its_own_bytes(tmp_path: Path) -> None:
    values = np.arange(4, dtype=np.float32).tobytes()

    def signed(folder: Path, tail: bytes) -> int:
        folder.mkdir()
        (folder / "w.bin").write_bytes(values + tail)  # the weight, then other tensors' bytes
        weight = init("w", np.zeros(4, np.float32))
        weight.ClearField("raw_data")
        weight.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "w.bin"), ("offset", "0"), ("length", "16")):
            weight.external_data.add(key=key, value=value)
        model = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x", [4])], [vi("y", [4])],
                           [weight])
        return Signatures(ModelGraph.from_proto(model, folder / "m.onnx"), {"x": "x"}).of["w"]

    assert signed(tmp_path / "a", b"\x01" * 64) == signed(tmp_path / "b", b"\x02" * 64)
