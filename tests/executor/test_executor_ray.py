"""The Ray engine keeps the executor contract: outcomes in input order, a killed actor's work
retried once and then recorded as an error, the run going on; without Ray, one usage line."""
from __future__ import annotations

import sys

import pytest

from inspector_cli.executor.base import InlineExecutor, WorkItem, make_shards
from inspector_cli.executor.local import ExecutorError

from ..fixtures.executor_jobs import SquareJob
from ..fixtures.helpers import invoke

ITEMS = [WorkItem(f"s{i:02d}", i) for i in range(12)]


def ray_executor(workers=2):
    from inspector_cli.executor.ray_engine import RayExecutor

    return RayExecutor(workers, "local")


def collect(executor, job, size=3):
    with executor:
        return list(executor.map(job, make_shards(ITEMS, size)))


def squares(outcomes):
    return [(o.key, o.value["square"] if o.ok else o.error) for o in outcomes]


def test_actors_give_the_inline_outcomes_in_order(ray_local, tmp_path):
    job = SquareJob(str(tmp_path), delay=0.01)
    executor = ray_executor()
    outcomes = collect(executor, job)
    assert squares(outcomes) == squares(collect(InlineExecutor(), job)) == [(f"s{i:02d}", i * i) for i in range(12)]
    # Which actor ran which item is scheduling luck (under load one actor may take all 12): not asserted.
    assert executor.connection.cluster == {"cpus": 2.0, "nodes": 1}


def test_an_actor_killed_once_is_replaced_and_nothing_is_lost(ray_local, tmp_path):
    executor = ray_executor()
    outcomes = collect(executor, SquareJob(str(tmp_path), crash_on="s05", crash_times=1))
    assert squares(outcomes) == [(f"s{i:02d}", i * i) for i in range(12)]
    assert executor.restarts >= 1
    # the shard it was running is re-run item by item, each counting one attempt
    assert [o.attempts for o in outcomes if o.key in ("s03", "s04", "s05")] == [2, 2, 2]


def test_an_item_that_always_kills_its_actor_becomes_an_error(ray_local, tmp_path):
    outcomes = collect(ray_executor(), SquareJob(str(tmp_path), crash_on="s07", crash_times=99))
    bad = [o for o in outcomes if not o.ok]
    assert [o.key for o in bad] == ["s07"] and bad[0].attempts == 2
    assert "the Ray worker died" in bad[0].error and "2 time(s)" in bad[0].error
    assert [o.key for o in outcomes] == [i.key for i in ITEMS]
    assert all(o.value["square"] == int(o.key[1:]) ** 2 for o in outcomes if o.ok)


def test_an_exception_is_an_error_for_that_item_only(ray_local, tmp_path):
    outcomes = collect(ray_executor(1), SquareJob(str(tmp_path), fail_on="s03"))
    assert [(o.key, o.error) for o in outcomes if not o.ok] == [("s03", "ValueError: cannot read s03")]


def test_a_job_that_cannot_open_stops_the_run(ray_local, tmp_path):
    with pytest.raises(ExecutorError, match="cannot open the model"):
        collect(ray_executor(1), SquareJob(str(tmp_path), broken=True))


def test_without_ray_the_option_is_one_usage_line(monkeypatch, tmp_path):
    from ..fixtures import nan_models as nm

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    path, data = nm.write(tmp_path, nm.log_batch(), nm.log_samples(2, []))
    for command in (["nan-bisect", path], ["probe", path, "--no-history"], ["compare", path, path]):
        result = invoke([*command, "--inputs", data, "--executor", "ray"], exit_code=2)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines == ["Error: --executor ray needs Ray, which is not installed (pip install "
                         "'model-inspector[ray]')"], result.stderr


def test_an_actor_over_its_memory_limit_is_stopped_and_its_item_is_an_error(ray_local, tmp_path):
    from inspector_cli.executor.ray_engine import RayExecutor

    executor = RayExecutor(2, "local", memory_limit=400 << 20)
    outcomes = collect(executor, SquareJob(str(tmp_path), hog_on="s04", hog_bytes=600 << 20))
    bad = [o for o in outcomes if not o.ok]
    assert [o.key for o in bad] == ["s04"] and bad[0].attempts == 2 and "the Ray worker died" in bad[0].error
    assert "memory limit of 400 MiB" in bad[0].error
    assert squares([o for o in outcomes if o.ok]) == [(f"s{i:02d}", i * i) for i in range(12) if i != 4]
