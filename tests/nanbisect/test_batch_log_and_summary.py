"""nan-bisect's JSONL log and summary, driven directly: the message of an unreadable log line, the
log's write errors naming the file, and groups first seen in a merged shard (mutation survivors of
nanbisect/batch.py that only CLI subprocess tests reached)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from inspector_cli.errors import ReportError
from inspector_cli.nanbisect.batch import JsonlLog, Summary, read_records
from inspector_cli.results.nan_bisect import Origin, SampleRecord, TensorStats


def test_an_unreadable_line_is_named_with_its_number_and_what_to_do(tmp_path: Path) -> None:
    log = tmp_path / "nan.jsonl"
    log.write_text('{"sample": "s0", "status": "clean"}\n[1, 2]\n')
    with pytest.raises(ReportError) as caught:
        read_records(log)
    assert str(caught.value).startswith(f"{log}: line 2 is not a nan-bisect record (")
    assert caught.value.hint == "give --jsonl a new file, or delete this one"


def test_a_log_that_cannot_be_opened_names_the_file_and_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "missing-folder" / "nan.jsonl"
    with pytest.raises(ReportError) as caught:
        JsonlLog(str(path), resume=False)
    assert str(caught.value) == f"{path}: cannot write the JSONL log: no such file or directory"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_while_writing_names_the_file() -> None:
    log = JsonlLog(None, resume=False)
    log.path = Path("/dev/full")
    log._handle = open("/dev/full", "w", encoding="utf-8")
    with pytest.raises(ReportError) as caught:
        log.write(SampleRecord(sample="s0", status="clean"))
    assert str(caught.value) == "/dev/full: cannot write the JSONL log: no space left on device"


def _origin(node: str) -> Origin:
    return Origin(node=node, op_type="Log", position=0, outputs=[TensorStats(name=f"{node}_out", dtype="float32", shape=[1], count=1)])


def test_groups_first_seen_in_the_later_shard_are_appended_with_their_counts() -> None:
    first, second = Summary(examples=2), Summary(examples=2)
    first.add(SampleRecord(sample="a0", status="nonfinite", origin=_origin("log_a")))
    for i in range(3):
        second.add(SampleRecord(sample=f"b{i}", status="nonfinite", origin=_origin("log_b")))
    second.add(SampleRecord(sample="b3", status="error", error="unreadable"))
    merged = first.merge(second)
    origins = list(merged.iter_groups("origin"))
    assert [(g.node, g.samples, g.examples) for g in origins] == [("log_b", 3, ["b0", "b1"]), ("log_a", 1, ["a0"])]
    assert [(g.node, g.samples) for g in merged.iter_groups("error")] == [("(worker or input error)", 1)]
    assert list(merged.iter_groups("masked")) == []
