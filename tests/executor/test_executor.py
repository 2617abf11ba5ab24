"""Executors: same outcomes in input order whatever the engine and worker count; a worker that
dies is detected, its item retried once, then recorded as an error while the run goes on."""
from __future__ import annotations

import os

import pytest

from inspector_cli.executor.base import InlineExecutor, Outcome, WorkItem, make_shards
from inspector_cli.executor.local import ExecutorError, LocalExecutor

from ..fixtures.executor_jobs import SquareJob

ITEMS = [WorkItem(f"s{i:02d}", i) for i in range(12)]


def collect(executor, job, size=3):
    with executor:
        return list(executor.map(job, make_shards(ITEMS, size)))


def squares(outcomes):
    return [(o.key, o.value["square"] if o.ok else o.error) for o in outcomes]


def test_shards_are_consecutive():
    shards = list(make_shards(ITEMS, 5))
    assert [len(s.items) for s in shards] == [5, 5, 2] and shards[2].items[0].key == "s10"


def test_inline_and_two_workers_agree_in_order(tmp_path):
    job = SquareJob(str(tmp_path), delay=0.01)
    inline = collect(InlineExecutor(), job)
    local = collect(LocalExecutor(2), job)
    assert squares(inline) == squares(local) == [(f"s{i:02d}", i * i) for i in range(12)]
    # The work ran in worker processes (how it was spread between the two is scheduling, not a promise)
    assert os.getpid() not in {o.value["pid"] for o in local}


def test_a_worker_killed_once_is_retried(tmp_path):
    outcomes = collect(LocalExecutor(2), SquareJob(str(tmp_path), crash_on="s05", crash_times=1))
    assert squares(outcomes) == [(f"s{i:02d}", i * i) for i in range(12)]
    assert [o.attempts for o in outcomes if o.key == "s05"] == [2]
    assert all(o.attempts == 1 for o in outcomes if o.key != "s05")


def test_an_item_that_always_kills_its_worker_becomes_an_error(tmp_path):
    outcomes = collect(LocalExecutor(2), SquareJob(str(tmp_path), crash_on="s07", crash_times=99))
    bad = [o for o in outcomes if not o.ok]
    assert [o.key for o in bad] == ["s07"] and bad[0].attempts == 2
    assert "killed by SIGKILL" in bad[0].error and "2 time(s)" in bad[0].error
    assert [o.key for o in outcomes] == [i.key for i in ITEMS]
    assert all(o.value["square"] == int(o.key[1:]) ** 2 for o in outcomes if o.ok)


@pytest.mark.parametrize("engine", ["inline", "local"])
def test_an_exception_is_an_error_for_that_item_only(tmp_path, engine):
    executor = InlineExecutor() if engine == "inline" else LocalExecutor(1)
    outcomes = collect(executor, SquareJob(str(tmp_path), fail_on="s03"))
    assert [o.key for o in outcomes if not o.ok] == ["s03"]
    assert outcomes[3] == Outcome("s03", None, "ValueError: cannot read s03", 1)


def test_a_job_that_cannot_open_stops_the_run(tmp_path):
    with pytest.raises(ExecutorError, match="cannot open the model"):
        collect(LocalExecutor(1), SquareJob(str(tmp_path), broken=True))


def test_a_worker_over_its_memory_limit_is_stopped_and_its_item_is_an_error(tmp_path):
    job = SquareJob(str(tmp_path), hog_on="s04", hog_bytes=600 << 20)
    outcomes = collect(LocalExecutor(2, memory_limit=400 << 20), job)
    bad = [o for o in outcomes if not o.ok]
    assert [o.key for o in bad] == ["s04"] and bad[0].attempts == 2
    assert "over its memory limit of 400 MiB" in bad[0].error
    assert squares([o for o in outcomes if o.ok]) == [(f"s{i:02d}", i * i) for i in range(12) if i != 4]
