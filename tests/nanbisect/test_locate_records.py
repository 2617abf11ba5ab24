"""What `Locator.analyse` records for one sample (bad inputs, strategy, sample name) and how it
plans and reuses its sessions: the root plan at its exact budget boundary, one plan per input shape,
the load check's session adopted, a single-sample run freeing its root session (scripts/mutation.sh
nanbisect: each of these could be broken with every origin still right)."""
from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.errors import InferenceError
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel

from ..fixtures import nan_models as nm
from ..fixtures.helpers import make_model, vi

GOOD = {"x": np.ones((1, 8), np.float32)}
# the chain: 12 Adds, Log, 15 Muls and the Identity 'out' compute 29 tensors of [1, 8] float32 (32 bytes),
# each held twice while exposed: 29 * 32 * 2
CHAIN_ALL_BYTES = 1856


def _prepared(folder: Path, model=None) -> PreparedModel:  # type: ignore[no-untyped-def]
    path, _ = nm.write(folder, model if model is not None else nm.chain(), [GOOD])
    return PreparedModel(load_model(path), RuntimeConfig())


def _count_opens(prepared: PreparedModel) -> List[tuple]:
    """Spy on the whole-model sessions the locator opens (their exposed tensors, in order)."""
    opened: List[tuple] = []
    real = prepared.open_full

    def spy(exposed, label="scan"):  # type: ignore[no-untyped-def]
        opened.append(tuple(exposed))
        return real(exposed, label)

    prepared.open_full = spy  # type: ignore[method-assign]
    return opened


def test_a_masked_bad_input_is_recorded_on_a_clean_sample(tmp_path: Path) -> None:
    # Log(NaN) and Log(-1) are NaN, both replaced by 0 by Where(IsNaN): the output is clean
    prepared = _prepared(tmp_path, nm.masked())
    x = nm.row(np.nan, -1.0, 2.0, 3.0)
    for expose_all, strategy in ((True, "expose-all"), (False, "layered")):
        record = Locator(prepared, budget=1 << 20, checkpoints=4, expose_all_root=expose_all).analyse("s7", {"x": x})
        assert (record.sample, record.status, record.strategy, record.runs) == ("s7", "clean", strategy, 1)
        assert record.inputs_nonfinite == {"x": {"nan": 1, "inf": 0}} and record.outputs == {}


