"""What the driver does when a Ray actor dies (ray_engine.RayExecutor._bury), with a fake Ray whose calls
resolve only when waited for, as a loaded machine makes real ones do: found by running the suite on two
workers beside a zoo sweep (test_an_item_that_always_kills_its_actor_becomes_an_error recorded an innocent
item as an error, twice: first an item whose reply was still on the way, then one whose reply was lost with
the process). A call that finished before the death counts; every call lost is charged, its items retried
one by one, each alone on its actor; only a death that can have one cause only makes an item an error."""
from __future__ import annotations

import pickle
from collections import deque
from typing import Any, Dict, List

from inspector_cli.executor.base import Shard, WorkItem
from inspector_cli.executor.dispatch import Dispatch
from inspector_cli.executor.ray_engine import RayExecutor, _Actor


class RayError(Exception):
    pass


class ActorDied(RayError):
    pass


class SlowRay:
    """Calls of the dead actor: a value or a failure each, readable only after `wait` (a timeout-0 `get`
    before it raises, as Ray's GetTimeoutError does while the reply is on its way)."""

    def __init__(self, outcomes: Dict[str, Any]) -> None:
        self.outcomes = outcomes
        self.settled = False
        self.waited: List[List[str]] = []

    def wait(self, refs: List[str], num_returns: int, timeout: float) -> Any:
        assert num_returns == len(refs) and timeout > 0
        self.waited.append(list(refs))
        self.settled = True
        return refs, []

    def get(self, ref: str, timeout: float = None) -> Any:  # type: ignore[assignment]
        if not self.settled:
            raise TimeoutError(f"{ref} not ready")
        outcome = self.outcomes[ref]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def kill(self, handle: Any, no_restart: bool) -> None:
        pass


def _engine(ray: SlowRay, actor: _Actor) -> RayExecutor:
    engine = RayExecutor.__new__(RayExecutor)  # no connection: only _bury's state
    engine.ray, engine._actors, engine.memory_limit = ray, [actor], None
    return engine


def _dispatch(keys: List[str], retries: int = 1) -> Dispatch:
    work = Dispatch([Shard(i, (WorkItem(k, None),)) for i, k in enumerate(keys)], workers=2, retries=retries)
    work.refill()
    while work.pending:
        work.take()
    return work


def test_a_finished_call_whose_reply_is_late_counts_and_the_lost_ones_are_charged() -> None:
    work = _dispatch(["s05", "s06", "s07", "s08"])
    # s05 and s06 finished before the death (replies still on the way); s07 was running; s08 queued
    ray = SlowRay({"r05": pickle.dumps([(0, 25, None)]), "r06": pickle.dumps([(0, 36, None)]),
                   "r07": ActorDied("killed"), "r08": ActorDied("killed")})
    actor = _Actor(handle=None, ready_ref=None, ready=True,
                   inflight=deque([("r05", [0]), ("r06", [1]), ("r07", [2]), ("r08", [3])]))
    engine = _engine(ray, actor)
    engine._bury(actor, "worker died", work)
    assert ray.waited == [["r05", "r06", "r07", "r08"]]
    assert engine._actors == []
    assert [(work.results[s].key, work.results[s].value, work.results[s].attempts) for s in sorted(work.results)] == [
        ("s05", 25, 1), ("s06", 36, 1)]
    # s07 was running and s08 queued, but that cannot be told apart from s07's reply lost and s08 running:
    # both are charged and retried alone, in input order
    assert work.tries == {0: 0, 1: 0, 2: 1, 3: 1}
    assert list(work.pending) == [[2], [3]]
    assert work.needs_alone([2]) and work.needs_alone([3]) and not work.needs_alone([0])


def test_the_running_item_becomes_an_error_after_its_retries() -> None:
    work = _dispatch(["s06", "s07"], retries=1)
    for _ in range(2):  # s07 kills its actor twice; s06, finished each time, is never charged
        ray = SlowRay({"r06": pickle.dumps([(0, 36, None)]), "r07": ActorDied("killed")})
        actor = _Actor(handle=None, ready_ref=None, ready=True, inflight=deque([("r06", [0]), ("r07", [1])]))
        _engine(ray, actor)._bury(actor, "worker died", work)
        while work.pending:
            work.take()
    assert work.results[0].error is None and work.results[0].value == 36
    assert work.results[1].error == "the Ray worker died (worker died) while running this item, 2 time(s)"


class WorkerCrashed(RayError):  # as in Ray: a RayError, not an actor error
    pass


