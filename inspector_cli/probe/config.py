"""`ProbeConfig`: everything that decides what `mi probe` does, resolved and frozen."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..core.runner import RuntimeConfig
from ..core.synthetic import SyntheticSpec
from ..errors import ConfigError
from ..executor.base import ExecutorSpec

DEFAULT_MAX_SATURATION = 0.01
DEFAULT_DUMP_MAX_BYTES = 256 << 20


@dataclass(frozen=True)
class ProbeConfig:
    """Settings of a probe run; every field has the CLI flag of the same name."""

    inputs: Tuple[str, ...] = ()
    synthetic: SyntheticSpec = field(default_factory=SyntheticSpec)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    select: Tuple[str, ...] = ()
    """Tensor patterns; empty means every tensor (or, with quant_ranges, the quantisers' tensors only)."""
    channel_axis: Optional[int] = 1
    per_sample: bool = False
    break_on: Tuple[str, ...] = ()
    dump_dir: Optional[str] = None
    dump_max_bytes: int = DEFAULT_DUMP_MAX_BYTES
    quant_ranges: bool = False
    reference: Optional[str] = None
    max_saturation: float = DEFAULT_MAX_SATURATION
    plugins: Tuple[str, ...] = ()
    history: bool = False
    """Store this run under history_dir. Off for library callers (nothing written to the working
    directory unasked); the CLI turns it on unless --no-history."""
    history_dir: str = ".mi/history"
    keep_runs: int = 10
    since: Optional[str] = None
    hist_sample: int = 0
    """0: every value enters the histogram (rank-exact percentiles); N: about N values per tensor and sample."""
    capture_budget: Optional[int] = None
    """Bytes of captured tensors alive at once (default: a quarter of the available memory)."""
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    """Where the samples run: this process (default), local worker processes or Ray actors."""
    require_provider: Optional[str] = None
    """`--require-provider`: every node must run on this provider as deployed, else MI871."""

    def __post_init__(self) -> None:
        # the rule the CLI enforces holds for library callers too, with the CLI's words
        if self.reference and not self.quant_ranges:
            raise ConfigError("--reference is used by --quant-ranges; add --quant-ranges")

    def to_dict(self) -> Dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "synthetic": None if self.inputs else self.synthetic.to_dict(),
            "runtime": self.runtime.to_dict(),
            "select": list(self.select),
            "channel_axis": self.channel_axis,
            "per_sample": self.per_sample,
            "break_on": list(self.break_on),
            "dump": self.dump_dir,
            "dump_max_bytes": self.dump_max_bytes,
            "quant_ranges": self.quant_ranges,
            "reference": self.reference,
            "max_saturation": self.max_saturation,
            "plugins": list(self.plugins),
            "history": self.history,
            "history_dir": self.history_dir,
            "keep_runs": self.keep_runs,
            "since": self.since,
            "hist_sample": self.hist_sample,
            "capture_budget": self.capture_budget,
            **self.executor.to_dict(),
            **({"require_provider": self.require_provider} if self.require_provider else {}),
        }