def test_a_bad_input_that_reaches_the_output_is_the_origin_named_with_the_sample(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    x = np.ones((1, 8), np.float32)
    x[0, 3] = np.inf  # Inf + 0.01 ... Log(Inf) = Inf ... * 1.01: one Inf in y
    record = Locator(prepared, budget=1 << 20, checkpoints=4, expose_all_root=True).analyse("s3", {"x": x})
    assert record.status == "nonfinite" and record.outputs == {"y": {"nan": 0, "inf": 1}}
    assert record.inputs_nonfinite == {"x": {"nan": 0, "inf": 1}}
    assert (record.origin.node, record.origin.op_type, record.origin.position) == ("x", "(input)", -1)
    assert record.origin.hints[0].message == (
        "input 'x' of sample s3 already holds 1 Inf value(s) (first read by add0 (Add)): the model did not create them")


def test_the_root_run_exposes_every_tensor_exactly_when_they_fit_the_budget(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    fits = Locator(prepared, budget=CHAIN_ALL_BYTES, checkpoints=2, expose_all_root=True).root_plan(GOOD)
    assert (fits.strategy, fits.plan, fits.all_bytes) == ("expose-all", None, CHAIN_ALL_BYTES)
    assert fits.exposed == tuple(prepared.topo.position) and len(fits.exposed) == 29
    short = Locator(prepared, budget=CHAIN_ALL_BYTES - 1, checkpoints=2, expose_all_root=True).root_plan(GOOD)
    assert (short.strategy, short.all_bytes) == ("layered", CHAIN_ALL_BYTES)
    # two single-tensor checkpoints (after positions 9 and 18: a9 and m5), within half the budget
    assert short.plan.cuts == (9, 18) and short.exposed == ("a9", "m5") and short.plan.bytes == 128
    # several samples: never expose-all, whatever the budget
    many = Locator(prepared, budget=1 << 30, checkpoints=2, expose_all_root=False).root_plan(GOOD)
    assert (many.strategy, many.all_bytes, many.exposed) == ("layered", CHAIN_ALL_BYTES, ("a9", "m5"))


def test_each_input_shape_gets_its_own_root_plan(tmp_path: Path) -> None:
    # y = Relu(Log(x - 0.5)) with a dynamic batch: 3 tensors of N x 4 float32, x2 exposed: 96 N bytes
    model = make_model([nm.node("Sub", ["x", "half"], "s", "sub"), nm.node("Log", ["s"], "l", "log"),
                        nm.node("Relu", ["l"], "y", "relu")],
                       [vi("x", ["N", 4])], [vi("y", ["N", 4])],
                       [nm.init("half", np.array(0.5, np.float32))])
    prepared = _prepared(tmp_path, model)
    locator = Locator(prepared, budget=96 * 4, checkpoints=2, expose_all_root=True)
    small = {"x": np.full((4, 4), 0.25, np.float32)}   # 384 bytes: fits
    large = {"x": np.full((5, 4), 0.25, np.float32)}   # 480 bytes: does not
    assert locator.root_plan(small).strategy == "expose-all" and locator.root_plan(small).all_bytes == 384
    assert locator.root_plan(large).strategy == "layered" and locator.root_plan(large).all_bytes == 480
    first, second = locator.analyse("s0", small), locator.analyse("s1", large)
    assert (first.strategy, second.strategy) == ("expose-all", "layered")
    assert [r.origin.node for r in (first, second)] == ["log", "log"]
    assert second.outputs == {"y": {"nan": 20, "inf": 0}}


def test_the_load_checks_root_session_is_adopted_not_opened_again(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    exposed = Locator(prepared, budget=1 << 20, checkpoints=2, expose_all_root=False).root_plan(GOOD).exposed
    prepared.preopened[("root", exposed)] = prepared.open_full(exposed)  # as the workflow's load check does
    opened = _count_opens(prepared)
    locator = Locator(prepared, budget=1 << 20, checkpoints=2, expose_all_root=False)
    locator.adopt_sessions()
    assert prepared.preopened == {}
    assert locator.analyse("s0", GOOD).status == "clean" and locator.analyse("s1", GOOD).status == "clean"
    assert opened == []


def test_a_single_sample_run_frees_its_root_session_and_a_batch_keeps_it(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    opened = _count_opens(prepared)
    single = Locator(prepared, budget=1 << 20, checkpoints=2, expose_all_root=True)
    single.analyse("s0", GOOD)
    single.analyse("s1", GOOD)
    assert len(opened) == 2  # dropped after each run: the next one opens it again
    batch = Locator(prepared, budget=1 << 20, checkpoints=2, expose_all_root=False)
    batch.analyse("s0", GOOD)
    batch.analyse("s1", GOOD)
    assert opened[2:] == [("a9", "m5")]  # opened once, then taken from the cache


def test_an_inference_failure_names_the_sample(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    locator = Locator(prepared, budget=1 << 20, checkpoints=2, expose_all_root=True)
    with pytest.raises(InferenceError, match=r"\(scan\): inference failed on sample s5: "):
        locator.analyse("s5", {"x": np.ones((1, 8), np.float64)})  # the model takes float32


def test_an_output_read_straight_from_a_nan_weight_has_no_origin_node(tmp_path: Path) -> None:
    # y = Relu(x) is clean; the second output is the stored weight w itself: no node made its NaN
    model = make_model([nm.node("Relu", ["x"], "y", "relu")], [vi("x", [1, 4])], [vi("y", [1, 4]), vi("w", [1, 4])],
                       [nm.init("w", nm.row(np.nan, 1.0, 1.0, 1.0))])
    prepared = _prepared(tmp_path, model)
    for expose_all in (True, False):
        locator = Locator(prepared, budget=1 << 20, checkpoints=2, expose_all_root=expose_all)
        with pytest.raises(InferenceError, match=r"^s2: the outputs hold NaN/Inf but no origin was found "):
            locator.analyse("s2", {"x": nm.row(1.0, 2.0, 3.0, 4.0)})
