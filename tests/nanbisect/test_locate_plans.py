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
