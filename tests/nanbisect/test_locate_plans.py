"""The backward walk's budget arithmetic (Locator._region_plan) at its exact boundaries, and a JSONL
log with blank lines (scripts/mutation.sh nanbisect found both untested)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.batch import read_records, record_line
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel
from inspector_cli.nanbisect.regions import make_region
from inspector_cli.results.nan_bisect import SampleRecord

from ..fixtures import nan_models as nm

GOOD = {"x": np.ones((1, 8), np.float32)}


@pytest.fixture()
def locator(tmp_path: Path) -> Locator:
    path, _ = nm.write(tmp_path, nm.chain(), [GOOD])
    return Locator(PreparedModel(load_model(path), RuntimeConfig()), budget=1 << 20, checkpoints=4,
                   expose_all_root=False)


def test_region_plan_counts_exposed_outputs_twice_plus_the_captured_feeds(locator: Locator) -> None:
    sizes = locator.prepared.sizes(GOOD)
    assert sizes["a5"] == 32 and "x" not in sizes  # [1, 8] float32; graph inputs are not captured
    # a5 -> add6..add11, log, mul0..mul14: 22 nodes, 22 outputs of 32 bytes exposed (x2) + the feed a5
    region = make_region(locator.topo, ["a5"], ["m14"])
    assert len(region.positions) == 22 and region.feeds == ("a5",)
    assert locator._region_plan(region, sizes, 22 * 32 * 2 + 32) is None  # fits exactly: expose it all
    plan = locator._region_plan(region, sizes, 22 * 32 * 2 + 31)
    assert plan is not None
    # 22 nodes allow 22 // 8 = 2 checkpoints; each frontier is one tensor: 2 * 32 * 2 + 32 = 160
    # bytes, within half the budget
    assert len(plan.cuts) == 2 and len(plan.exposed) == 2 and plan.bytes == 160


def test_region_plan_of_a_span_fed_by_the_graph_input(locator: Locator) -> None:
    sizes = locator.prepared.sizes(GOOD)
    region = make_region(locator.topo, ["x"], ["a3"])  # add0..add3; x costs nothing to feed
    assert region.positions == (0, 1, 2, 3) and region.feeds == ("x",)
    assert locator._region_plan(region, sizes, 4 * 32 * 2) is None
    tiny = make_region(locator.topo, ["a0"], ["a2"])  # two nodes: never split, whatever the budget
    assert locator._region_plan(tiny, sizes, 0) is None


def test_read_records_skips_blank_lines_and_reads_on(tmp_path: Path) -> None:
    lines = [record_line(SampleRecord(sample=f"s{i}", status="clean", strategy="expose-all", runs=1)) for i in range(2)]
    log = tmp_path / "log.jsonl"
    text = lines[0] + "\n\n  \n" + lines[1] + "\n"
    log.write_text(text)
    records, good = read_records(log)
    assert [r.sample for r in records] == ["s0", "s1"] and good == len(text.encode())


def test_region_plan_gives_the_checkpoints_half_the_budget(locator: Locator) -> None:
    sizes = locator.prepared.sizes(GOOD)
    region = make_region(locator.topo, ["a5"], ["m14"])
    # half of 400 holds two one-tensor checkpoints plus the feed (160 bytes); a third would not
    plan = locator._region_plan(region, sizes, 400)
    assert plan is not None and len(plan.cuts) == 2 and plan.bytes == 160


def test_fits_counts_the_segments_outputs_twice_and_each_feed_once() -> None:
    born = [1, 2, 4, 8, 16]
    sizes = {"f": 100, "g": 1000, "h": 10000}
    # after local index 0 up to 2: outputs born at 1 and 2 (2 + 4 bytes, exposed: x2); feeds f, g, h
    # (g on both lists counts once; the graph input x has no size and costs nothing)
    args = (born, 0, 2, ["f", "g", "x"], ["g", "h"], sizes)
    assert Locator._fits(*args, 12 + 11100)
    assert not Locator._fits(*args, 12 + 11100 - 1)
    assert Locator._fits(born, -1, 4, [], [], {}, 62) and not Locator._fits(born, -1, 4, [], [], {}, 61)


def test_session_cache_keeps_the_most_recent_and_drops_on_request() -> None:
    from inspector_cli.nanbisect.locate import SessionCache

    made = []

    def factory(name):
        def make():
            made.append(name)
            return name
        return make

    cache = SessionCache(size=2)
    assert cache.get("a", factory("a")) == "a" and cache.get("b", factory("b")) == "b"
    assert cache.get("a", factory("a2")) == "a" and made == ["a", "b"]  # cached; 'a' is now the newest
    assert cache.get("c", factory("c")) == "c" and made == ["a", "b", "c"]  # evicts 'b', the oldest
    assert cache.get("a", factory("a3")) == "a" and made == ["a", "b", "c"]
    assert cache.get("b", factory("b2")) == "b2"  # 'b' was evicted
    cache.drop("b")
    cache.drop("missing")  # nothing to drop: no error
    assert cache.get("b", factory("b3")) == "b3" and made == ["a", "b", "c", "b2", "b3"]
