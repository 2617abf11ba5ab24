"""The executor interface: run a job over shards of work items, in this process or in workers.

A `Job` is a small picklable recipe (model path, settings). Each worker calls `job.open()` once,
getting a `Runner` that holds its own sessions and memory budget, and feeds it shards of
`WorkItem`s (e.g. sample references). The executor streams back one `Outcome` per item **in
input order**, whatever the number of workers, so anything built from the outcomes (JSONL lines,
merged summaries) is deterministic. Callers fold outcomes into `Partial`s and merge those.

Engines: `InlineExecutor` (this process), `executor.local.LocalExecutor` (worker processes, with
death detection and one retry per item), `executor.ray_engine.RayExecutor` (Ray actors, one per
worker, on this machine or a cluster). `ExecutorSpec` says which one a run uses;
`executor.factory.make_executor` builds it.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple, TypeVar

T = TypeVar("T", bound="Partial")

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class ExecutorSpec:
    """How a batch runs: which engine, how many workers, where (Ray), and each worker's memory limit."""

    engine: str = "local"
    """'local': this process (0 workers) or worker processes on this machine; 'ray': Ray actors."""
    workers: int = 0
    """local: worker processes (0 = this process); ray: actors (0 = one per CPU of the cluster)."""
    address: Optional[str] = None
    """ray: 'auto' (a running cluster), 'ray://host:10001' (Ray Client), 'local' (start one for this run)."""
    memory_limit: Optional[int] = None
    """Resident bytes per worker; a worker beyond it is stopped and its item retried once, then an error."""

    @property
    def in_process(self) -> bool:
        """Everything runs in the calling process (no isolation, no start-up cost)."""
        return self.engine == "local" and self.workers <= 0

    def to_dict(self) -> dict:
        return {"executor": self.engine, "workers": self.workers, "address": self.address,
                "worker_memory": self.memory_limit}


@dataclass(frozen=True)
class WorkItem:
    key: str
    """Stable identity of the item (a sample id): used in error records and for resuming."""
    payload: Any


@dataclass(frozen=True)
class Shard:
    """A batch of items sent to one worker together."""

    index: int
    items: Tuple[WorkItem, ...]


@dataclass(frozen=True)
class Outcome:
    """What became of one item: a value, or an error message (the run goes on either way)."""

    key: str
    value: Any = None
    error: Optional[str] = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None


Started = Callable[[int], None]
"""started(index in shard): the item is about to run (so a crash can be blamed on it)."""
Finished = Callable[[int, Any, Optional[str]], None]
"""finished(index in shard, value, error message or None)."""


class Runner(abc.ABC):
    """A job opened in one worker: runs items, holding sessions across them."""

    def run(self, items: Sequence[WorkItem], started: Started, finished: Finished) -> None:
        """Run a shard item by item. Errors the job declares expected become per-item errors."""
        for index, item in enumerate(items):
            started(index)
            try:
                value = self.run_item(item)
            except Exception as exc:  # noqa: BLE001 - reported per item; the batch goes on
                finished(index, None, self.describe_error(exc))
                continue
            finished(index, value, None)

    @abc.abstractmethod
    def run_item(self, item: WorkItem) -> Any:
        """The value of one item (picklable)."""

    def describe_error(self, exc: BaseException) -> str:
        """One line for an item that raised."""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

    def close(self) -> None:
        """Release sessions and temporary files."""


class Job(abc.ABC):
    """A picklable recipe; `open()` runs once in every worker."""

    @abc.abstractmethod
    def open(self) -> Runner:
        ...


class Partial(Protocol):
    """A mergeable partial result (e.g. per-shard counts): merge(a, b) is associative."""

    def merge(self: T, other: T) -> T:
        ...


class Executor(abc.ABC):
    """Runs a job over shards; yields one `Outcome` per item, in input order."""

    workers: int = 0

    @abc.abstractmethod
    def map(self, job: Job, shards: Iterable[Shard]) -> Iterator[Outcome]:
        ...

    def worker_pids(self) -> List[int]:
        """Process ids of the live workers on this machine (empty in this process)."""
        return []

    def close(self) -> None:
        """Stop workers once they finish their current item; safe to call twice."""

    def abort(self) -> None:
        """Stop at once (Ctrl-C)."""
        self.close()

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InlineExecutor(Executor):
    """Everything in this process: no isolation, no start-up cost (the default for one sample)."""

    workers = 0

    def __init__(self) -> None:
        self._runner: Optional[Runner] = None

    def map(self, job: Job, shards: Iterable[Shard]) -> Iterator[Outcome]:
        self._runner = job.open()
        for shard in shards:
            for item in shard.items:
                got: List[Outcome] = []
                self._runner.run([item], lambda _index: None,
                                 lambda _index, value, error: got.append(Outcome(item.key, value, error)))
                yield from got

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None


def make_shards(items: Iterable[WorkItem], size: int) -> Iterator[Shard]:
    """Consecutive shards of `size` items (streamed: items are not all held)."""
    batch: List[WorkItem] = []
    index = 0
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield Shard(index, tuple(batch))
            index, batch = index + 1, []
    if batch:
        yield Shard(index, tuple(batch))
