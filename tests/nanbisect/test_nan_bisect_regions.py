"""Frontiers, checkpoint placement, and following bad values back past masked ones."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.nanbisect.config import NanBisectConfig
from inspector_cli.core.graph import ModelGraph
from inspector_cli.workflows.nan_bisect import nan_bisect
from inspector_cli.nanbisect.analyse import find_origins
from inspector_cli.nanbisect.regions import Topology, layout, plan_checkpoints, root_region

from ..fixtures import nan_models as nm


def test_frontiers_of_two_branches():
    topo = Topology(ModelGraph.from_proto(nm.branches()))
    lay = layout(topo, root_region(topo))
    names = [n.name for n in topo.nodes]
    after_sqrt = names.index("sqrt_a")
    # branch A's value stays alive until 'merge' while branch B runs: both are in the frontier
    assert lay.frontier(names.index("mul_b3")) == ["a3", "b3"]
    assert lay.frontier(after_sqrt) == ["a1"]  # x is a graph input, not captured
    assert lay.frontier(names.index("merge")) == ["m"]


def test_checkpoints_prefer_single_tensor_cuts_and_fit_the_budget():
    topo = Topology(ModelGraph.from_proto(nm.branches()))
    lay = layout(topo, root_region(topo))
    sizes = {t: 32 for t in topo.position}
    plan = plan_checkpoints(lay, sizes, wanted=2, budget=10_000)
    # ideal cuts after nodes 4 and 10 (of 16); near 4 the single-tensor cut after branch A wins,
    # near 10 every cut holds both branches and the closest is taken
    assert plan.frontiers == (("a3",), ("a3", "b6"))
    assert plan.exposed == ("a3", "b6") and plan.bytes == 2 * 32 * 2
    tight = plan_checkpoints(lay, sizes, wanted=8, budget=100)  # 8, 4, 2 cuts do not fit: 1 does
    assert tight.frontiers == (("a3",),) and tight.bytes == 64


def test_constant_tensors_are_not_frontier_tensors():
    """A weight shared through an Identity node is recomputed by a replay, never captured."""
    from onnx import helper

    from ..fixtures.helpers import init, make_model, vi

    nodes = [helper.make_node("Identity", ["w"], ["w2"], name="share"),
             helper.make_node("Mul", ["x", "w2"], ["a"], name="m1"),
             helper.make_node("Mul", ["a", "w2"], ["y"], name="m2")]
    topo = Topology(ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                                                     [init("w", np.ones((1, 4), np.float32))])))
    assert topo.constant == {"w2"}
    assert layout(topo, root_region(topo)).frontier(1) == ["a"]


def test_origins_split_into_reaching_and_masked():
    topo = Topology(ModelGraph.from_proto(nm.masked(with_real=True)))
    bad = {"l", "nx_unused", "sq", "s", "y"}
    scan = find_origins(topo, range(len(topo.nodes)), bad, ["y"])
    names = [topo.nodes[p].name for p in scan.origins]
    assert names == ["log", "sqrt"]
    assert [topo.nodes[p].name for p in scan.reaching] == ["sqrt"]
    assert [topo.nodes[p].name for p in scan.masked] == ["log"]


@pytest.mark.parametrize("budget,k", [(None, 16), (200, 3), (400, 2)])
def test_inf_masked_by_softmax_is_not_the_origin(tmp_path, budget, k):
    path, data = nm.write(tmp_path, nm.softmax_mask_then_log(), [{"x": nm.row(0.5, 1, 2, 3)}])
    result = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), max_memory=budget, checkpoints=k))
    record = result.records[0]
    assert record.origin.node == "log" and record.origin.hints[0].rule == "log-nonpositive"
    # the -Inf of 'mask' is an attention mask's (core/masks.py): no NaN/Inf weight, no masked origin
    assert result.static == [] and [f.rule for f in result.findings][0] == "MI907"
    deep = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), deep=True))
    assert deep.records[0].masked == [] and deep.records[0].origin.node == "log"
