"""A nested walk whose region is fed a bad tensor that a late segment reads directly (a skip
connection alive across the region's checkpoints): the feed is on none of the region's frontiers
(they hold only tensors the region computes), so when that segment was skipped (its bad values all
surely reach the targets) the feed was dropped, and the layered search reported a later origin than
the expose-all run (found while killing scripts/mutation.sh survivors of Locator._walk_back)."""
from __future__ import annotations

from typing import List, Optional, Tuple

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


def two_paths() -> onnx.ModelProto:
    """pos 0 'log' = Log(x): NaN for x < 0, read only at pos 29 'add' (a long skip connection);
    pos 1-10 Muls of x by 1.1 (p0..p9), pos 11 Neg, pos 12 'sqrt': NaN for x > 0; pos 13-22 Muls
    (u0..u9), pos 23 Tanh, pos 24-28 Muls (h0..h4); pos 29 'add' = l + h4; pos 30-39 Muls, pos 40 Identity."""
    nodes = [node("Log", ["x"], "l", "log")]
    t = "x"
    t = nm.extend_chain(nodes, t, "Mul", "k", "p", "pad", range(10))
    nodes += [node("Neg", [t], "n", "neg"), node("Sqrt", ["n"], "u", "sqrt")]
    t = "u"
    t = nm.extend_chain(nodes, t, "Mul", "k", "u", "mulu", range(10))
    nodes.append(node("Tanh", [t], "h", "tanh"))
    t = "h"
    t = nm.extend_chain(nodes, t, "Mul", "k", "h", "mulh", range(5))
    nodes.append(node("Add", ["l", t], "s", "add"))
    t = "s"
    t = nm.extend_chain(nodes, t, "Mul", "k", "m", "mul", range(10))
    nodes.append(node("Identity", [t], "y", "out"))
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], [init("k", np.array(1.1, np.float32))])


# element 0: Log(-1) = NaN; elements 1-3: Sqrt(-1.1 ** 10) = NaN. Both reach y; 'log' comes first.
SAMPLE = {"x": nm.row(-1.0, 1.0, 1.0, 1.0)}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedModel:
    path, _ = nm.write(tmp_path_factory.mktemp("two_paths"), two_paths(), [SAMPLE])
    return PreparedModel(load_model(path), RuntimeConfig())


def _search(prepared: PreparedModel, budget: int, expose_all: bool = False, *, locator: Optional[Locator] = None,
            exposed: Optional[dict] = None) -> Tuple[object, List[tuple]]:
    """Analyse SAMPLE; the spans replayed as (first, last position, feeds); `exposed` collects what
    each span's session exposes."""
    locator = locator or Locator(prepared, budget=budget, checkpoints=2, expose_all_root=expose_all)
    def describe(region, names):  # type: ignore[no-untyped-def]
        span = (region.positions[0], region.positions[-1], region.feeds)
        if exposed is not None:
            exposed[span] = tuple(names)
        return span

    with replays(prepared, describe) as spans:
        return locator.analyse("s0", SAMPLE), spans


def test_expose_all_finds_the_first_origin(prepared: PreparedModel) -> None:
    record, spans = _search(prepared, 1 << 20, expose_all=True)
    assert (record.strategy, record.origin.node, record.origin.position, spans) == ("expose-all", "log", 0, [])
    assert record.outputs == {"y": {"nan": 4, "inf": 0}}


@pytest.mark.parametrize("budget, spans", [
    # the root plan cuts after 13 (frontier l, u0) and 29 (s); the bad l and u0 go through Tanh: no
    # skip; 14..29 is too big for the child budget and gets checkpoints of its own (u5, h0). Its last
    # segment reads l directly and is skipped (l and h0 surely reach s): l must come back as incoming,
    # so that the walk replays 0..13 for l and u0, not 1..13 for u0 alone
    (512, [(14, 29, ("l", "u0")), (14, 24, ("u0",)), (0, 13, ())]),
    (400, [(14, 29, ("l", "u0")), (19, 24, ("u5",)), (14, 18, ("u0",)), (0, 13, ()), (0, 0, ())]),
    (1 << 20, [(0, 29, ())]),  # everything before the last checkpoint fits: one replay
])
def test_a_bad_feed_read_after_a_nested_checkpoint_is_followed_back(prepared: PreparedModel, budget: int,
                                                                    spans: List[tuple]) -> None:
    record, replayed = _search(prepared, budget)
    assert record.strategy == "layered" and replayed == spans
    assert (record.origin.node, record.origin.position, record.origin.outputs[0].nan) == ("log", 0, 1)


def test_a_span_too_big_for_the_budget_exposes_only_its_checkpoints(prepared: PreparedModel) -> None:
    exposed: dict = {}
    _search(prepared, 512, exposed=exposed)
    # 14..29 at its own checkpoints; the spans that fit expose every tensor they compute
    assert exposed[(14, 29, ("l", "u0"))] == ("u5", "h0")
    assert exposed[(14, 24, ("u0",))] == tuple(f"u{i}" for i in range(1, 10)) + ("h", "h0")
    assert exposed[(0, 13, ())] == ("l", *(f"p{i}" for i in range(10)), "n", "u", "u0")


def test_a_second_sample_failing_alike_reuses_every_session(prepared: PreparedModel) -> None:
    # 400 bytes: the root session and 5 span sessions, within the cache (2 x 2 checkpoints + 4 = 8)
    locator = Locator(prepared, budget=400, checkpoints=2, expose_all_root=False)
    first, spans = _search(prepared, 400, locator=locator)
    assert len(spans) == 5 and first.runs == 6
    second, again = _search(prepared, 400, locator=locator)
    assert again == [] and second.runs == 6 and second.origin.node == "log"
