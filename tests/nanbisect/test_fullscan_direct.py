"""The full scan (`FullScanner`) driven directly: fp16 range events with their exact fields, which
partial underflows matter, values fetched again when a sample needs several runs, and a shard
with a sample that cannot be read and one of another shape (issue 15, mutation testing of fullscan.py)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import onnx

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.errors import MiError
from inspector_cli.nanbisect.fullscan import FullScanner
from inspector_cli.nanbisect.model import PreparedModel
from inspector_cli.results.nan_bisect import RangeEvent

from ..fixtures import nan_models as nm
from ..fixtures.helpers import init, make_model, save, vi

F32 = np.float32


def prepared(tmp_path, model: onnx.ModelProto) -> PreparedModel:
    return PreparedModel(load_model(save(model, tmp_path / "m.onnx")), RuntimeConfig())


def ranges_model() -> onnx.ModelProto:
    """u = x * 1e5 ('up', overflows fp16 for x > 0.65504); t = x * 1e-9 ('tiny', all below fp16's
    smallest subnormal 5.96e-8); y = u * t."""
    nodes = [nm.node("Mul", ["x", "k5"], "u", "up"), nm.node("Mul", ["x", "knano"], "t", "tiny"),
             nm.node("Mul", ["u", "t"], "y", "out")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                      [init("k5", np.array(1e5, F32)), init("knano", np.array(1e-9, F32))])


def test_the_first_overflow_and_underflow_with_their_exact_fields(tmp_path):
    scanner = FullScanner(prepared(tmp_path, ranges_model()), 1 << 20, all_origins=False, deep=False, fp16=True)
    x = nm.row(0.9, 0.2, -0.7, 0.0)
    record = scanner.analyse("s", {"x": x})
    u_max = float(np.abs(x * F32(1e5)).max())  # 0.9 * 1e5 = 90000 (in float32)
    t_max = float(np.abs(x * F32(1e-9)).max())  # 9e-10
    # 0.9 and -0.7 overflow (2 of 4); the three non-zero values of t all flush to zero (0 stays 0)
    assert record.fp16 == [
        RangeEvent(tensor="u", node="up", op_type="Mul", position=0, rule="fp16-overflow", max_abs=u_max, count=2,
                   total=4, message="'u' reaches |x| = 90000 > 65504 in 2 element(s): Inf in fp16"),
        RangeEvent(tensor="t", node="tiny", op_type="Mul", position=1, rule="fp16-underflow", max_abs=t_max, count=3,
                   total=4, message="'t': 3 of 3 non-zero value(s) are below 5.96e-08 and become 0 in fp16")]
    assert (record.status, record.strategy, record.runs, record.origin) == ("fp16", "full-scan", 1, None)
    # 0.5 * 1e5 = 50000 fits: only the underflow; all zeros: nothing to lose, nothing to report
    assert [e.rule for e in scanner.analyse("s", {"x": nm.row(0.5, 0.2, 0.1, 0.3)}).fp16] == ["fp16-underflow"]
    clean = scanner.analyse("s", {"x": nm.row(0.0, 0.0, 0.0, 0.0)})
    assert (clean.fp16, clean.status) == ([], "clean")


def divisor_model() -> onnx.ModelProto:
    """a = x * 1 and b = x * 1 both hold x; a is a Div's numerator, b the divisor of another Div."""
    nodes = [nm.node("Mul", ["x", "one"], "a", "mul_a"), nm.node("Mul", ["x", "one"], "b", "mul_b"),
             nm.node("Div", ["a", "two"], "h", "half"), nm.node("Div", ["two", "b"], "q", "over"),
             nm.node("Add", ["h", "q"], "y", "out")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                      [init("one", np.array(1.0, F32)), init("two", np.array(2.0, F32))])


