"""A NaN/Inf that appears only after N steps: an fp16 accumulator that overflows.

The expected step comes from numpy's float16 arithmetic; the hand-off sample is then given to the
existing `mi nan-bisect`, which must name the node.
"""
from __future__ import annotations

import json
from typing import Tuple

import numpy as np
import pytest

from inspector_cli.sequence import SequenceConfig, run_sequence
from tests.fixtures.helpers import invoke


def first_overflow_step() -> Tuple[int, float]:
    """(first step whose state is Inf, the state carried into it). onnxruntime adds in fp32 and
    rounds the state to fp16 once per step, as here."""
    acc = np.zeros(4, np.float16)
    for step in range(1000):
        with np.errstate(over="ignore"):
            new = (acc.astype(np.float32) + np.float32(1000.0)).astype(np.float16)
        if not np.isfinite(new).all():
            return step, float(acc[0])
        acc = new
    raise AssertionError("no overflow")


def test_one_model_scan_finds_the_first_non_finite_step(accumulators):
    fp16, _, folder = accumulators
    expected, carried = first_overflow_step()
    assert expected == 65
    result = run_sequence(fp16, None, folder / "ones16.npz", SequenceConfig(bundle_dir=folder / "bundles"))
    assert result.mode == "scan" and result.steps == expected + 1  # stopped at the bad step
    bad = result.nonfinite
    assert (bad.step, bad.model, bad.tensors, bad.in_state, bad.inputs_finite) == (expected, "A", ["acc_out"], True, True)
    assert result.exit_code == 1 and result.summary() == \
        "FAIL: 66 step(s); model A turns non-finite at step 65 (acc_out, state)"
    with np.load(bad.handoff) as sample:
        assert sorted(sample.files) == ["acc", "x"]
        assert float(sample["acc"][0, 0]) == carried  # 64608: fp16 rounding along the way
    meta = json.loads((folder / "bundles" / "step_000065_A" / "bundle.json").read_text())
    assert meta["step"] == 65 and meta["state"] == [{"input": "acc", "output": "acc_out"}]


def test_hand_off_to_nan_bisect_names_the_node(accumulators):
    fp16, _, folder = accumulators
    result = run_sequence(fp16, None, folder / "ones16.npz", SequenceConfig(bundle_dir=folder / "bundles"))
    invoke(["nan-bisect", fp16, "--inputs", result.nonfinite.handoff, "--json", folder / "nb.json"], exit_code=1)
    report = json.loads((folder / "nb.json").read_text())
    assert "first born at accumulate (Add)" in report["verdict"]["summary"]


def test_compare_mode_reports_which_model_turns_non_finite(accumulators):
    fp16, fp32, folder = accumulators
    result = run_sequence(fp32, fp16, folder / "ones32.npz", SequenceConfig(journal=folder / "j.jsonl"))
    assert result.nonfinite.step == 65 and result.nonfinite.model == "B" and result.nonfinite.handoff is None
    last = json.loads((folder / "j.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 65 and last["states"]["acc_out"]["nonfinite_mismatch"] == 4
    # Without stopping, the NaN reaches the step outputs on the next step (Inf - Inf in 'difference').
    more = run_sequence(fp32, fp16, folder / "ones32.npz", SequenceConfig(stop_on_nonfinite=False, steps=70))
    assert more.steps == 70 and more.nonfinite.step == 65


def accumulator_that_fails_after_overflow():
    """The fp16 accumulator plus a lookup indexed by the carried state: fine while the state is
    finite, an onnxruntime error (index out of bounds) at the step after it turned Inf (step 66)."""
    from onnx import TensorProto, helper

    from tests.fixtures.helpers import init, make_model, vi

    H = TensorProto.FLOAT16
    nodes = [helper.make_node("Mul", ["x", "gain"], ["inc"], name="gain"),
             helper.make_node("Add", ["acc", "inc"], ["acc_out"], name="accumulate"),
             helper.make_node("Cast", ["acc"], ["index"], name="to_index", to=TensorProto.INT64),
             helper.make_node("Gather", ["table", "index"], ["looked_up"], name="lookup")]
    return make_model(nodes, [vi("x", [1, 4], H), vi("acc", [1, 4], H)],
                      [vi("looked_up", [1, 4], H), vi("acc_out", [1, 4], H)],
                      [init("gain", np.array(1000.0, np.float16)), init("table", np.zeros(65536, np.float16))])


def test_a_run_that_fails_after_a_non_finite_step_reports_the_step(accumulators, tmp_path):
    """Steps run in blocks: the failure at step 66 comes before the block's NaN check, which must
    still name step 65 (scan and A/B alike) instead of the inference error."""
    from tests.fixtures.helpers import save

    _, _, folder = accumulators
    model = save(accumulator_that_fails_after_overflow(), tmp_path / "fails.onnx")
    scan = run_sequence(model, None, folder / "ones16.npz", SequenceConfig())
    assert (scan.steps, scan.nonfinite.step, scan.nonfinite.tensors) == (66, 65, ["acc_out"])
    both = run_sequence(model, model, folder / "ones16.npz", SequenceConfig())
    assert (both.steps, both.nonfinite.step, both.nonfinite.model) == (66, 65, "A")
    with pytest.raises(Exception, match="step 66"):  # without the NaN check, the error it replaces
        run_sequence(model, None, folder / "ones16.npz", SequenceConfig(stop_on_nonfinite=False))
