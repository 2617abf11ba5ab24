"""Building the executor an `ExecutorSpec` asks for (Ray only imported when asked for)."""
from __future__ import annotations

from typing import Sequence

from .base import Executor, ExecutorSpec, InlineExecutor


def make_executor(spec: ExecutorSpec, warm: Sequence[str] = ()) -> Executor:
    """In this process, local worker processes (started at once: they import `warm` meanwhile),
    or Ray actors (the cluster is joined when the batch starts). Raises `UsageError` for
    `engine="ray"` when Ray is not installed."""
    if spec.engine == "ray":
        from .ray_engine import RayExecutor

        return RayExecutor(spec.workers, spec.address, memory_limit=spec.memory_limit, warm=warm)
    if spec.workers <= 0:
        return InlineExecutor()
    from .local import LocalExecutor

    executor = LocalExecutor(spec.workers, memory_limit=spec.memory_limit)
    executor.prestart(warm)
    return executor