def test_a_partial_underflow_matters_only_where_a_zero_divides(tmp_path):
    scanner = FullScanner(prepared(tmp_path, divisor_model()), 1 << 20, all_origins=False, deep=False, fp16=True)
    # one of four values below 5.96e-8: a (a numerator) loses it harmlessly, b (a divisor) becomes 0;
    # 2 / 1e-9 = 2e9 overflows at 'over' besides
    events = scanner.analyse("s", {"x": nm.row(1e-9, 1, 2, 3)}).fp16
    assert [(e.rule, e.tensor, e.node, e.position, e.count, e.total) for e in events] == [
        ("fp16-underflow", "b", "mul_b", 1, 1, 4), ("fp16-overflow", "q", "over", 3, 1, 4)]
    assert events[0].message == "'b': 1 of 4 non-zero value(s) are below 5.96e-08 and become 0 in fp16"


def test_several_runs_per_sample_fetch_the_values_a_body_needs(tmp_path):
    """If 'branch_if' divides x1 = |x| by an outer zero: with one tensor per run, x1's value is
    not kept, and the drill into the then_branch fetches it again."""
    model = prepared(tmp_path, nm.if_model())
    feeds = {"x": nm.row(1, -2, 3, 4), "cond": np.array(True)}
    wide = FullScanner(model, 1 << 20, all_origins=False, deep=False, fp16=False).analyse("s", feeds)
    tight = FullScanner(model, 40, all_origins=False, deep=False, fp16=False)
    assert [len(c) for c in tight.plan(feeds).chunks] == [1, 1, 1]  # x1, z, y: 16 bytes each, exposed x2
    record = tight.analyse("s", feeds)
    assert (record.strategy, record.runs) == ("full-scan (3 chunks)", 3)
    assert (wide.strategy, wide.runs) == ("full-scan", 1)
    for r in (wide, record):
        assert (r.origin.node, r.origin.nested.attribute, r.origin.nested.node) == ("branch_if", "then_branch", "div_then")
        assert r.origin.hints[0].message == "division by zero: divisor 'zero' has 4 zero(s) of 4"
        assert r.outputs == {"y": {"nan": 0, "inf": 4}}


def dynamic_log() -> onnx.ModelProto:
    """y = |Log(-|x|)| over a dynamic batch: Log of a non-positive value is the origin (-Inf for 0,
    NaN for the rest)."""
    nodes = [nm.node("Abs", ["x"], "a", "abs"), nm.node("Neg", ["a"], "n", "neg"),
             nm.node("Log", ["n"], "l", "log"), nm.node("Abs", ["l"], "y", "abs_out")]
    return make_model(nodes, [vi("x", ["N", 4])], [vi("y", ["N", 4])])


def test_a_shard_read_chunk_major_with_a_bad_sample_and_another_shape(tmp_path):
    model = prepared(tmp_path, dynamic_log())
    samples = {0: np.zeros((1, 4), F32), 2: np.ones((2, 4), F32), 3: np.full((1, 4), -1.0, F32)}
    started: List[int] = []
    finished: Dict[int, Tuple[str, str, str, object]] = {}

    def load(index: int) -> Dict[str, np.ndarray]:
        if index == 1:
            raise MiError("sample s1 cannot be read")
        return {"x": samples[index]}

    def done(index: int, record, error) -> None:
        assert error is None and index not in finished
        finished[index] = (record.sample, record.status, record.strategy,
                           record.origin.node if record.origin else record.error)

    scanner = FullScanner(model, 40, all_origins=False, deep=False, fp16=False)  # one tensor per run
    scanner.run_shard(["s0", "s1", "s2", "s3"], load, started.append, done)
    assert finished == {0: ("s0", "nonfinite", "full-scan (4 chunks)", "log"),
                        1: ("s1", "error", "", "sample s1 cannot be read"),
                        2: ("s2", "nonfinite", "full-scan (4 chunks)", "log"),
                        3: ("s3", "nonfinite", "full-scan (4 chunks)", "log")}
    # chunk-major: s0, s1 (fails), s2 (another shape: put aside), s3 in the first chunk, then s0 and
    # s3 for each of the 3 other chunks, then s2 on its own
    assert started == [0, 1, 2, 3, 0, 3, 0, 3, 0, 3, 2]


