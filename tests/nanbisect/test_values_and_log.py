"""Edges of nan-bisect's value helpers and batch bookkeeping that mutation testing
(scripts/mutation.sh) showed untested."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from inspector_cli.nanbisect.batch import Summary, read_records
from inspector_cli.nanbisect.values import fp16_range
from inspector_cli.results.nan_bisect import SampleRecord


def test_fp16_range_of_tensors_without_float_values_is_none() -> None:
    assert fp16_range(np.array([1, 2], np.int32)) is None            # not float
    assert fp16_range(np.zeros((0,), np.float32)) is None             # empty
    assert fp16_range(np.array([np.nan, np.inf], np.float32)) is None  # nothing finite


def test_fp16_range_of_one_element_and_the_exact_limits() -> None:
    assert fp16_range(np.array([70000.0], np.float32)) == {"max_abs": 70000.0, "overflow": 1, "underflow": 0,
                                                            "nonzero": 1, "total": 1}
    # 65504 is the largest fp16 value: not an overflow; 2**-24 the smallest: not an underflow
    got = fp16_range(np.array([65504.0, -65504.0, 2.0 ** -24, 2.0 ** -25, 0.0, np.nan], np.float64))
    assert got == {"max_abs": 65504.0, "overflow": 0, "underflow": 1, "nonzero": 4, "total": 6}


def test_read_records_of_a_log_with_only_a_torn_line(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    log.write_bytes(b'{"sample": "s0')  # killed mid-write: no complete line
    assert read_records(log) == ([], 0)
    log.write_bytes(b"\n")
    assert read_records(log) == ([], 1)


def test_merged_summaries_keep_records_in_order_up_to_the_cap() -> None:
    first, second = Summary(keep_records=3), Summary(keep_records=3)
    for i in range(2):
        first.add(SampleRecord(sample=f"a{i}", status="error", error="x"))
        second.add(SampleRecord(sample=f"b{i}", status="error", error="x"))
    merged = first.merge(second)
    assert [r.sample for r in merged.records] == ["a0", "a1", "b0"]
    assert (merged.scanned, merged.errors) == (4, 4)


def test_is_bad_answers_exactly_where_the_bad_value_sits_and_when_sums_overflow() -> None:
    from inspector_cli.nanbisect.values import HEAD, Predicate, is_bad

    size = 4 * HEAD
    for dtype in (np.float32, np.float16, np.float64):
        big = np.finfo(dtype).max
        for where in (0, HEAD - 1, HEAD, size - 1):  # inside the head, its last element, just after, the end
            for value, nan in ((np.nan, True), (np.inf, False), (-np.inf, False)):
                array = np.ones(size, dtype)
                array[where] = value
                assert is_bad(array), (dtype, where, value)
                assert is_bad(array, Predicate.NAN) is nan, (dtype, where, value)
        # finite values whose sum overflows the array's precision: not bad
        assert not is_bad(np.full(size, big, dtype))
        assert not is_bad(np.full(size, big, dtype), Predicate.NAN)
        head_big = np.ones(size, dtype)
        head_big[:HEAD] = big
        assert not is_bad(head_big)
    # non-contiguous views skip the head check and still answer
    grid = np.ones((HEAD, 4), np.float32)
    grid[HEAD - 1, 0] = np.nan
    assert is_bad(grid[:, ::2]) and is_bad(grid.T, Predicate.NAN)
    assert not is_bad(grid[:, 1::2])
    assert not is_bad(np.array([1, 2], np.int64)) and not is_bad(np.zeros(0, np.float32))
