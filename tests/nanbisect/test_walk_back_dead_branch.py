"""A model with nodes that feed no output (a dead branch) under a tight budget: the span replayed
from the graph inputs to the outputs has the root region's feeds and targets but fewer nodes, and
the locator's layout cache, keyed by feeds and targets only, gave it the root's layout: checkpoints
past its last node, IndexError (exit 4) instead of the origin (found by a differential run of the
layered search against expose-all on random models, issue 15)."""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel

from ..fixtures import nan_models as nm
from ..fixtures.helpers import init, make_model, vi
from .replays import replays

node = nm.node
BAD = {"x": np.full((1, 8), -1.0, np.float32)}  # Log(-1 + 0.5) = NaN


def dead_prefix() -> onnx.ModelProto:
    """pos 0-7: Neg(x), then Abs x7, read by nothing; pos 8 Add(x, 0.5), pos 9 'log', pos 10 Mul,
    pos 11 Identity -> y. Every tensor is [1, 8] float32: 32 bytes."""
    nodes = [node("Neg", ["x"], "d0", "dead0")] + [node("Abs", [f"d{i}"], f"d{i + 1}", f"dead{i + 1}") for i in range(7)]
    nodes += [node("Add", ["x", "c"], "a", "add"), node("Log", ["a"], "l", "log"), node("Mul", ["l", "c"], "m", "mul"),
              node("Identity", ["m"], "y", "out")]
    return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])], [init("c", np.array(0.5, np.float32))])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedModel:
    path, _ = nm.write(tmp_path_factory.mktemp("dead"), dead_prefix(), [BAD])
    return PreparedModel(load_model(path), RuntimeConfig())


@pytest.mark.parametrize("budget, spans", [
    # 8..11 exposed whole (4 x 32 x 2 = 256 bytes) does not fit 128: its own checkpoint after the Log
    # (l), then 8..9
    (128, [((8, 9, 10, 11), ("l",)), ((8, 9), ("a", "l"))]),
    (256, [((8, 9, 10, 11), ("a", "l", "m", "y"))]),  # fits: one replay
])
def test_the_origin_is_found_past_a_dead_branch(prepared: PreparedModel, budget: int, spans: List[tuple]) -> None:
    locator = Locator(prepared, budget=budget, checkpoints=2, expose_all_root=False)
    plan = locator.root_plan(BAD).plan
    assert plan.cuts == (7,) and plan.frontiers == ((),)  # nothing computed before the cut is read after it
    with replays(prepared, lambda region, exposed: (region.positions, tuple(exposed))) as replayed:
        record = locator.analyse("s0", BAD)
    assert (record.origin.node, record.origin.position, record.origin.outputs[0].nan) == ("log", 9, 8)
    assert replayed == spans and record.runs == len(spans) + 1
