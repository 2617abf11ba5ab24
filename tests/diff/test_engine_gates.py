"""The gate parser and the per-tensor tracker, with hand-computed values (mutation testing,
scripts/mutation.sh diff, found them exercised only through whole compare runs)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.diff.engine import MAX_EXAMPLES, TensorTracker, _worse
from inspector_cli.diff.gates import GATE_FLAGS, Gate, check_gate_targets, gates_for, parse_gate, parse_gates
from inspector_cli.errors import UsageError


# ---- gates ----------------------------------------------------------------------------------------
def test_gate_flags_name_their_metric_and_direction() -> None:
    assert GATE_FLAGS == {"min-cosine": ("cosine", ">="), "max-abs": ("max_abs", "<="), "max-rel": ("max_rel", "<="),
                          "min-sqnr": ("sqnr", ">="), "min-top1": ("top1", ">="), "min-top5": ("top5", ">=")}
    for flag, (metric, op) in GATE_FLAGS.items():
        assert parse_gate(flag, "0.5").op == op and parse_gate(flag, "0.5").metric == metric


def test_parse_gate_untargeted_and_targeted() -> None:
    assert parse_gate("min-cosine", "0.99") == Gate("min-cosine", "cosine", 0.99, None)
    assert parse_gate("max-abs", " logits = 0.05 ") == Gate("max-abs", "max_abs", 0.05, "logits")
    assert parse_gate("max-abs", 0.25) == Gate("max-abs", "max_abs", 0.25, None)
    # an empty target is no target; the last '=' splits (a tensor name may hold '=')
    assert parse_gate("max-abs", "=0.5") == Gate("max-abs", "max_abs", 0.5, None)
    assert parse_gate("max-abs", "a=b=0.5") == Gate("max-abs", "max_abs", 0.5, "a=b")


def test_parse_gate_bad_number_names_the_flag_and_the_form() -> None:
    with pytest.raises(UsageError) as info:
        parse_gate("max-rel", "logits=abc")
    assert str(info.value) == "--max-rel 'logits=abc': expected a number or OUTPUT=NUMBER, e.g. --max-rel logits=0.05"
    assert info.value.exit_code == 2


@pytest.mark.parametrize("flag, value", [("min-cosine", "1.5"), ("min-cosine", "-1.01"), ("min-top1", "2"),
                                         ("min-top5", "1.0001")])
def test_parse_gate_refuses_a_fraction_outside_its_range(flag: str, value: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_gate(flag, value)
    assert str(info.value) == f"--{flag} {float(value):g}: must lie between 0 and 1"


@pytest.mark.parametrize("flag, value", [("min-cosine", "1"), ("min-cosine", "-1"), ("min-top5", "0"),
                                         ("max-abs", "5"), ("max-rel", "2"), ("min-sqnr", "40")])
def test_parse_gate_accepts_the_bounds_and_unbounded_metrics(flag: str, value: str) -> None:
    assert parse_gate(flag, value).threshold == float(value)


def test_gate_describe_and_to_dict() -> None:
    gate = parse_gate("max-abs", "logits=0.05")
    assert gate.describe() == "--max-abs logits=0.05"
    assert parse_gate("min-cosine", "0.999").describe() == "--min-cosine 0.999"
    assert gate.to_dict() == {"flag": "max-abs", "metric": "max_abs", "op": "<=", "threshold": 0.05, "target": "logits"}
    assert parse_gate("min-sqnr", "30").to_dict()["op"] == ">="


def test_gate_applies_to_exact_names_and_case_sensitive_globs() -> None:
    assert parse_gate("max-abs", "0.1").applies_to("anything")
    gate = parse_gate("max-abs", "enc.*=0.1")
    assert gate.applies_to("enc.layer1") and gate.applies_to("enc.")
    assert not gate.applies_to("dec.layer1") and not gate.applies_to("ENC.layer1")
    exact = parse_gate("max-abs", "y=0.1")
    assert exact.applies_to("y") and not exact.applies_to("y2") and not exact.applies_to("Y")


def test_parse_gates_in_flag_order_skipping_empty_values() -> None:
    gates = parse_gates({"max-abs": ["0.1"], "min-cosine": ["0.9", "y=0.8"], "min-sqnr": None, "max-rel": []})
    assert [g.describe() for g in gates] == ["--min-cosine 0.9", "--min-cosine y=0.8", "--max-abs 0.1"]
    assert parse_gates({}) == []


def test_gates_for_a_targeted_gate_replaces_the_untargeted_one_of_its_metric() -> None:
    cos_all, cos_y = parse_gate("min-cosine", "0.9"), parse_gate("min-cosine", "y=0.99")
    abs_all, abs_w = parse_gate("max-abs", "0.1"), parse_gate("max-abs", "w=0.5")
    gates = [cos_all, cos_y, abs_all, abs_w]
    assert gates_for("y", gates) == [cos_y, abs_all]
    assert gates_for("w", gates) == [cos_all, abs_w]
    assert gates_for("z", gates) == [cos_all, abs_all]
    assert gates_for("z", []) == []


def test_check_gate_targets_names_the_missing_tensor_and_the_compared_ones() -> None:
    gates = [parse_gate("min-cosine", "0.9"), parse_gate("max-abs", "y=0.1"), parse_gate("max-abs", "l*=0.2")]
    check_gate_targets(gates, ["y", "logits"])  # all found: no error
    with pytest.raises(UsageError) as info:
        check_gate_targets(gates, ["y", "w"], what="layer")
    assert info.value.message == "--max-abs l*=0.2: no compared layer is named 'l*'"
    assert info.value.hint == "layers: y, w"
    with pytest.raises(UsageError, match=r"^--max-abs y=0.1: no compared output is named 'y' \(outputs: w\)$"):
        check_gate_targets(gates, ["w"])


# ---- the tracker --------------------------------------------------------------------------------
A = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
B = np.array([[1.0, 2.0, 3.0, 5.0]], np.float32)  # one element off by 1


def test_tracker_one_sample_hand_computed() -> None:
    tracker = TensorTracker("y", "y_b", gates=[parse_gate("max-abs", "0.5")], distribution=False)
    metrics = tracker.add("s0", A, B)
    assert metrics is not None
    assert metrics["max_abs"] == 1.0 and metrics["mean_abs"] == 0.25 and metrics["rmse"] == 0.5
    assert metrics["max_rel"] == 0.25 and metrics["mean_rel"] == pytest.approx(0.0625)
    # a.b = 1 + 4 + 9 + 20 = 34; |a|^2 = 30, |b|^2 = 39
    assert metrics["cosine"] == pytest.approx(34 / math.sqrt(30 * 39))
    assert metrics["sqnr"] == pytest.approx(10 * math.log10(30 / 1))
    assert (tracker.dtype_a, tracker.dtype_b, tracker.shape_a, tracker.shape_b) == ("float32", "float32", [1, 4], [1, 4])
    assert tracker.samples == 1 and tracker.shape_mismatch_samples == 0
    tally = tracker.tallies[0]
    assert (tally.evaluated, tally.failed, tally.examples, tally.worst) == (1, 1, ["s0"], 1.0)
    assert tracker.per_sample == [{"sample": "s0", "metrics": metrics, "nonfinite_mismatch": 0, "shape_mismatch": False}]


def test_tracker_worst_mean_and_dataset_values_over_samples() -> None:
    tracker = TensorTracker("y", "y", gates=[parse_gate("min-cosine", "0.999"), parse_gate("max-abs", "0.5")],
                            distribution=False)
    tracker.add("same", A, A)
    tracker.add("off", A, B)
    tracker.add("same2", A, A.copy())
    worst, mean, total = tracker.worst_metrics(), tracker.mean_metrics(), tracker.dataset_metrics()
    cos_off = 34 / math.sqrt(30 * 39)
    assert worst["cosine"] == pytest.approx(cos_off) and worst["max_abs"] == 1.0 and worst["sqnr"] == pytest.approx(
        10 * math.log10(30))
    assert mean["cosine"] == pytest.approx((2 + cos_off) / 3) and mean["max_abs"] == pytest.approx(1 / 3)
    assert mean["mean_abs"] == pytest.approx(0.25 / 3)
    # the data set as one vector of 12 elements: one error of 1
    assert total["mean_abs"] == pytest.approx(1 / 12) and total["rmse"] == pytest.approx(math.sqrt(1 / 12))
    assert total["cosine"] == pytest.approx((30 + 34 + 30) / math.sqrt(90 * 99))
    # undefined metrics (kl, top-k without distribution) stay None in every read-out
    assert worst["kl"] is None and mean["kl"] is None and mean["top1"] is None
    cosine, max_abs = tracker.tallies
    assert (cosine.evaluated, cosine.failed, cosine.examples) == (3, 1, ["off"])
    assert cosine.worst == pytest.approx(cos_off)
    assert (max_abs.evaluated, max_abs.failed, max_abs.worst) == (3, 1, 1.0)


def test_tracker_first_sample_fixes_dtype_and_shape() -> None:
    tracker = TensorTracker("y", "y", distribution=False)
    tracker.add("s0", A, B.astype(np.float16))
    tracker.add("s1", A.astype(np.float64).reshape(4), B)
    assert (tracker.dtype_a, tracker.dtype_b, tracker.shape_a, tracker.shape_b) == ("float32", "float16", [1, 4], [1, 4])
    assert tracker.samples == 2


def test_tracker_shape_mismatch_fails_every_gate_and_is_counted() -> None:
    tracker = TensorTracker("y", "y", gates=[parse_gate("max-abs", "100")], distribution=False)
    assert tracker.add("bad", A, np.ones((1, 5), np.float32)) is None
    assert tracker.add("squeezed", A, B.reshape(4)) is not None  # [1, 4] vs [4] is compatible
    assert tracker.samples == 2 and tracker.shape_mismatch_samples == 1
    tally = tracker.tallies[0]
    assert (tally.evaluated, tally.failed, tally.examples, tally.worst) == (2, 1, ["bad"], 1.0)
    assert tracker.per_sample[0] == {"sample": "bad", "metrics": {}, "nonfinite_mismatch": 0, "shape_mismatch": True}
    assert tracker.dataset_metrics()["max_abs"] == 1.0 and tracker.total.count == 4


def test_tracker_nonfinite_mismatch_fails_a_gate_the_metric_meets() -> None:
    tracker = TensorTracker("y", "y", gates=[parse_gate("min-cosine", "0.5")], distribution=False)
    b = A.copy()
    b[0, 2] = np.nan
    metrics = tracker.add("nan", A, b)
    # the three finite positions agree, but a NaN is never agreement: cosine NaN, errors unbounded
    assert metrics is not None and math.isnan(metrics["cosine"]) and metrics["max_abs"] == math.inf
    assert metrics["sqnr"] == -math.inf
    assert tracker.total.metrics(allow_nonfinite=True)["cosine"] == 1.0  # the finite positions alone
    tally = tracker.tallies[0]
    assert (tally.evaluated, tally.failed, tally.examples) == (1, 1, ["nan"])
    assert tracker.per_sample[0]["nonfinite_mismatch"] == 1
    assert tracker.total.nonfinite() == {"nan_a": 0, "inf_a": 0, "nan_b": 1, "inf_b": 0, "mismatch": 1, "inf_same": 0,
                                         "nan_same": 0}


def test_tracker_gate_on_an_undefined_metric_is_not_evaluated() -> None:
    # top-5 of 3 classes is undefined (None): the gate neither passes nor fails that sample
    tracker = TensorTracker("p", "p", gates=[parse_gate("min-top5", "0.9"), parse_gate("min-top1", "0.9")])
    tracker.add("s0", np.array([[0.1, 0.7, 0.2]], np.float32), np.array([[0.1, 0.2, 0.7]], np.float32))
    top5, top1 = tracker.tallies
    assert (top5.evaluated, top5.failed, top5.worst) == (0, 0, None)
    assert (top1.evaluated, top1.failed, top1.worst) == (1, 1, 0.0)


def test_tracker_keeps_at_most_max_examples_failing_samples() -> None:
    tracker = TensorTracker("y", "y", gates=[parse_gate("max-abs", "0.5")], distribution=False, keep_per_sample=False)
    for i in range(MAX_EXAMPLES + 2):
        tracker.add(f"s{i}", A, B)
    tally = tracker.tallies[0]
    assert MAX_EXAMPLES == 5
    assert tally.failed == 7 and tally.examples == ["s0", "s1", "s2", "s3", "s4"]
    assert tracker.per_sample == []


def test_tracker_keep_per_sample_false_on_a_shape_mismatch() -> None:
    tracker = TensorTracker("y", "y", keep_per_sample=False)
    tracker.add("bad", A, np.ones((2, 3), np.float32))
    assert tracker.per_sample == [] and tracker.shape_mismatch_samples == 1


def test_tracker_only_takes_the_gates_that_apply_to_its_tensor() -> None:
    gates = [parse_gate("max-abs", "0.1"), parse_gate("max-abs", "y=2"), parse_gate("min-cosine", "w=0.9")]
    tracker = TensorTracker("y", "y", gates=gates, distribution=False)
    assert [t.gate.describe() for t in tracker.tallies] == ["--max-abs y=2"]
    tracker.add("s0", A, B)
    assert tracker.tallies[0].failed == 0 and tracker.tallies[0].evaluated == 1


def test_worse_by_direction_and_nan_is_always_worst() -> None:
    assert _worse("cosine", 0.5, 0.9) and not _worse("cosine", 0.9, 0.5) and not _worse("cosine", 0.5, 0.5)
    assert _worse("max_abs", 2.0, 1.0) and not _worse("max_abs", 1.0, 2.0) and not _worse("max_abs", 1.0, 1.0)
    assert _worse("cosine", math.nan, 0.1) and _worse("max_abs", math.nan, math.nan)
    assert not _worse("max_abs", 1e9, math.nan) and not _worse("cosine", -1.0, math.nan)


def test_tracker_nan_metric_becomes_the_worst() -> None:
    # an SQNR of NaN cannot come from compare_arrays; fold in sums by hand, as a remote worker does
    from inspector_cli.diff.metrics import PairStats

    tracker = TensorTracker("y", "y", gates=[parse_gate("max-abs", "10")], distribution=False)
    tracker.add("ok", A, B)
    stats = PairStats(samples=1, count=1, max_abs=math.nan, sum_a2=1.0, sum_b2=1.0, dot=1.0)
    metrics = tracker.add_stats("nan", stats)
    assert math.isnan(metrics["max_abs"])
    assert math.isnan(tracker.worst_metrics()["max_abs"])
    tally = tracker.tallies[0]
    assert tally.failed == 1 and tally.examples == ["nan"] and math.isnan(tally.worst)
