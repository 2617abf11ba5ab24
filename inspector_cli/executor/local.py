"""`LocalExecutor`: worker processes on this machine, each running its own opened job.

Workers can be started before the job is known (`prestart`), so their imports overlap with the
caller's own set-up. Each worker gets shards (up to two queued, so it never waits for the next)
and streams back one result per item. The item it is running is kept in shared memory, not sent
as a message: a worker that dies (segfault, OOM kill, SIGKILL) is noticed through its process
sentinel, the item it was running is retried once in a fresh worker (alone, so a second death is
attributed exactly) and then recorded as an error; the rest of its shards is re-queued untouched
and the run goes on. With a memory limit, a worker whose resident memory grows beyond it is killed
the same way (one sample must not take the machine down with it). Outcomes are yielded in input
order, whatever the number of workers.
"""
from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import Any, Deque, Iterable, Iterator, List, Optional, Sequence

from ..errors import MiError
from .base import Executor, Job, Outcome, Shard
from .dispatch import QUEUED_SHARDS, Dispatch

POLL_SECONDS = 0.5
MAX_STARTUP_DEATHS = 3
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ExecutorError(MiError):
    """Workers cannot run the job at all (it fails to open, or every worker dies at start-up): exit 3."""


class _ParentGone(BaseException):
    """The parent's end of the pipe is closed (a BaseException, so runners do not record it)."""


