"""Bookkeeping shared by the worker engines (local processes, Ray actors).

Items are numbered in input order as shards are drawn; shards wait in a queue for a free worker;
an item that was running when its worker died is retried once on its own, then recorded as an
error; outcomes are released strictly in input order, whatever order workers finish in.

An engine that cannot tell which of several lost calls was running (Ray: a reply can be lost with
the process that sent it) charges every item lost, as not `certain`: each is re-run `alone` (the
engine then gives it a worker with nothing else in flight), and only a death that leaves no doubt
makes an item an error. So an innocent item is never recorded as an error for its neighbour's crash.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Set

from .base import Outcome, Shard, WorkItem

QUEUED_SHARDS = 2
"""Shards sent ahead to each worker, so it never waits for work."""


class Dispatch:
    """The state of one `Executor.map` call."""

    def __init__(self, shards: Iterable[Shard], workers: int, retries: int) -> None:
        self._source = iter(shards)
        self.items: Dict[int, WorkItem] = {}
        self.tries: Dict[int, int] = {}
        self.pending: Deque[List[int]] = deque()
        self.results: Dict[int, Outcome] = {}
        self.counter = 0
        self.next_out = 0
        self.exhausted = False
        self.capacity = (QUEUED_SHARDS + 1) * max(workers, 1)
        self.retries = retries
        self.alone: Set[int] = set()
        """Items charged with a death, re-run with nothing else in flight on their worker."""

    def refill(self) -> None:
        """Draw shards from the input until enough are queued for every worker."""
        while not self.exhausted and len(self.pending) < self.capacity:
            shard = next(self._source, None)
            if shard is None:
                self.exhausted = True
                return
            seqs = []
            for item in shard.items:
                self.items[self.counter], self.tries[self.counter] = item, 0
                seqs.append(self.counter)
                self.counter += 1
            self.pending.append(seqs)

    def release(self) -> Iterator[Outcome]:
        """Outcomes ready in input order (stops at the first item still running)."""
        while self.next_out in self.results:
            self.items.pop(self.next_out, None)
            yield self.results.pop(self.next_out)
            self.next_out += 1

    @property
    def finished(self) -> bool:
        return self.exhausted and self.next_out == self.counter

    @property
    def more_work(self) -> bool:
        return bool(self.pending) or not self.exhausted

    def take(self) -> List[int]:
        return self.pending.popleft()

    def payload(self, seqs: List[int]) -> List[WorkItem]:
        return [self.items[s] for s in seqs]

    def record(self, seq: int, value: Any, error: Optional[str]) -> None:
        self.results[seq] = Outcome(self.items[seq].key, value, error, attempts=self.tries[seq] + 1)

    def requeue(self, seqs: List[int]) -> None:
        """Run these again, first (their worker went away before starting them)."""
        if seqs:
            self.pending.appendleft(seqs)

    def needs_alone(self, seqs: List[int]) -> bool:
        """Whether this shard must be the only one in flight on its worker (see `crashed`)."""
        return len(seqs) == 1 and seqs[0] in self.alone

    def crashed(self, seq: int, who: str, why: str, certain: bool = True) -> None:
        """Item `seq` was (`certain`) or may have been running when its worker died: retried alone, or,
        when certain and out of retries, recorded as an error."""
        self.tries[seq] += 1
        if certain and self.tries[seq] > self.retries:
            self.results[seq] = Outcome(self.items[seq].key, None,
                                        f"{who} died ({why}) while running this item, {self.tries[seq]} time(s)",
                                        attempts=self.tries[seq])
        else:
            self.alone.add(seq)
            self.pending.appendleft([seq])
