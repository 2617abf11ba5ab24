"""The backward walk's decisions on values (Locator._walk_back / _explain_run) under budgets that
force the layered path: the NaN-birth walk reads frontiers and feeds with "holds NaN", not "holds
NaN/Inf", and a bad value captured at a checkpoint but masked later is replayed, not followed
(scripts/mutation.sh nanbisect: both could be broken with the expose-all tests still green)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel

from ..fixtures import nan_models as nm
from ..fixtures.helpers import init, make_model, vi

node = nm.node


def inf_then_nan_chain() -> onnx.ModelProto:
    """pos 0 Mul(x, 100), pos 1 'exp': Inf for x = 1; 10 Adds carry the Inf; pos 12 'sub' = a9 - a9:
    Inf - Inf = NaN; 10 Muls and the Identity 'out' carry the NaN to y."""
    nodes = [node("Mul", ["x", "k"], "s", "scale"), node("Exp", ["s"], "e", "exp")]
    t = "e"
    t = nm.extend_chain(nodes, t, "Add", "c", "a", "add", range(10))
    nodes.append(node("Sub", [t, t], "d", "sub"))
    t = "d"
    t = nm.extend_chain(nodes, t, "Mul", "c", "m", "mul", range(10))
    nodes.append(node("Identity", [t], "y", "out"))
    return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])],
                      [init("k", np.array(100.0, np.float32)), init("c", np.array(0.5, np.float32))])


def masked_across_a_checkpoint() -> onnx.ModelProto:
    """pos 0 'log' = Log(x) (NaN for x < 0), alive across pos 1-10 (Muls of x by 1.5: p0..p9), then
    masked: pos 11 IsNaN, pos 12 Where(isn, 0, l); pos 13 Neg(p9), pos 14 'sqrt' (NaN for x > 0)
    reaches the output through pos 15 Add(w, sq), 10 Muls and the Identity 'out'."""
    nodes = [node("Log", ["x"], "l", "log")]
    t = "x"
    t = nm.extend_chain(nodes, t, "Mul", "k", "p", "pad", range(10))
    nodes += [node("IsNaN", ["l"], "isn", "isnan"), node("Where", ["isn", "zero", "l"], "w", "where"),
              node("Neg", [t], "n", "neg"), node("Sqrt", ["n"], "sq", "sqrt"), node("Add", ["w", "sq"], "s", "add")]
    t = "s"
    t = nm.extend_chain(nodes, t, "Mul", "k", "m", "mul", range(10))
    nodes.append(node("Identity", [t], "y", "out"))
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                      [init("k", np.array(1.5, np.float32)), init("zero", np.array(0.0, np.float32))])


def _prepared(folder: Path, model: onnx.ModelProto, sample: dict) -> PreparedModel:
    path, _ = nm.write(folder, model, [sample])
    return PreparedModel(load_model(path), RuntimeConfig())


INF_SAMPLE = {"x": np.ones((1, 8), np.float32)}  # exp(100) overflows float32


@pytest.mark.parametrize("budget, checkpoints, cuts, runs", [
    (1 << 20, 4, (5, 11, 17), 3),  # several samples: layered whatever the budget
    (512, 2, (7, 15), 5),          # segments too big for the child budget: nested checkpoints
    (300, 4, (11,), 8),            # one checkpoint fits half of 300 bytes
])
def test_the_nan_birth_is_found_by_the_layered_walk(tmp_path: Path, budget: int, checkpoints: int,
                                                    cuts: tuple, runs: int) -> None:
    prepared = _prepared(tmp_path, inf_then_nan_chain(), INF_SAMPLE)
    locator = Locator(prepared, budget=budget, checkpoints=checkpoints, expose_all_root=False)
    assert locator.root_plan(INF_SAMPLE).plan.cuts == cuts
    record = locator.analyse("s0", INF_SAMPLE)
    assert record.outputs == {"y": {"nan": 8, "inf": 0}} and record.strategy == "layered"
    # the Inf is born at 'exp' and carried to 'sub', where Inf - Inf makes the NaN of the output: the
    # checkpoints between them hold Inf, not NaN, so the NaN walk must not follow them back to 'exp'
    assert (record.origin.node, record.origin.position) == ("exp", 1)
    assert record.origin.outputs[0].inf == 8 and record.origin.outputs[0].nan == 0
    assert record.origin.nan_birth is not None
    assert (record.origin.nan_birth.node, record.origin.nan_birth.op_type) == ("sub", "Sub")
    assert record.runs == runs


def test_the_nan_birth_of_the_expose_all_run_is_the_same(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, inf_then_nan_chain(), INF_SAMPLE)
    record = Locator(prepared, budget=1 << 20, checkpoints=4, expose_all_root=True).analyse("s0", INF_SAMPLE)
    assert (record.strategy, record.runs, record.origin.node, record.origin.nan_birth.node) == (
        "expose-all", 1, "exp", "sub")


MIXED = {"x": nm.row(-1.0, 1.0, 1.0, 1.0)}  # Log(-1) = NaN (masked); Sqrt(-1.5 ** 10) = NaN x 3 (reaches)


@pytest.mark.parametrize("budget, checkpoints, frontiers, runs", [
    (1 << 20, 2, (("l", "p7"), ("m1",)), 2),
    (1 << 20, 4, (("l", "p5"), ("s",), ("m3",)), 2),
    (300, 4, (("l", "p5"), ("s",), ("m3",)), 3),
])
def test_a_bad_value_captured_at_a_checkpoint_but_masked_later_is_not_the_origin(
        tmp_path: Path, budget: int, checkpoints: int, frontiers: tuple, runs: int) -> None:
    prepared = _prepared(tmp_path, masked_across_a_checkpoint(), MIXED)
    locator = Locator(prepared, budget=budget, checkpoints=checkpoints, expose_all_root=False)
    # the first checkpoint captures the bad 'l' (alive until IsNaN/Where), which never reaches y
    assert locator.root_plan(MIXED).plan.frontiers == frontiers
    record = locator.analyse("s0", MIXED)
    assert record.outputs == {"y": {"nan": 3, "inf": 0}}
    assert (record.origin.node, record.origin.position, record.origin.outputs[0].nan) == ("sqrt", 14, 3)
    assert record.runs == runs