def test_a_shard_of_one_run_per_sample_goes_sample_by_sample(tmp_path):
    model = prepared(tmp_path, dynamic_log())
    started: List[int] = []
    finished: Dict[int, str] = {}

    def load(index: int) -> Dict[str, np.ndarray]:
        if index == 1:
            raise MiError("unreadable")
        return {"x": np.full((1, 4), float(index), F32)}

    scanner = FullScanner(model, 1 << 20, all_origins=False, deep=False, fp16=False)
    scanner.run_shard(["s0", "s1", "s2"], load, started.append,
                      lambda i, record, error: finished.__setitem__(i, f"{record.status} {record.error}"))
    assert finished == {0: "nonfinite None", 1: "error unreadable", 2: "nonfinite None"}
    assert started == [0, 0, 1, 2]  # the first sample is read to plan, then each in turn


def test_a_chunk_major_shard_keeps_the_fp16_ranges_of_every_chunk(tmp_path):
    model = prepared(tmp_path, ranges_model())
    x = {0: nm.row(0.9, 0.2, -0.7, 0.0), 1: nm.row(0.5, 0.2, 0.1, 0.3)}
    wide = FullScanner(model, 1 << 20, all_origins=False, deep=False, fp16=True)
    tight = FullScanner(model, 40, all_origins=False, deep=False, fp16=True)  # u, t, y: one per run
    assert len(tight.plan({"x": x[0]}).chunks) == 3
    records: Dict[int, object] = {}
    tight.run_shard(["a", "b"], lambda i: {"x": x[i]}, lambda i: None, lambda i, r, e: records.__setitem__(i, r))
    assert [e.rule for e in records[0].fp16] == ["fp16-overflow", "fp16-underflow"]
    for i in (0, 1):
        assert records[i].fp16 == wide.analyse("s", {"x": x[i]}).fp16
        assert records[i].strategy == "full-scan (3 chunks)"


def test_a_shard_whose_samples_all_fail_to_load_reports_each():
    scanner = FullScanner.__new__(FullScanner)  # never reaches the model: no sample can be read
    finished: Dict[int, Tuple[str, str, str]] = {}

    def load(index: int) -> Dict[str, np.ndarray]:
        raise MiError(f"cannot read s{index}")

    scanner.run_shard(["s0", "s1"], load, lambda i: None,
                      lambda i, r, e: finished.__setitem__(i, (r.sample, r.status, r.error)))
    assert finished == {0: ("s0", "error", "cannot read s0"), 1: ("s1", "error", "cannot read s1")}


def test_where_the_inf_becomes_nan_in_a_full_scan(tmp_path):
    """exp overflows to Inf first ('exp'); Relu keeps it; Inf - Inf at 'sub' makes the NaN."""
    for budget in (1 << 20, 40):
        scanner = FullScanner(prepared(tmp_path, nm.inf_then_nan()), budget, all_origins=False, deep=False, fp16=False)
        record = scanner.analyse("s", {"x": nm.row(1, 2, 10, 3)})
        assert (record.origin.node, record.origin.nan_birth.node) == ("exp", "sub"), budget
        assert record.origin.nan_birth.hints[0].rule == "inf-minus-inf"


def test_a_model_output_that_partly_underflows_is_lost_silently(tmp_path):
    """y = x * 1e-5 is an output (nothing reads it): 1e-8 of [1e-5, 1e-8] flushes to 0, harmlessly."""
    model = make_model([nm.node("Mul", ["x", "k"], "y", "scale")], [vi("x", [1, 4])], [vi("y", [1, 4])],
                       [init("k", np.array(1e-5, F32))])
    scanner = FullScanner(prepared(tmp_path, model), 1 << 20, all_origins=False, deep=False, fp16=True)
    assert scanner.analyse("s", {"x": nm.row(1, 1e-3, 0, 0)}).fp16 == []


