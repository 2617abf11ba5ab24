"""`CompareConfig`: everything that decides what `mi compare` does, resolved and frozen."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..core.runner import RuntimeConfig
from ..core.synthetic import SyntheticSpec
from ..diff.gates import Gate
from ..diff.metrics import DEFAULT_TOPK
from ..errors import ConfigError
from ..executor.base import ExecutorSpec


class Granularity(str, enum.Enum):
    """`--granularity`: one row per fused chain (Conv+BN+Relu, its last tensor) or per paired tensor."""

    CHAIN = "chain"
    TENSOR = "tensor"

    def __str__(self) -> str:
        return self.value


class CaptureMode(str, enum.Enum):
    """`--capture`: read tensors from onnxruntime's optimised graph (deployed), expose them as outputs
    (instrumented), or choose per model (auto)."""

    AUTO = "auto"
    DEPLOYED = "deployed"
    INSTRUMENTED = "instrumented"

    def __str__(self) -> str:
        return self.value


CAPTURE_MODES = tuple(m.value for m in CaptureMode)
DEFAULT_LAYER_ATOL = 1e-5
"""Polygraphy's default absolute tolerance. A tensor whose values are rounding noise (a mean of a row
that is already centred: |value| ~6e-8 beside inputs ~3) differs between two healthy models by ~1e-7;
a divergence that matters, on activations at a trained model's scale (0.01-100), is far larger."""
GRANULARITIES = tuple(g.value for g in Granularity)


def _enum(cls: type, value: object, flag: str) -> enum.Enum:
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(m.value for m in cls)  # type: ignore[attr-defined]
        raise ConfigError(f"{flag} {value}: expected one of {choices}") from None


@dataclass(frozen=True)
class LayerConfig:
    """Settings of the layer-by-layer comparison (`--layers` and the options around it)."""

    patterns: Tuple[str, ...] = ("all",)
    """Tensors of the reference model to compare: names, globs, 're:<regex>', 'op:<Type>', 'all'."""
    granularity: Granularity = Granularity.CHAIN
    """'chain': one row per fused chain (Conv+BN+Relu), its last tensor; 'tensor': every paired tensor."""
    gates: Tuple[Gate, ...] = ()
    gate_layers: bool = False
    """Layer gates decide the exit code too (otherwise they only mark the first divergence)."""
    isolate: Tuple[str, ...] = ()
    """'all', 'worst:N' or tensor names/globs: measure each such layer's own error."""
    max_memory: Optional[int] = None
    """Bytes the captured tensors of one sample may use (None: a share of the available memory)."""
    capture: CaptureMode = CaptureMode.AUTO
    worst: int = 5
    observer_check: bool = True
    atol: float = DEFAULT_LAYER_ATOL
    """A layer whose max |b - a| is at most this is negligible (rounding noise of a tensor near zero): it
    passes every layer threshold but --layer-max-abs and is never the first divergence. 0: off."""

    def __post_init__(self) -> None:
        # strings are accepted (the CLI and YAML give them) and checked with the CLI's words
        object.__setattr__(self, "granularity", _enum(Granularity, self.granularity, "--granularity"))
        object.__setattr__(self, "capture", _enum(CaptureMode, self.capture, "--capture"))
        for item in self.isolate:
            if item.startswith("worst:") and not item[6:].isdigit():
                raise ConfigError(f"--isolate {item}: expected worst:N with a whole number N")
        if not (isinstance(self.atol, (int, float)) and 0.0 <= self.atol < float("inf")):
            raise ConfigError(f"--layer-atol {self.atol}: expected a number >= 0 (0 turns it off)")

    def to_dict(self) -> Dict[str, Any]:
        return {"patterns": list(self.patterns), "granularity": self.granularity.value,
                "gates": [g.to_dict() for g in self.gates], "gate_layers": self.gate_layers,
                "isolate": list(self.isolate), "max_memory": self.max_memory, "capture": self.capture.value,
                "worst": self.worst, "observer_check": self.observer_check, "atol": self.atol}


@dataclass(frozen=True)
class CompareConfig:
    """Settings of a comparison; every field has the CLI flag of the same name."""

    inputs: Tuple[str, ...] = ()
    synthetic: SyntheticSpec = field(default_factory=SyntheticSpec)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    gates: Tuple[Gate, ...] = ()
    output_map: Tuple[Tuple[str, str], ...] = ()
    topk: Tuple[int, ...] = DEFAULT_TOPK
    per_sample: bool = True
    """Keep each sample's metrics per output in the result (small; off for huge data sets)."""
    reader_options: Dict[str, Any] = field(default_factory=dict)
    """How image and raw .bin files are decoded (`--preprocess`, `--raw-dtype`, ...)."""
    runtime_b: Optional[RuntimeConfig] = None
    """Runtime of the second model when it differs from the first (`--b-opt-level`, `--b-providers`)."""
    layers: Optional[LayerConfig] = None
    golden: Optional[str] = None
    """Folder of saved reference outputs replacing the first model (`--golden`)."""
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    """Where the samples run: this process (default), local worker processes or Ray actors."""
    require_provider: Optional[str] = None
    """`--require-provider`: every node of the sessions asked for this provider must run on it, else MI871."""
    tolerance: Optional[Tuple[float, float]] = None
    """(rtol, atol) of `--rtol`/`--atol` with --golden: each value within atol + rtol * |expected|, else MI806."""

    def __post_init__(self) -> None:
        # the rules the CLI enforces hold for library callers too, with the CLI's words
        if self.golden and self.layers is not None:
            raise ConfigError("--layers needs two models; --golden compares outputs only")
        if self.tolerance is not None and not self.golden:
            raise ConfigError("--rtol/--atol check saved outputs: give them with --golden",
                              hint="between two models, gate on --max-abs, --max-rel or --min-cosine")
        if not self.executor.in_process and (self.golden or self.layers is not None):
            raise ConfigError(f"{'--golden' if self.golden else '--layers'} runs in this process",
                              hint="leave --workers and --executor out")

    @property
    def runtime_a(self) -> RuntimeConfig:
        return self.runtime

    @property
    def runtime_of_b(self) -> RuntimeConfig:
        return self.runtime_b or self.runtime

    def to_dict(self) -> Dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "synthetic": None if self.inputs else self.synthetic.to_dict(),
            "runtime": self.runtime.to_dict(),
            "runtime_b": self.runtime_b.to_dict() if self.runtime_b else None,
            "gates": [g.to_dict() for g in self.gates],
            "map": {a: b for a, b in self.output_map},
            "topk": list(self.topk),
            "per_sample": self.per_sample,
            **({"reader_options": dict(self.reader_options)} if self.reader_options else {}),
            "layers": self.layers.to_dict() if self.layers else None,
            "golden": self.golden,
            **self.executor.to_dict(),
            **({"require_provider": self.require_provider} if self.require_provider else {}),
            **({"rtol": self.tolerance[0], "atol": self.tolerance[1]} if self.tolerance is not None else {}),
        }
