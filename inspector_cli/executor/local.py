"""`LocalExecutor`: worker processes on this machine, each running its own opened job.

Items go to idle workers a shard at a time; workers say when each item starts and what it gave.
A worker that dies (segfault, OOM kill, SIGKILL) is noticed through its process sentinel: the item
it was running is retried once in a fresh worker (alone, so a second death is attributed exactly),
then recorded as an error; the rest of its shard is re-queued untouched and the run goes on.
Outcomes are yielded in input order, so the result does not depend on the number of workers.
"""
from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional

from .base import Executor, Job, Outcome, Shard, WorkItem

POLL_SECONDS = 0.5
MAX_STARTUP_DEATHS = 3


class ExecutorError(RuntimeError):
    """Workers cannot run the job at all (it fails to open, or every worker dies at start-up)."""


def _worker_main(job: Job, conn: Connection) -> None:
    """Entry point of a worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        runner = job.open()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        conn.send(("fatal", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready",))
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "stop":
                break
            seqs = [seq for seq, _ in message[1]]
            items = [item for _, item in message[1]]

            def finished(index: int, value: Any, error: Optional[str]) -> None:
                try:
                    conn.send(("done", seqs[index], value, error))
                except Exception as exc:  # noqa: BLE001 - an unpicklable value becomes an error
                    conn.send(("done", seqs[index], None, f"result could not be sent back: {exc}"))

            runner.run(items, lambda index: conn.send(("start", seqs[index])), finished)
            conn.send(("idle",))
    finally:
        runner.close()


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Worker:
    def __init__(self, context: Any, job: Job, number: int) -> None:
        parent, child = context.Pipe(duplex=True)
        self.process = context.Process(target=_worker_main, args=(job, child), daemon=True,
                                       name=f"mi-worker-{number}")
        self.process.start()
        child.close()
        self.conn: Connection = parent
        self.ready = False
        self.assigned: List[int] = []
        self.current: Optional[int] = None
        self.finished: set = set()

    @property
    def idle(self) -> bool:
        return self.ready and not self.assigned


class LocalExecutor(Executor):
    """N worker processes (spawned fresh: no inherited onnxruntime threads or sessions)."""

    def __init__(self, workers: int, *, retries: int = 1, start_method: str = "spawn") -> None:
        self.workers = max(1, workers)
        self.retries = retries
        self.context = multiprocessing.get_context(start_method)
        self._pool: List[_Worker] = []
        self._started = 0
        self.restarts = 0

    def _spawn(self, job: Job) -> _Worker:
        self._started += 1
        worker = _Worker(self.context, job, self._started)
        self._pool.append(worker)
        return worker

    def map(self, job: Job, shards: Iterable[Shard]) -> Iterator[Outcome]:
        source = iter(shards)
        items: Dict[int, WorkItem] = {}
        tries: Dict[int, int] = {}
        pending: Deque[List[int]] = deque()
        results: Dict[int, Outcome] = {}
        counter, next_out, exhausted, startup_deaths = 0, 0, False, 0
        for _ in range(self.workers):
            self._spawn(job)
        while True:
            while not exhausted and len(pending) < 2 * self.workers:
                shard = next(source, None)
                if shard is None:
                    exhausted = True
                    break
                seqs = []
                for item in shard.items:
                    items[counter], tries[counter] = item, 0
                    seqs.append(counter)
                    counter += 1
                pending.append(seqs)
            while next_out in results:
                items.pop(next_out, None)
                yield results.pop(next_out)
                next_out += 1
            if exhausted and next_out == counter:
                return
            for worker in self._pool:
                if worker.idle and pending:
                    worker.assigned = pending.popleft()
                    worker.finished = set()
                    worker.conn.send(("run", [(seq, items[seq]) for seq in worker.assigned]))
            handles: List[Any] = [w.conn for w in self._pool] + [w.process.sentinel for w in self._pool]
            ready = wait(handles, timeout=POLL_SECONDS)
            for worker in list(self._pool):
                if worker.conn in ready:
                    self._receive(worker, items, tries, results)
                if worker.process.sentinel in ready or not worker.process.is_alive():
                    self._receive(worker, items, tries, results)
                    if not worker.ready:
                        startup_deaths += 1
                        if startup_deaths >= MAX_STARTUP_DEATHS:
                            raise ExecutorError(f"worker processes die at start-up "
                                                f"({describe_exit(worker.process.exitcode)})")
                    self._bury(worker, items, tries, pending, results)
                    if pending or not exhausted:
                        self.restarts += 1
                        self._spawn(job)

    def _receive(self, worker: _Worker, items: Dict[int, WorkItem], tries: Dict[int, int],
                 results: Dict[int, Outcome]) -> None:
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                kind = message[0]
                if kind == "ready":
                    worker.ready = True
                elif kind == "fatal":
                    raise ExecutorError(f"a worker could not start: {message[1]}")
                elif kind == "start":
                    worker.current = message[1]
                elif kind == "done":
                    seq, value, error = message[1], message[2], message[3]
                    results[seq] = Outcome(items[seq].key, value, error, attempts=tries[seq] + 1)
                    worker.finished.add(seq)
                    worker.current = None
                elif kind == "idle":
                    worker.assigned = []
                    worker.current = None
        except (EOFError, OSError):
            pass

    def _bury(self, worker: _Worker, items: Dict[int, WorkItem], tries: Dict[int, int],
              pending: Deque[List[int]], results: Dict[int, Outcome]) -> None:
        """A worker died: blame the item it was running, re-queue the rest of its shard."""
        worker.process.join(timeout=1)
        self._pool.remove(worker)
        worker.conn.close()
        why = describe_exit(worker.process.exitcode)
        untouched = [s for s in worker.assigned if s not in worker.finished and s != worker.current]
        if untouched:
            pending.appendleft(untouched)
        seq = worker.current
        if seq is None or seq in results:
            return
        tries[seq] += 1
        if tries[seq] > self.retries:
            results[seq] = Outcome(items[seq].key, None, f"the worker process died ({why}) while running this "
                                                         f"item, {tries[seq]} time(s)", attempts=tries[seq])
        else:
            pending.appendleft([seq])

    def abort(self) -> None:
        """Stop at once (Ctrl-C): workers are terminated, whatever they were doing."""
        for worker in self._pool:
            if worker.process.is_alive():
                worker.process.terminate()
        self.close()

    def close(self) -> None:
        for worker in self._pool:
            try:
                if worker.process.is_alive():
                    worker.conn.send(("stop",))
            except (OSError, ValueError):
                pass
        for worker in self._pool:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=2)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._pool = []

