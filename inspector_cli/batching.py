"""What the batch workflows (nan-bisect, compare, probe) share about running on executors.

- `batch_runtime`: onnxruntime threads per worker (the cores shared out, idle threads asleep);
- `shared_samples`: sample references as absolute paths, which workers on other machines resolve
  against the same shared mount (data never travels through the driver);
- `fixed_shards`: shard boundaries that depend on the data set only, never on the engine or the
  worker count, so partial results merge in the same order (and to the same bits) everywhere;
- `check_executor`: the usage rules of `--executor/--workers/--address/--worker-memory`;
- `executor_plan`: what ran, for the result; `lost_samples_finding`: samples no worker could finish.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, Optional, Sequence, Tuple

from . import errors
from .core.inputs import SampleSet
from .core.runner import RuntimeConfig, cpu_count
from .errors import MiError, UsageError
from .executor.base import Executor, ExecutorSpec, Shard, WorkItem, make_shards
from .results.base import Finding, Severity

LOST_EXAMPLES = 10


def batch_runtime(runtime: RuntimeConfig, spec: ExecutorSpec) -> RuntimeConfig:
    """The runtime each worker's sessions use.

    Local workers share this machine's cores; a Ray actor owns one CPU of its node. Either way
    idle onnxruntime threads sleep instead of spinning: a batch wants throughput, not latency.
    In this process the runtime is left as the user set it.
    """
    if spec.in_process:
        return runtime
    threads = 1 if spec.engine == "ray" else max(1, cpu_count() // max(1, spec.workers))
    return runtime.without_spinning().replace(intra_op_threads=runtime.intra_op_threads or threads)


def shared_samples(samples: SampleSet) -> SampleSet:
    """The same samples with absolute paths (a worker's working folder may differ from ours)."""
    refs = [ref if ref.path is None else replace(ref, path=str(Path(ref.path).resolve())) for ref in samples.refs]
    return samples.subset(refs)


def fixed_shards(items: Iterable[WorkItem], size: int) -> Iterator[Shard]:
    """Consecutive shards of `size` items in data-set order (the same for every engine and worker count)."""
    return make_shards(items, size)


def check_executor(spec: ExecutorSpec) -> None:
    """Usage errors of the executor options, before any work starts."""
    if spec.engine not in ("local", "ray"):
        raise UsageError(f"--executor {spec.engine}: not an engine", hint="use local or ray")
    if spec.address and spec.engine != "ray":
        raise UsageError("--address is for --executor ray", hint="add --executor ray, or leave --address out")
    if spec.memory_limit and spec.in_process:
        raise UsageError("--worker-memory limits worker processes: add --workers N (or --executor ray)")


def executor_plan(spec: ExecutorSpec, executor: Optional[Executor]) -> Dict[str, Any]:
    """Engine and worker count as they ran (recorded in the result's plan; no timings)."""
    info: Dict[str, Any] = {"engine": "inline" if spec.in_process else spec.engine,
                            "workers": getattr(executor, "workers", spec.workers) if executor else spec.workers}
    connection = getattr(executor, "connection", None)
    if connection is not None:
        info["ray"] = {**connection.describe(), "hosts": len(getattr(executor, "hosts", {}))}
    return info


def lost_samples_finding(rule: str, lost: Sequence[Tuple[str, str]], what: str) -> Finding:
    """An error finding naming the samples no worker could finish (the others are still reported)."""
    names = ", ".join(key for key, _ in lost[:LOST_EXAMPLES]) + (", ..." if len(lost) > LOST_EXAMPLES else "")
    return Finding(rule=rule, severity=Severity.ERROR, message=f"{len(lost)} sample(s) not {what}: {lost[0][1]} ({names})",
                   hint="run one alone to see why: a crash or the --worker-memory limit stopped its worker twice")


@dataclass(frozen=True)
class ItemFailure:
    """An item that raised in a worker, sent back as a value and re-raised by the driver as the same
    kind of error: a bad sample stops a compare or probe run in every engine, as in one process."""

    kind: str
    message: str
    hint: Optional[str] = None

    @classmethod
    def of(cls, exc: BaseException, key: str) -> "ItemFailure":
        if isinstance(exc, MiError):
            return cls(type(exc).__name__, exc.message, exc.hint)
        return cls("", f"{key}: {type(exc).__name__}: {exc}")

    def error(self) -> Exception:
        cls = getattr(errors, self.kind, None)
        if isinstance(cls, type) and issubclass(cls, MiError):
            return cls(self.message, hint=self.hint)
        return RuntimeError(self.message)  # a bug in a worker: exit 4, as in this process
