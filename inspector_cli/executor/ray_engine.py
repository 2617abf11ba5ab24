"""`RayExecutor`: the executor contract on Ray actors, on this machine or on a cluster.

One actor per worker opens the job once (loads the model, keeps its sessions) and runs shards of
work items sent by the driver, at most `QUEUED_SHARDS` at a time, so it never waits for work.
Items carry references (sample paths), never data: every node reads the inputs from the shared
path itself. Each shard's values come back as soon as it is done; the driver yields outcomes in
input order, exactly as the other engines, so JSONL logs and merged results are the same bytes.

Worker loss (the actor's process is killed, or its node goes away) is noticed when its calls fail.
Calls that finished before the death count. Every call lost with the actor is re-run item by item,
each item counting one attempt: which of them was running cannot be known, since a call that had
returned loses its reply too when the process dies before sending it (seen under load: the next
item killed the actor a millisecond later). An item so charged runs alone on an actor with nothing
else in flight, so a second death is its own: after `retries` retries it is recorded as an error;
the run goes on with fresh actors.

Ray is imported lazily (`mi --help` stays fast) and is an optional extra; `connection.py` finds or
starts the cluster.
"""
from __future__ import annotations

import importlib
import os
import pickle
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .base import Executor, Job, Outcome, Shard, WorkItem
from .dispatch import QUEUED_SHARDS, Dispatch
from .connection import RayConnection
from .local import ExecutorError, resident_bytes

POLL_SECONDS = 0.5
MAX_STARTUP_DEATHS = 3
WATCHDOG_SECONDS = 0.2
SETTLE_SECONDS = 30.0
"""How long the calls of a dead actor may take to resolve (with a value or failed) before those left are
taken as lost: Ray fails them as soon as it learns of the death, well within this."""
INSTALL_HINT = "every node needs the same model-inspector: pip install 'model-inspector[ray]'"


