"""Focused tests of nan-bisect's two engines: the bounded layered search (nanbisect/locate.py) and
the expose-everything scan (nanbisect/fullscan.py), driven directly, without the workflow."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.fullscan import FullScanner
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel

from ..fixtures import nan_models as nm

BAD = {"x": np.full((1, 8), -1.0, np.float32)}  # -1 + 12 * 0.01 < 0: Log gives NaN at node 'log'
GOOD = {"x": np.ones((1, 8), np.float32)}


@pytest.fixture()
def prepared(tmp_path):
    path, _ = nm.write(tmp_path, nm.chain(), [GOOD])
    return PreparedModel(load_model(path), RuntimeConfig())


def test_locator_finds_the_origin_under_a_budget_too_small_to_expose_everything(prepared):
    locator = Locator(prepared, budget=4 * 8 * 4, checkpoints=4, expose_all_root=False)
    record = locator.analyse("s0", BAD)
    assert record.status == "nonfinite" and record.outputs == {"y": {"nan": 8, "inf": 0}}
    assert (record.origin.node, record.origin.op_type, record.origin.position) == ("log", "Log", 12)
    assert record.origin.inputs[0].negatives == 8 and record.origin.outputs[0].nan == 8
    assert record.strategy == "layered" and record.runs == 5  # a layered scan, then the walk back over segments


def test_locator_passes_a_clean_sample_in_one_run(prepared):
    record = Locator(prepared, budget=1 << 20, checkpoints=4, expose_all_root=False).analyse("s1", GOOD)
    assert record.status == "clean" and record.origin is None and record.outputs == {} and record.runs == 1


def test_full_scan_gives_the_same_origin_and_fp16_range_events(prepared):
    scanner = FullScanner(prepared, budget=1 << 20, all_origins=True, deep=True, fp16=False)
    record = scanner.analyse("s0", BAD)
    assert record.status == "nonfinite"
    assert [o.node for o in record.origins] == ["log"] and record.origin.node == "log"
    assert record.masked == [] and record.fp16 == []
