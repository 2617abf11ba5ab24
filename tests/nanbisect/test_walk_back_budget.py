"""The backward walk merges segments only while the merged span, exposed whole, fits the child
budget: every output of a node counts, not only its last (a Split's two halves), so that a replay
never exceeds the memory budget (scripts/mutation.sh nanbisect: `born_bytes[...] = ` for `+=`)."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import onnx
import pytest
from onnx import helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel

from ..fixtures import nan_models as nm
from ..fixtures.helpers import init, make_model, vi
from .replays import replays

node = nm.node
BAD = {"x": np.full((1, 8), -1.0, np.float32)}  # -1 + 10 * 0.01 < 0: Log gives NaN at position 12


def split_chain() -> onnx.ModelProto:
    """pos 0-3 Adds, pos 4 'split' of a3 into two [1, 4] halves (16 bytes each), pos 5 Concat,
    pos 6-11 Adds, pos 12 'log', pos 13-27 Muls, pos 28 Identity: every other tensor is [1, 8] (32 bytes)."""
    nodes, t = [], "x"
    t = nm.extend_chain(nodes, t, "Add", "c", "a", "add", range(4))
    nodes.append(helper.make_node("Split", [t, "halves"], ["sa", "sb"], name="split", axis=1))
    nodes.append(helper.make_node("Concat", ["sa", "sb"], ["j"], name="concat", axis=1))
    t = "j"
    t = nm.extend_chain(nodes, t, "Add", "c", "a", "add", range(4, 10))
    nodes.append(node("Log", [t], "lg", "log"))
    t = "lg"
    t = nm.extend_chain(nodes, t, "Mul", "k", "m", "mul", range(15))
    nodes.append(node("Identity", [t], "y", "out"))
    return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])],
                      [init("c", np.array(0.01, np.float32)), init("k", np.array(1.01, np.float32)),
                       init("halves", np.array([4, 4], np.int64))], opset=18)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedModel:
    path, _ = nm.write(tmp_path_factory.mktemp("split"), split_chain(), [BAD])
    return PreparedModel(load_model(path), RuntimeConfig())


def _spans(prepared: PreparedModel, budget: int) -> Tuple[List[Tuple[int, int]], object]:
    locator = Locator(prepared, budget=budget, checkpoints=2, expose_all_root=False)
    with replays(prepared) as spans:
        record = locator.analyse("s0", BAD)
    assert locator.root_plan(BAD).plan.cuts == (9, 18) and locator.root_plan(BAD).plan.bytes == 128
    assert (record.origin.node, record.origin.position, record.runs) == ("log", 12, 2)
    return spans, record


@pytest.mark.parametrize("budget, spans", [
    # positions 0..18 compute 18 tensors of 32 bytes and the two 16-byte halves: 608 bytes, exposed
    # twice 1216, within the child budget (budget - 128 / 2) from a budget of 1280
    (1280, [(0, 18)]),
    (1279, [(10, 18)]),  # one byte short: the segment 10..18 alone (9 x 32 x 2 + the feed a9)
])
def test_every_output_of_a_node_counts_when_segments_are_merged(prepared: PreparedModel, budget: int,
                                                               spans: List[Tuple[int, int]]) -> None:
    assert _spans(prepared, budget)[0] == spans