class MiWorker:
    """The body of one Ray actor: the job opened once, then shards run one after another."""

    def __init__(self, warm: Sequence[str], memory_limit: Optional[int]) -> None:
        for module in warm:
            try:
                importlib.import_module(module)
            except ImportError:
                pass
        self.runner: Any = None
        if memory_limit:
            threading.Thread(target=_watch_memory, args=(memory_limit,), daemon=True, name="mi-memory").start()

    def open(self, job: Job) -> Dict[str, Any]:
        self.close()
        self.runner = job.open()
        return {"pid": os.getpid(), "host": socket.gethostname()}

    def run(self, items: Sequence[WorkItem]) -> bytes:
        """The shard's [(index, value, error)], pickled here: Ray would hand numpy arrays back read-only
        (zero-copy from its object store), while callers own and update what executors return."""
        done: List[Tuple[int, Any, Optional[str]]] = []

        def finished(index: int, value: Any, error: Optional[str]) -> None:
            try:
                pickle.dumps(value)
            except Exception as exc:  # noqa: BLE001 - an unpicklable value becomes an error, as locally
                value, error = None, f"result could not be sent back: {exc}"
            done.append((index, value, error))

        self.runner.run(list(items), lambda _index: None, finished)
        return pickle.dumps(done, protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.runner = None


def _watch_memory(limit: int) -> None:
    """End the actor's process when it grows beyond `limit` (the driver then retries its item)."""
    while True:
        rss = resident_bytes(os.getpid())
        if rss is not None and rss > limit:
            os.write(2, f"mi: worker stopped at {rss >> 20} MiB, over its memory limit of {limit >> 20} MiB\n".encode())
            os._exit(137)
        time.sleep(WATCHDOG_SECONDS)


@dataclass
class _Actor:
    handle: Any
    ready_ref: Any
    ready: bool = False
    inflight: Deque[Tuple[Any, List[int]]] = field(default_factory=deque)
    info: Dict[str, Any] = field(default_factory=dict)
    """pid and host, once the actor opened the job."""


class RayExecutor(Executor):
    """`workers` Ray actors (0: one per CPU of the cluster), each with `cpus_per_worker` CPUs."""

    def __init__(self, workers: int = 0, address: Optional[str] = None, *, retries: int = 1,
                 cpus_per_worker: float = 1.0, memory_limit: Optional[int] = None,
                 warm: Sequence[str] = ()) -> None:
        self.requested = workers
        self.address = address
        self.retries = retries
        self.cpus_per_worker = cpus_per_worker
        self.memory_limit = memory_limit
        self.warm = tuple(warm)
        self.connection = RayConnection(address, cpus=workers or None)
        self.ray = self.connection.ray
        self.workers = workers
        self._actors: List[_Actor] = []
        self._actor_class: Any = None
        self.restarts = 0
        self.hosts: Dict[str, int] = {}

    def start(self) -> None:
        """Connect (or start the local instance) and fix the number of workers."""
        self.connection.connect()
        if self.requested <= 0:
            cpus = float(self.ray.cluster_resources().get("CPU", 1.0))
            self.workers = max(1, int(cpus // self.cpus_per_worker))
        if self._actor_class is None:
            options: Dict[str, Any] = {"num_cpus": self.cpus_per_worker, "max_restarts": 0, "max_task_retries": 0,
                                       "scheduling_strategy": "SPREAD"}
            if self.memory_limit:
                options["memory"] = int(self.memory_limit)
            self._actor_class = self.ray.remote(**options)(MiWorker)

    def _spawn(self, job_ref: Any) -> _Actor:
        handle = self._actor_class.remote(self.warm, self.memory_limit)
        actor = _Actor(handle, handle.open.remote(job_ref))
        self._actors.append(actor)
        return actor

    def map(self, job: Job, shards: Iterable[Shard]) -> Iterator[Outcome]:
        self.start()
        ray = self.ray
        try:
            job_ref = ray.put(job)
        except Exception as exc:  # noqa: BLE001 - Ray Client unpickles on the cluster
            raise ExecutorError(f"the Ray cluster cannot take the job ({_cause(exc)})", hint=INSTALL_HINT) from None
        work = Dispatch(shards, self.workers, self.retries)
        startup_deaths = 0
        for actor in self._actors:  # actors of an earlier batch: open this job instead
            actor.ready, actor.ready_ref = False, actor.handle.open.remote(job_ref)
        while len(self._actors) < self.workers:
            self._spawn(job_ref)
        while True:
            work.refill()
            yield from work.release()
            if work.finished:
                return
            for actor in self._actors:
                self._feed(actor, work)
            while len(self._actors) < self.workers and work.more_work:
                self.restarts += 1
                self._spawn(job_ref)
            waiting = {}
            for actor in self._actors:
                if not actor.ready:
                    waiting[actor.ready_ref] = actor
                for ref, _ in actor.inflight:
                    waiting[ref] = actor
            done, _ = ray.wait(list(waiting), num_returns=1, timeout=POLL_SECONDS)
            for ref in done:
                actor = waiting[ref]
                if actor not in self._actors:
                    continue  # buried already, by an earlier failed call
                if not actor.ready and ref == actor.ready_ref:
                    death = self._settle_open(actor)
                    if death is not None:
                        startup_deaths += 1
                        if startup_deaths >= MAX_STARTUP_DEATHS:
                            raise ExecutorError(f"Ray workers die at start-up ({death})", hint=INSTALL_HINT)
                else:
                    self._settle_run(actor, ref, work)

    @staticmethod
    def _feed(actor: _Actor, work: Dispatch) -> None:
        """Send the actor shards until `QUEUED_SHARDS` are in flight; an item charged with a death goes
        only to an idle actor, and nothing follows it, so if the actor dies again the item killed it."""
        while actor.ready and work.pending and len(actor.inflight) < QUEUED_SHARDS:
            if any(work.needs_alone(seqs) for _, seqs in actor.inflight):
                return
            if actor.inflight and work.needs_alone(work.pending[0]):
                return
            seqs = work.take()
            actor.inflight.append((actor.handle.run.remote(work.payload(seqs)), seqs))

    def _settle_open(self, actor: _Actor) -> Optional[str]:
        """Why the actor died while starting or opening the job; None when it is ready."""
        ray = self.ray
        try:
            info = ray.get(actor.ready_ref)
        except ray.exceptions.RayActorError as exc:
            self._drop(actor)
            return _cause(exc)
        except ray.exceptions.RayTaskError as exc:
            raise ExecutorError(f"a worker could not start: {_cause(exc)}") from None
        actor.ready, actor.info = True, info
        self.hosts[info["host"]] = self.hosts.get(info["host"], 0) + 1
        return None

    def _settle_run(self, actor: _Actor, ref: Any, work: Dispatch) -> None:
        ray = self.ray
        seqs = next(s for r, s in actor.inflight if r == ref)
        try:
            done = pickle.loads(ray.get(ref))
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as exc:
            # Ray reports an actor process killed mid-call as either (WorkerCrashedError seen under load):
            # taken for a lost result, the shard was re-run uncounted, so an item that always kills its
            # worker would never become an error
            self._bury(actor, _cause(exc), work)
            return
        except ray.exceptions.RayTaskError as exc:  # the shard's values could not come back
            done = [(i, None, f"the worker failed: {_cause(exc)}") for i in range(len(seqs))]
        except ray.exceptions.RayError:  # its result was lost with a node: run the shard again
            actor.inflight = deque((r, s) for r, s in actor.inflight if r != ref)
            work.requeue(seqs)
            return
        actor.inflight = deque((r, s) for r, s in actor.inflight if r != ref)
        self._record(done, seqs, work)

    def _bury(self, actor: _Actor, why: str, work: Dispatch) -> None:
        """An actor died. Its calls that finished before the death count; every other call's items are
        charged one attempt and re-run alone. Certain (error after the retries) only when one item was lost."""
        ray = self.ray
        inflight = list(actor.inflight)
        self._drop(actor)
        if inflight:
            # Every call of a dead actor resolves soon, with its value (finished before the death) or
            # failed. Reading them at once (timeout 0) took a finished call whose reply had not reached
            # the driver yet for the running one.
            ray.wait([ref for ref, _ in inflight], num_returns=len(inflight), timeout=SETTLE_SECONDS)
        lost: List[int] = []
        for ref, seqs in inflight:
            try:
                done = pickle.loads(ray.get(ref, timeout=0))
            except Exception:  # noqa: BLE001 - lost with the actor: running, not started, or its reply lost
                lost.extend(seqs)
                continue
            self._record(done, seqs, work)
        if self.memory_limit:  # the watchdog ends the process with no word to Ray: say what may have happened
            why += f"; stopped if it passed its memory limit of {self.memory_limit >> 20} MiB"
        for seq in reversed(lost):  # each re-queued first, so they keep their input order
            work.crashed(seq, "the Ray worker", why, certain=len(lost) == 1)

    @staticmethod
    def _record(done: List[Tuple[int, Any, Optional[str]]], seqs: List[int], work: Dispatch) -> None:
        for index, value, error in done:
            work.record(seqs[index], value, error)

    def _drop(self, actor: _Actor) -> None:
        if actor in self._actors:
            self._actors.remove(actor)
        try:
            self.ray.kill(actor.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def worker_pids(self) -> List[int]:
        here = socket.gethostname()
        return [a.info["pid"] for a in self._actors if a.ready and a.info.get("host") == here]

    def abort(self) -> None:
        """Stop at once (Ctrl-C): actors are killed, whatever they were doing."""
        for actor in list(self._actors):
            self._drop(actor)
        self.close()

    def close(self) -> None:
        """Let every actor release its sessions, end them, and leave the cluster (or stop ours)."""
        ray = self.ray
        if self._actors and ray.is_initialized():
            closing = [a.handle.close.remote() for a in self._actors if a.ready]
            try:
                ray.wait(closing, num_returns=len(closing), timeout=5)
            except Exception:  # noqa: BLE001 - best effort; the actors are killed next
                pass
            for actor in list(self._actors):
                self._drop(actor)
        self._actors = []
        self.connection.close()


def _cause(exc: BaseException) -> str:
    """The first meaningful line of a Ray error (Ray prefixes tracebacks and long explanations)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and not isinstance(cause, type(exc)):
        text = str(cause).strip()
        first = text.splitlines()[0] if text else ""
        return f"{type(cause).__name__}: {first}" if first else type(cause).__name__
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