def test_a_shard_sample_unreadable_at_its_last_read_or_before_the_plan(tmp_path):
    model = prepared(tmp_path, dynamic_log())
    reads: Dict[int, int] = {}

    def load(index: int) -> Dict[str, np.ndarray]:
        reads[index] = reads.get(index, 0) + 1
        if index == 0 and reads[index] == 5:  # read for each of the 4 chunks, then once more to finish
            raise MiError("s0 vanished")
        return {"x": np.ones((1, 4), F32)}

    finished: Dict[int, Tuple[str, str, str]] = {}
    record = lambda i, r, e: finished.__setitem__(i, (r.sample, r.status, r.error))  # noqa: E731
    FullScanner(model, 40, all_origins=False, deep=False, fp16=False).run_shard(["s0", "s1"], load, lambda i: None, record)
    assert finished == {0: ("s0", "error", "s0 vanished"), 1: ("s1", "nonfinite", None)}
    # one run per sample: the first sample fails before the plan, the second plans; each is reported
    finished.clear()

    def first_fails(index: int) -> Dict[str, np.ndarray]:
        if index == 0:
            raise MiError("s0 unreadable")
        return {"x": np.ones((1, 4), F32)}

    FullScanner(model, 1 << 20, all_origins=False, deep=False, fp16=False).run_shard(
        ["s0", "s1"], first_fails, lambda i: None, record)
    assert finished == {0: ("s0", "error", "s0 unreadable"), 1: ("s1", "nonfinite", None)}


def test_what_a_full_scan_record_holds_and_leaves_out(tmp_path):
    # masked Log NaN (not searched without --deep), a real Sqrt NaN; one origin kept without --all
    model = prepared(tmp_path, nm.masked(with_real=True))
    feeds = {"x": nm.row(-1, 2, 3, 4)}
    plain = FullScanner(model, 1 << 20, all_origins=False, deep=False, fp16=False).analyse("s", feeds)
    assert (plain.status, plain.origin.node, plain.origins, plain.masked, plain.fp16) == ("nonfinite", "sqrt", [], [], [])
    assert plain.origin.nan_birth is None  # the origin made the NaN itself
    assert plain.inputs_nonfinite == {}
    deep = FullScanner(model, 1 << 20, all_origins=True, deep=True, fp16=False).analyse("s", feeds)
    assert [o.node for o in deep.origins] == ["sqrt"] and [m.node for m in deep.masked] == ["log"]
    assert not deep.masked[0].reaches_outputs


def test_an_inf_fed_in_becomes_nan_at_the_first_node(tmp_path):
    """y = x - x at position 0: the input's Inf is the origin, the Sub (position 0) makes the NaN."""
    model = prepared(tmp_path, make_model([nm.node("Sub", ["x", "x"], "y", "sub")], [vi("x", [1, 4])], [vi("y", [1, 4])]))
    record = FullScanner(model, 1 << 20, all_origins=False, deep=False, fp16=False).analyse("s", {"x": nm.row(np.inf, 1, np.nan, 2)})
    assert (record.origin.node, record.origin.op_type, record.origin.nan_birth) == ("x", "(input)", None)  # NaN fed in too
    assert record.inputs_nonfinite == {"x": {"nan": 1, "inf": 1}}
    inf_only = FullScanner(model, 1 << 20, all_origins=False, deep=False, fp16=False).analyse("s", {"x": nm.row(np.inf, 1, 3, 2)})
    assert (inf_only.origin.node, inf_only.origin.nan_birth.node) == ("x", "sub")
    assert inf_only.inputs_nonfinite == {"x": {"nan": 0, "inf": 1}}


def test_each_sample_shape_has_its_own_plan(tmp_path):
    """At 64 bytes a run exposes two [1, 4] float tensors (16 bytes, counted twice) but one [2, 4]."""
    scanner = FullScanner(prepared(tmp_path, dynamic_log()), 64, all_origins=False, deep=False, fp16=False)
    assert scanner.analyse("a", {"x": np.ones((1, 4), F32)}).strategy == "full-scan (2 chunks)"
    assert scanner.analyse("b", {"x": np.ones((2, 4), F32)}).strategy == "full-scan (4 chunks)"
