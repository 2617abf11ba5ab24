"""`CompareConfig`: everything that decides what `mi compare` does, resolved and frozen."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Tuple

from ..core.runner import RuntimeConfig
from ..core.synthetic import SyntheticSpec
from ..diff.gates import Gate
from ..diff.metrics import DEFAULT_TOPK


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

    def to_dict(self) -> Dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "synthetic": None if self.inputs else self.synthetic.to_dict(),
            "runtime": self.runtime.to_dict(),
            "gates": [g.to_dict() for g in self.gates],
            "map": {a: b for a, b in self.output_map},
            "topk": list(self.topk),
            "per_sample": self.per_sample,
            **({"reader_options": dict(self.reader_options)} if self.reader_options else {}),
        }
