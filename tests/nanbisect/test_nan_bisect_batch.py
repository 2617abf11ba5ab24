"""Batches: only some samples fail; JSONL per sample, identical whatever the worker count;
resume after an interrupted run (torn last line included) gives the uninterrupted JSONL."""
from __future__ import annotations

import json

from inspector_cli.nanbisect.config import NanBisectConfig
from inspector_cli.workflows.nan_bisect import nan_bisect

from ..fixtures import nan_models as nm
from ..fixtures.helpers import invoke, read_json

FAILING = [1, 4, 5, 9, 10, 11]


def batch(tmp_path, count=12):
    return nm.write(tmp_path, nm.log_batch(), nm.log_samples(count, FAILING))


def test_only_some_samples_fail(tmp_path):
    path, data = batch(tmp_path)
    jsonl = tmp_path / "nan.jsonl"
    result = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), jsonl=str(jsonl)))
    assert (result.samples_total, result.scanned, result.nonfinite, result.errors) == (12, 12, 6, 0)
    group = result.groups[0]
    assert (group.node, group.op_type, group.kind, group.samples) == ("log", "Log", "origin", 6)
    assert group.examples == [f"x_{i:04d}.npz" for i in FAILING[:5]] and group.hint == "log-nonpositive"
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [line["sample"] for line in lines] == [f"x_{i:04d}.npz" for i in range(12)]
    assert [i for i, line in enumerate(lines) if line["status"] == "nonfinite"] == FAILING
    assert {line["origin"]["node"] for line in lines if line["origin"]} == {"log"}
    assert lines[1]["outputs"] == {"y": {"nan": 1, "inf": 0}}
    assert lines[0]["strategy"] == "layered" and lines[0]["runs"] == 1  # a clean sample costs one run


def test_jsonl_is_the_same_with_two_workers(tmp_path):
    path, data = batch(tmp_path)
    alone, pair = tmp_path / "w0.jsonl", tmp_path / "w2.jsonl"
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", alone], exit_code=1)
    doc = tmp_path / "w2.json"
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", pair, "--workers", "2", "--json", doc], exit_code=1)
    assert pair.read_bytes() == alone.read_bytes()
    results = read_json(doc)["results"]
    assert results["nonfinite"] == 6 and results["plan"]["workers"] == 2
    assert results["groups"][0]["node"] == "log" and results["groups"][0]["samples"] == 6


def test_resume_after_an_interrupted_run(tmp_path):
    path, data = batch(tmp_path)
    full = tmp_path / "full.jsonl"
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", full], exit_code=1)
    lines = full.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:5]) + lines[5][:17])  # a run killed while writing line 6
    doc = tmp_path / "resumed.json"
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", cut, "--resume", "--json", doc], exit_code=1)
    assert cut.read_bytes() == full.read_bytes()
    results = read_json(doc)["results"]
    assert (results["resumed"], results["scanned"], results["nonfinite"]) == (5, 7, 6)
    assert results["groups"][0]["samples"] == 6  # the summary covers the whole data set


def test_resume_needs_a_log(tmp_path):
    path, data = batch(tmp_path, 2)
    result = invoke(["nan-bisect", path, "--inputs", data, "--resume"], exit_code=2)
    assert "--resume needs --jsonl" in result.stderr


def test_summaries_of_shards_merge_into_the_whole(tmp_path):
    from inspector_cli.nanbisect.batch import Summary, read_records

    path, data = batch(tmp_path)
    jsonl = tmp_path / "nan.jsonl"
    nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), jsonl=str(jsonl)))
    records, _ = read_records(jsonl)
    whole, first, second = Summary(examples=3), Summary(examples=3), Summary(examples=3)
    for i, record in enumerate(records):
        whole.add(record)
        (first if i < 5 else second).add(record)
    merged = first.merge(second)
    assert merged.groups() == whole.groups()
    assert (merged.scanned, merged.nonfinite, merged.runs) == (whole.scanned, whole.nonfinite, whole.runs) == (
        12, 6, whole.runs)
    assert merged.groups()[0].examples == ["x_0001.npz", "x_0004.npz", "x_0005.npz"]


def test_existing_jsonl_without_resume_is_refused_not_truncated(tmp_path):
    # issue 15 item 6: 50 records became 5 when a run forgot --resume
    path, data = batch(tmp_path, 3)
    jsonl = tmp_path / "nan.jsonl"
    jsonl.write_text('{"earlier": "record"}\n' * 50)
    before = jsonl.read_bytes()
    result = invoke(["nan-bisect", path, "--inputs", data, "--jsonl", jsonl], exit_code=2)
    assert result.stderr == (f"Error: {jsonl} exists: use --resume or --overwrite (--jsonl: --resume skips the "
                             "samples it records, --overwrite starts a new log)\n")
    assert jsonl.read_bytes() == before
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", jsonl, "--overwrite"], exit_code=1)
    assert [json.loads(line)["sample"] for line in jsonl.read_text().splitlines()] == [
        "x_0000.npz", "x_0001.npz", "x_0002.npz"]


def test_empty_jsonl_is_started_without_flags_and_overwrite_contradicts_resume(tmp_path):
    path, data = batch(tmp_path, 2)
    jsonl = tmp_path / "nan.jsonl"
    jsonl.write_text("")
    invoke(["nan-bisect", path, "--inputs", data, "--jsonl", jsonl], exit_code=1)
    assert len(jsonl.read_text().splitlines()) == 2
    result = invoke(["nan-bisect", path, "--inputs", data, "--jsonl", jsonl, "--resume", "--overwrite"], exit_code=2)
    assert "Error: --resume and --overwrite contradict each other" in result.stderr


def test_library_callers_are_refused_too(tmp_path):
    import pytest

    from inspector_cli.errors import UsageError

    path, data = batch(tmp_path, 2)
    jsonl = tmp_path / "nan.jsonl"
    jsonl.write_text("x\n")
    with pytest.raises(UsageError, match="exists: use --resume or --overwrite"):
        nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), jsonl=str(jsonl)))
    assert jsonl.read_text() == "x\n"
