"""The parts of an origin's description driven directly (`describe.py`): attributes as JSON values,
where a value is looked up, the input named as the origin, and the Inf-to-NaN transition (issue 15,
mutation testing of describe.py)."""
from __future__ import annotations

from typing import List

import numpy as np
from onnx import TensorProto, helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.describe import (ValueLookup, attribute_values, describe_origin,
                                              describe_transition, input_origin)
from inspector_cli.nanbisect.model import PreparedModel
from inspector_cli.results.nan_bisect import Hint, Origin, TensorStats, Transition

from ..fixtures.helpers import init, make_model, save, vi


def test_attributes_as_json_values():
    body = helper.make_graph([helper.make_node("Identity", ["a"], ["b"]), helper.make_node("Identity", ["b"], ["c"])],
                             "g", [], [])
    node = helper.make_node(
        "Custom", ["x"], ["y"], g=body, gs=[body, body, body], t=helper.make_tensor("t", TensorProto.FLOAT, [2, 3], [0] * 6),
        s=b"caf\xc3\xa9", ss=[b"a", b"\xff"], i=3, f=0.5, ints=[1, 2])
    assert attribute_values(node) == {
        "g": "<graph: 2 nodes>", "gs": "<3 graphs>", "t": "<tensor [2, 3]>", "s": "café", "ss": ["a", "\ufffd"],
        "i": 3, "f": 0.5, "ints": [1, 2]}


def lookup_model(tmp_path) -> PreparedModel:
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"), helper.make_node("Log", ["a"], ["y"], name="log")]
    model = make_model(nodes, [vi("x", [1, 2])], [vi("y", [1, 2])], [init("w", np.array([[1.0, -3.0]], np.float32))])
    return PreparedModel(load_model(save(model, tmp_path / "m.onnx")), RuntimeConfig())


def test_values_come_from_feeds_captures_weights_then_a_fetch(tmp_path):
    prepared = lookup_model(tmp_path)
    x = np.array([[1.0, 2.0]], np.float32)
    fetched: List[List[str]] = []

    def fetch(names):
        fetched.append(list(names))
        return {n: np.array([[2.0, -1.0]], np.float32) for n in names}

    lookup = ValueLookup(prepared, {"x": x}, values={"y": np.zeros((1, 2), np.float32)}, fetch=fetch)
    assert [lookup.source(n) for n in ("x", "w", "a")] == ["input", "initializer", "computed"]
    assert lookup.value("x") is x and lookup.value("y").tolist() == [[0.0, 0.0]]
    assert lookup.value("w").tolist() == [[1.0, -3.0]] and fetched == []
    assert lookup.value("a").tolist() == [[2.0, -1.0]] and fetched == [["a"]]
    assert lookup.value("a").tolist() == [[2.0, -1.0]] and fetched == [["a"]]  # kept: fetched once
    assert lookup.stats("a") == TensorStats("a", "float32", [1, 2], 2, negatives=1, min=-1.0, max=2.0)
    assert lookup.stats("w") == TensorStats("w", "float32", [1, 2], 2, negatives=1, min=-3.0, max=1.0,
                                            source="initializer")
    known = TensorStats("a", "float32", [1, 2], 2, nan=2)
    assert ValueLookup(prepared, {}, stats={"a": known}).stats("a") is known
    nothing = ValueLookup(prepared, {})
    assert nothing.value("a") is None and nothing.stats("a") == TensorStats("a", "NoneType", [], 0)


def test_describe_origin_and_transition(tmp_path):
    prepared = lookup_model(tmp_path)
    x = np.array([[1.0, 2.0]], np.float32)
    a = x + np.array([[1.0, -3.0]], np.float32)  # [2, -1]: Log(-1) is NaN
    lookup = ValueLookup(prepared, {"x": x}, values={"a": a, "y": np.log(np.abs(a)) * [[1, np.nan]]})
    origin = describe_origin(prepared, 1, lookup, reaches=False)
    assert (origin.node, origin.op_type, origin.position, origin.reaches_outputs, origin.nested) == (
        "log", "Log", 1, False, None)
    assert origin.inputs == [TensorStats("a", "float32", [1, 2], 2, negatives=1, min=-1.0, max=2.0)]
    assert [(s.name, s.nan) for s in origin.outputs] == [("y", 1)]
    assert origin.hints == [Hint("log-nonpositive", "Log of values <= 0: 'a' has 1 negative value(s) (NaN); min -1")]
    # a node no rule explains: the transition keeps no "unexplained" hint
    assert describe_transition(prepared, 0, lookup) == Transition(node="add", op_type="Add", hints=[])
    assert describe_transition(prepared, 1, lookup).hints == origin.hints


def test_an_input_that_holds_the_bad_values_is_the_origin():
    def origin(*inputs: TensorStats) -> Origin:
        return Origin(node="relu", op_type="Relu", position=4, outputs=[TensorStats("y", "float32", [4], 4, nan=1)],
                      inputs=list(inputs), reaches_outputs=False)

    clean = TensorStats("x", "float32", [4], 4, source="input")
    computed = TensorStats("t", "float32", [4], 4, nan=2)
    assert input_origin(origin(clean, computed), "s.npz") == origin(clean, computed)
    both = TensorStats("x", "float32", [4], 4, nan=1, inf=2, source="input")
    assert input_origin(origin(clean, both), "s.npz") == Origin(
        node="x", op_type="(input)", position=-1, outputs=[both], reaches_outputs=False,
        hints=[Hint("nonfinite-input", "input 'x' of sample s.npz already holds 1 NaN and 2 Inf value(s) "
                                       "(first read by relu (Relu)): the model did not create them")])
    inf_only = TensorStats("x", "float32", [4], 4, inf=3, source="input")
    assert input_origin(origin(inf_only), "s").hints[0].message.startswith("input 'x' of sample s already holds 3 Inf value(s) ")
    nan_only = TensorStats("x", "float32", [4], 4, nan=1, source="input")
    assert input_origin(origin(nan_only), "s").hints[0].message.startswith("input 'x' of sample s already holds 1 NaN value(s) ")


def test_a_transition_reads_the_values_and_outputs_of_its_node(tmp_path):
    """Sub(a, b): Inf - Inf only when both Inf have the same sign (the values say which); an Inf
    out of finite inputs is an overflow (the output's statistics say so)."""
    nodes = [helper.make_node("Neg", ["x"], ["a"], name="neg"), helper.make_node("Abs", ["x"], ["b"], name="abs"),
             helper.make_node("Sub", ["a", "b"], ["y"], name="sub")]
    prepared = PreparedModel(load_model(save(make_model(nodes, [vi("x", [1, 2])], [vi("y", [1, 2])]), tmp_path / "s.onnx")),
                             RuntimeConfig())
    position = prepared.topo.position["y"]

    def transition(a, b, y) -> Transition:
        values = {"a": np.array([a], np.float32), "b": np.array([b], np.float32), "y": np.array([y], np.float32)}
        return describe_transition(prepared, position, ValueLookup(prepared, {}, values=values))

    assert transition([np.inf, 1], [np.inf, 1], [np.nan, 0]).hints == [
        Hint("inf-minus-inf", "Inf - Inf: both 'a' and 'b' hold Inf")]
    assert transition([np.inf, 1], [-np.inf, 1], [np.inf, 0]).hints == []  # inf - (-inf) = inf: no NaN made here
    assert transition([3e38, 1], [-3e38, 1], [np.inf, 0]).hints == [
        Hint("overflow", "float32 overflow: the result exceeds 3.40282e+38 (inputs reach |x| = 3e+38)")]