def _worker_main(conn: Connection, current: Any, warm: Sequence[str]) -> None:
    """Entry point of a worker process: import, wait for the job, open it, run shards."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for module in warm:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    runner = None
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "stop":
                break
            if message[0] == "job":
                try:
                    runner = message[1].open()
                except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
                    conn.send(("fatal", f"{type(exc).__name__}: {exc}"))
                    return
                conn.send(("ready",))
                continue
            seqs = [seq for seq, _ in message[1]]

            def started(index: int) -> None:
                current.value = seqs[index]

            def finished(index: int, value: Any, error: Optional[str]) -> None:
                current.value = -1
                try:
                    conn.send(("done", seqs[index], value, error))
                except (BrokenPipeError, ConnectionResetError) as exc:
                    raise _ParentGone() from exc
                except Exception as exc:  # noqa: BLE001 - an unpicklable value becomes an error
                    conn.send(("done", seqs[index], None, f"result could not be sent back: {exc}"))

            assert runner is not None
            runner.run([item for _, item in message[1]], started, finished)
            conn.send(("shard",))
    except (_ParentGone, BrokenPipeError, ConnectionResetError):
        pass  # the parent died (killed, or Ctrl-C): nobody wants the rest
    finally:
        if runner is not None:
            runner.close()


def resident_bytes(pid: int) -> Optional[int]:
    """Resident memory of a process (Linux /proc; None elsewhere or when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return None


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
    def __init__(self, context: Any, number: int, warm: Sequence[str]) -> None:
        parent, child = context.Pipe(duplex=True)
        self.current = context.Value("q", -1, lock=False)
        self.process = context.Process(target=_worker_main, args=(child, self.current, tuple(warm)), daemon=True,
                                       name=f"mi-worker-{number}")
        self.process.start()
        child.close()
        self.conn: Connection = parent
        self.has_job = False
        self.ready = False
        self.shards: Deque[List[int]] = deque()
        self.finished: set = set()
        self.over_limit: Optional[int] = None
        """Resident bytes measured when the worker was killed for exceeding the memory limit."""

    def give_job(self, job: Job) -> None:
        if not self.has_job:
            self.has_job = _send(self.conn, ("job", job))


def _send(conn: Connection, message: Any) -> bool:
    """Send, or report False when the worker is gone (its death is handled by the main loop)."""
    try:
        conn.send(message)
        return True
    except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
        return False


class LocalExecutor(Executor):
    """N worker processes, started fresh (no inherited onnxruntime threads or sessions)."""

    def __init__(self, workers: int, *, retries: int = 1, start_method: Optional[str] = None,
                 memory_limit: Optional[int] = None) -> None:
        self.workers = max(1, workers)
        self.retries = retries
        self.memory_limit = memory_limit
        """Resident bytes a worker may use; beyond, it is killed and its item handled as after a crash."""
        if start_method is None:
            # a fork server imports the heavy modules once and forks every worker from that clean
            # state (no sessions, no onnxruntime threads); spawn where there is no fork server
            start_method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        self.context = multiprocessing.get_context(start_method)
        self._pool: List[_Worker] = []
        self._started = 0
        self._warm: Sequence[str] = ()
        self.restarts = 0

    def prestart(self, warm: Sequence[str] = ()) -> None:
        """Start the workers now, importing `warm` modules while the caller prepares the job."""
        self._warm = tuple(warm)
        if self.context.get_start_method() == "forkserver" and not self._pool:
            # the server imports them once; every worker (and replacement) is forked from it
            self.context.set_forkserver_preload(list(self._warm))
        while len(self._pool) < self.workers:
            self._spawn()

    def _spawn(self) -> _Worker:
        self._started += 1
        worker = _Worker(self.context, self._started, self._warm)
        self._pool.append(worker)
        return worker

    def map(self, job: Job, shards: Iterable[Shard]) -> Iterator[Outcome]:
        work = Dispatch(shards, self.workers, self.retries)
        startup_deaths = 0
        self.prestart(self._warm)
        for worker in self._pool:
            worker.give_job(job)
        while True:
            work.refill()
            yield from work.release()
            if work.finished:
                return
            for worker in self._pool:
                while worker.ready and work.pending and len(worker.shards) < QUEUED_SHARDS:
                    shard_seqs = work.take()
                    worker.shards.append(shard_seqs)  # re-queued from here if the worker is dead
                    if not _send(worker.conn, ("run", list(zip(shard_seqs, work.payload(shard_seqs))))):
                        break
            handles: List[Any] = [w.conn for w in self._pool] + [w.process.sentinel for w in self._pool]
            ready = wait(handles, timeout=POLL_SECONDS)
            if self.memory_limit:
                self._enforce_memory_limit()
            for worker in list(self._pool):
                if worker.conn in ready:
                    self._receive(worker, work)
                if worker.process.sentinel in ready or not worker.process.is_alive():
                    self._receive(worker, work)
                    if not worker.ready:
                        startup_deaths += 1
                        if startup_deaths >= MAX_STARTUP_DEATHS:
                            raise ExecutorError(f"worker processes die at start-up "
                                                f"({describe_exit(worker.process.exitcode)})")
                    self._bury(worker, work)
                    if work.more_work:
                        self.restarts += 1
                        self._spawn().give_job(job)

    def _receive(self, worker: _Worker, work: Dispatch) -> None:
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                kind = message[0]
                if kind == "ready":
                    worker.ready = True
                elif kind == "fatal":
                    raise ExecutorError(f"a worker could not start: {message[1]}")
                elif kind == "done":
                    seq, value, error = message[1], message[2], message[3]
                    work.record(seq, value, error)
                    worker.finished.add(seq)
                elif kind == "shard":
                    done = worker.shards.popleft() if worker.shards else []
                    worker.finished.difference_update(done)
        except (EOFError, OSError):
            pass

    def _bury(self, worker: _Worker, work: Dispatch) -> None:
        """A worker died: blame the item it was running, re-queue the rest of its shards."""
        worker.process.join(timeout=1)
        self._pool.remove(worker)
        worker.conn.close()
        why = describe_exit(worker.process.exitcode)
        if worker.over_limit is not None:
            why = (f"stopped at {worker.over_limit >> 20} MiB, over its memory limit of "
                   f"{(self.memory_limit or 0) >> 20} MiB")
        running = worker.current.value if worker.current.value >= 0 else None
        untouched = [s for shard in worker.shards for s in shard
                     if s not in worker.finished and s != running and s not in work.results]
        work.requeue(untouched)
        if running is None or running in work.results or running not in work.items:
            return
        work.crashed(running, "the worker process", why)

    def worker_pids(self) -> List[int]:
        return [w.process.pid for w in self._pool if w.process.pid is not None and w.process.is_alive()]

    def _enforce_memory_limit(self) -> None:
        for worker in self._pool:
            if worker.over_limit is None and worker.process.pid is not None:
                rss = resident_bytes(worker.process.pid)
                if rss is not None and rss > (self.memory_limit or rss):
                    worker.over_limit = rss
                    worker.process.kill()  # noticed through its sentinel, like any other death

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
