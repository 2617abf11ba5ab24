"""`ProfileConfig`: everything that decides what `mi profile` does, resolved and frozen."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..core.runner import RuntimeConfig
from ..core.synthetic import SyntheticSpec


@dataclass(frozen=True)
class ProfileConfig:
    """Settings of a profile run; every field has the CLI flag of the same name."""

    inputs: Tuple[str, ...] = ()
    synthetic: SyntheticSpec = field(default_factory=SyntheticSpec)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    runs: int = 20
    """Measured runs, both profiled and timed without the profiler."""
    warmup: int = 3
    """Runs dropped before measuring (per session)."""
    top: int = 15
    against: Optional[str] = None
    trace_path: Optional[str] = None
    max_latency_ms: Optional[float] = None
    """Gate: p50 end-to-end latency of the (first) model at most this."""
    min_speedup: Optional[float] = None
    """Gate (with `against`): p50 speed-up of the second model over the first at least this."""
    memory_stats: bool = True
    """Collect onnxruntime's per-node memory statistics (one extra one-run session)."""
    group_depth: Optional[int] = 1
    """--group-by scope[:DEPTH]: depth of the scope roll-up (None: each node's own scope)."""
    group_by: bool = False
    max_events: int = 1_000_000
    require_provider: Optional[str] = None
    """--require-provider: every node must run on this provider (alias or onnxruntime name), else MI871."""
    """onnxruntime's profiler event limit per session (profiled runs are split to stay under it)."""

    def to_dict(self) -> Dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "synthetic": None if self.inputs else self.synthetic.to_dict(),
            "runtime": self.runtime.to_dict(),
            "runs": self.runs,
            "warmup": self.warmup,
            "top": self.top,
            "against": self.against,
            "trace": self.trace_path,
            "max_latency_ms": self.max_latency_ms,
            "min_speedup": self.min_speedup,
            "memory_stats": self.memory_stats,
            "require_provider": self.require_provider,
            "group_by": (f"scope:{self.group_depth}" if self.group_depth is not None else "scope")
            if self.group_by else None,
        }
