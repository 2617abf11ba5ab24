"""`NanBisectConfig`: everything that decides what `mi nan-bisect` does, resolved and frozen."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..core.runner import RuntimeConfig
from ..core.synthetic import SyntheticSpec
from ..errors import ConfigError
from ..executor.base import ExecutorSpec

DEFAULT_CHECKPOINTS = 16
DEFAULT_EXAMPLES = 5


class Simulate(str, enum.Enum):
    NONE = "none"
    FP16 = "fp16"


@dataclass(frozen=True)
class NanBisectConfig:
    """Settings of a NaN/Inf search; every field has the CLI flag of the same name."""

    inputs: Tuple[str, ...] = ()
    synthetic: SyntheticSpec = field(default_factory=SyntheticSpec)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    max_memory: Optional[int] = None
    """Bytes of captured tensors allowed per process (None: a quarter of the available memory)."""
    checkpoints: int = DEFAULT_CHECKPOINTS
    """Checkpoints of the layered scan (fewer when the budget cannot hold them)."""
    all_origins: bool = False
    deep: bool = False
    simulate: Simulate = Simulate.NONE
    repro_dir: Optional[str] = None
    jsonl: Optional[str] = None
    resume: bool = False
    overwrite: bool = False
    """Replace an existing non-empty --jsonl file (without it and without resume: refused, exit 2)."""
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    """Where the samples run: this process (default), local worker processes (isolated, own session and
    budget) or Ray actors."""
    examples: int = DEFAULT_EXAMPLES
    keep_records: int = 200
    """Failing samples whose full record is kept in the result (all are in the JSONL)."""
    shard_size: int = 8
    require_provider: Optional[str] = None
    """`--require-provider`: every node must run on this provider as deployed, else MI871."""

    def __post_init__(self) -> None:
        # the rules the CLI enforces hold for library callers too, with the CLI's words
        if self.resume and not self.jsonl:
            raise ConfigError("--resume needs --jsonl PATH", hint="the JSONL log says which samples are done")
        if self.resume and self.overwrite:
            raise ConfigError("--resume and --overwrite contradict each other",
                              hint="--resume continues the log, --overwrite replaces it")
        if not isinstance(self.simulate, Simulate):
            object.__setattr__(self, "simulate", Simulate(self.simulate))

    @property
    def full_scan(self) -> bool:
        """Every tensor of every sample is needed (masked values, all origins, fp16 ranges)."""
        return self.deep or self.all_origins or self.simulate != Simulate.NONE

    def to_dict(self) -> Dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "synthetic": None if self.inputs else self.synthetic.to_dict(),
            "runtime": self.runtime.to_dict(),
            "max_memory": self.max_memory,
            "checkpoints": self.checkpoints,
            "all": self.all_origins,
            "deep": self.deep,
            "simulate": self.simulate.value,
            "repro": self.repro_dir,
            "jsonl": self.jsonl,
            "resume": self.resume,
            "overwrite": self.overwrite,
            "workers": self.executor.workers,
            "executor": self.executor.engine,
            "address": self.executor.address,
            "worker_memory": self.executor.memory_limit,
            "examples": self.examples,
            **({"require_provider": self.require_provider} if self.require_provider else {}),
        }
