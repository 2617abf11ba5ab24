"""The first replay's session built in the background (nanbisect/prebuild.py): which span it
predicts, that a sample needing that span takes it, and that every record is the one a locator
without it writes.

The model: x -> 12 Adds (+0.01, 'add0'..'add11', positions 0-11) -> 15 Muls (x10, 'mul0'..'mul14',
positions 12-26) -> Identity 'out' -> y, 32-byte tensors. With 4 checkpoints and a large budget the
root plan cuts after positions 6, 13 and 20 (worked out below from the recorded plan). Every op
passes a NaN/Inf on surely, so when every checkpoint is bad each segment is skipped from the end
and the walk's first replay is the first segment, positions 0-6, computing the checkpoint a6.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import SPIN_STOP, PreparedModel, scan_runtime
from inspector_cli.nanbisect.prebuild import PREBUILD_SHARE, predict, worth_it

from ..fixtures.helpers import init, make_model, save, vi
from ..fixtures.nan_models import extend_chain, node
from .replays import replays

CLEAN = {"x": np.full((1, 8), 1.0, np.float32)}
NAN_INPUT = {"x": np.array([[1, 2, np.nan, 4, 5, 6, 7, 8]], np.float32)}
OVERFLOW = {"x": np.full((1, 8), 1e30, np.float32)}  # 1e30 * 10**9 > 3.4e38: Inf born at 'mul8'
MANY = 10 ** 9  # samples expected: a build is then always worth it


def model():  # type: ignore[no-untyped-def]
    nodes, t = [], "x"
    t = extend_chain(nodes, t, "Add", "c", "a", "add", range(12))
    t = extend_chain(nodes, t, "Mul", "k", "m", "mul", range(15))
    nodes.append(node("Identity", [t], "y", "out"))
    return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])],
                      [init("c", np.array(0.01, np.float32)), init("k", np.array(10.0, np.float32))])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedModel:
    return PreparedModel(load_model(save(model(), tmp_path_factory.mktemp("prebuild") / "m.onnx")), RuntimeConfig())


def spans(prepared: PreparedModel, locator: Locator, samples: List[dict]) -> Tuple[list, List[Tuple[int, int]]]:
    """Records of `samples` analysed in turn, and the spans whose sessions were built (any thread)."""
    with replays(prepared) as built:
        records = [locator.analyse(f"s{i}", feeds) for i, feeds in enumerate(samples)]
        locator.close()
    return records, built


def test_the_prediction_is_the_first_span_when_every_checkpoint_is_bad(prepared) -> None:
    locator = Locator(prepared, budget=1 << 20, checkpoints=4, expose_all_root=False)
    assert locator.root_plan(CLEAN).plan.cuts == (6, 13, 20)
    planned = predict(locator, CLEAN)
    assert planned.region.positions == tuple(range(7)) and planned.region.targets == ("a6",)
    assert planned.exposed == tuple(f"a{i}" for i in range(7))
    assert locator.runs == 0 and not locator.dry  # nothing ran; the walk is live again


@pytest.mark.parametrize("bad, origin, position, hit", [
    (NAN_INPUT, "x", -1, True),        # NaN fed in: every checkpoint bad, the predicted span
    (OVERFLOW, "mul8", 20, False),     # Inf born in the third segment, a13 clean: another span
])
def test_a_bad_sample_takes_the_prebuilt_session_only_when_it_needs_that_span_and_records_stay_the_same(
        prepared, bad: dict, origin: str, position: int, hit: bool) -> None:
    samples = [CLEAN, CLEAN, bad, CLEAN]
    plain, plain_spans = spans(prepared, Locator(prepared, 1 << 20, 4, expose_all_root=False), samples)
    locator = Locator(prepared, 1 << 20, 4, expose_all_root=False, expected_samples=MANY)
    records, built = spans(prepared, locator, samples)
    assert records == plain  # every field: origin, its inputs' statistics, runs, strategy
    assert records[2].origin.node == origin and records[2].origin.position == position
    assert locator.prebuild.used is hit
    if hit:  # the one span the walk replays is the one built in the background
        assert plain_spans == [(0, 6)] and built == [(0, 6)]
    else:  # a13 is clean: the walk replays 0-20 (merged back to the start: it fits), built on the spot
        assert plain_spans == [(0, 20)] and sorted(built) == [(0, 6), (0, 20)]  # either may start first


def test_no_speculation_for_few_samples_or_a_costly_build(prepared) -> None:
    assert not worth_it(1, 0.0, 1.0)  # one sample: nothing to overlap with
    assert worth_it(100, PREBUILD_SHARE * 100 * 0.02, 0.02)       # exactly the share of the scan
    assert not worth_it(100, PREBUILD_SHARE * 100 * 0.02 * 1.01, 0.02)
    locator = Locator(prepared, 1 << 20, 4, expose_all_root=False, expected_samples=3)
    records, built = spans(prepared, locator, [CLEAN, CLEAN, NAN_INPUT])
    assert locator.prebuild.future is None and built == [(0, 6)] and records[2].origin.node == "x"


def test_scan_sessions_stop_spinning_unless_the_user_chose() -> None:
    assert scan_runtime(RuntimeConfig()).session_config == ((SPIN_STOP, "1"),)
    chosen = RuntimeConfig(session_config=(("session.intra_op.allow_spinning", "1"),))
    assert scan_runtime(chosen) is chosen
    assert scan_runtime(RuntimeConfig(session_config=((SPIN_STOP, "0"),))).session_config == ((SPIN_STOP, "0"),)