class Exceptions:
    """The ray.exceptions names `_settle_run` reads, in Ray's hierarchy."""

    RayError = RayError
    RayActorError = ActorDied
    WorkerCrashedError = WorkerCrashed

    class RayTaskError(RayError):
        pass


def test_a_worker_crash_reported_as_such_is_a_death_not_a_lost_result() -> None:
    # Ray may report an actor process killed mid-call as WorkerCrashedError rather than an actor error
    # (seen once in CI): the running shard must be charged, not re-run as if its result were lost
    work = _dispatch(["s03", "s04", "s05"])
    ray = SlowRay({"r": WorkerCrashed("worker died")})
    ray.exceptions = Exceptions  # type: ignore[attr-defined]
    ray.settled = True
    actor = _Actor(handle=None, ready_ref=None, ready=True, inflight=deque([("r", [0, 1, 2])]))
    engine = _engine(ray, actor)
    engine._settle_run(actor, "r", work)
    assert engine._actors == []  # buried: fresh actors take over
    assert work.tries == {0: 1, 1: 1, 2: 1}
    assert list(work.pending) == [[0], [1], [2]]  # re-run item by item, each counting one attempt


def test_an_innocent_item_whose_reply_was_lost_is_never_an_error() -> None:
    # The CI failure of d63bcbe: s06 finished, but the actor died (s07 killed it) before s06's reply left,
    # so both calls failed; the second time round s06 was charged again and recorded as an error.
    work = _dispatch(["s06", "s07"], retries=1)
    ray = SlowRay({"r06": ActorDied("killed"), "r07": ActorDied("killed")})
    actor = _Actor(handle=None, ready_ref=None, ready=True, inflight=deque([("r06", [0]), ("r07", [1])]))
    _engine(ray, actor)._bury(actor, "worker died", work)
    assert work.tries == {0: 1, 1: 1} and work.results == {}
    # the same doubt again (an engine that pipelined them) still convicts neither
    work.pending.clear()
    ray = SlowRay({"r06": ActorDied("killed"), "r07": ActorDied("killed")})
    actor = _Actor(handle=None, ready_ref=None, ready=True, inflight=deque([("r06", [0]), ("r07", [1])]))
    _engine(ray, actor)._bury(actor, "worker died", work)
    assert work.tries == {0: 2, 1: 2} and work.results == {}
    assert list(work.pending) == [[0], [1]]


class Handle:
    """An actor handle whose `run.remote(items)` returns the items' keys as the call's reference."""

    def __init__(self) -> None:
        self.run = self
        self.sent: List[List[str]] = []

    def remote(self, items: List[WorkItem]) -> str:
        self.sent.append([item.key for item in items])
        return "+".join(item.key for item in items)


def test_an_item_charged_with_a_death_runs_alone_on_an_idle_actor() -> None:
    work = Dispatch([Shard(0, (WorkItem("a", None), WorkItem("b", None))), Shard(1, (WorkItem("c", None),)),
                     Shard(2, (WorkItem("d", None),))], workers=2, retries=1)
    work.refill()
    busy = _Actor(handle=Handle(), ready_ref=None, ready=True)
    RayExecutor._feed(busy, work)
    assert busy.handle.sent == [["a", "b"], ["c"]]  # two shards in flight, as always
    ray = SlowRay({"a+b": ActorDied("killed"), "c": pickle.dumps([(0, 4, None)])})
    _engine(ray, busy)._bury(busy, "worker died", work)
    assert list(work.pending) == [[0], [1], [3]]  # a and b charged, retried first, one by one
    fresh, other = _Actor(handle=Handle(), ready_ref=None, ready=True), _Actor(handle=Handle(), ready_ref=None, ready=True)
    RayExecutor._feed(fresh, work)
    assert fresh.handle.sent == [["a"]]  # nothing follows a charged item on its actor
    RayExecutor._feed(other, work)
    assert other.handle.sent == [["b"]]
    fresh.inflight.clear()  # a came back: its actor is idle again
    RayExecutor._feed(fresh, work)
    assert fresh.handle.sent == [["a"], ["d"]] and not work.pending
    # a normal shard in flight keeps a charged item away until the actor is idle
    work.crashed(3, "the Ray worker", "killed", certain=False)
    busy2 = _Actor(handle=Handle(), ready_ref=None, ready=True, inflight=deque([("x", [9])]))
    RayExecutor._feed(busy2, work)
    assert busy2.handle.sent == [] and list(work.pending) == [[3]]
