"""The backward walk (Locator._walk_back) on the 29-node chain x -> 12 Adds -> Log (NaN at position
12) -> 15 Muls -> y, tensors of 32 bytes (exposed: counted twice): which spans it replays, worked
out by hand from the root plan's checkpoints (scripts/mutation.sh nanbisect: the walk's budget
arithmetic changed the cost unnoticed; every origin stayed right).

With 2 checkpoints the root plan cuts after positions 9 and 18 (frontiers a9 and m5, 2 x 32 x 2 =
128 bytes); with 4, after 6, 13 and 21 (192 bytes). The child budget is the budget minus the
checkpoints' bytes counted once: budget - 64, or budget - 96.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel

from ..fixtures import nan_models as nm
from .replays import replays

BAD = {"x": np.full((1, 8), -1.0, np.float32)}  # -1 + 12 * 0.01 < 0: Log gives NaN at position 12


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedModel:
    path, _ = nm.write(tmp_path_factory.mktemp("walk"), nm.chain(), [BAD])
    return PreparedModel(load_model(path), RuntimeConfig())


def walk(prepared: PreparedModel, budget: int, checkpoints: int) -> Tuple[Locator, List[Tuple[int, int]], object]:
    """Analyse the bad sample; the spans replayed, as (first, last) positions."""
    locator = Locator(prepared, budget=budget, checkpoints=checkpoints, expose_all_root=False)
    with replays(prepared) as replayed:
        record = locator.analyse("s0", BAD)
    assert record.origin.node == "log" and record.origin.position == 12  # whatever the budget
    return locator, replayed, record


def test_the_segments_after_the_origin_cost_nothing_and_the_rest_is_merged_when_it_fits(prepared) -> None:
    # 2048 with 4 checkpoints: the bad m8 (after 21) and m0 (after 13) surely reach y through Muls:
    # no replay; a6 (after 6) is clean, so the segment 7..13 holds the origin. Merged back to the
    # start: 14 outputs x 32 x 2 = 896 bytes fit the child budget 2048 - 96: one replay of 0..13.
    locator, replayed, record = walk(prepared, 2048, 4)
    assert locator.root_plan(BAD).plan.cuts == (6, 13, 21)
    assert replayed == [(0, 13)] and record.runs == 2


@pytest.mark.parametrize("budget, replayed", [
    (1280, [(0, 18)]),   # positions 0..18: 19 x 32 x 2 = 1216 bytes fit 1280 - 64 exactly
    (1279, [(10, 18)]),  # one byte short: only the segment 10..18 (9 x 32 x 2 + the feed a9 = 608)
])
def test_a_segment_is_merged_with_the_one_before_only_when_both_fit_the_child_budget(
        prepared, budget: int, replayed: List[Tuple[int, int]]) -> None:
    locator, spans, record = walk(prepared, budget, 2)
    assert locator.root_plan(BAD).plan.cuts == (9, 18)
    assert spans == replayed and record.runs == 2


def test_a_segment_too_big_for_the_child_budget_gets_checkpoints_of_its_own(prepared) -> None:
    # 512 with 2 checkpoints: the child budget 448 is below the 608 bytes of 10..18 exposed whole, so
    # that segment is replayed at checkpoints of its own, then only its part 10..13 holding the Log
    locator, spans, record = walk(prepared, 512, 2)
    assert spans == [(10, 18), (10, 13)] and record.runs == 3
