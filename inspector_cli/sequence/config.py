"""`SequenceConfig`: how `mi compare/nan-bisect/probe --sequence` step a model (beside its engine, as every command's config)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..core.runner import RuntimeConfig
from ..diff.gates import Gate


BLOCK_BYTES = 4 << 20
"""Outputs of both models held for a block's reduction, at most (a block of a small model's steps
costs less per step the longer it is; a large model's outputs must not pile up, and the fused
reduction's float64 work arrays are about 8x the float32 outputs it reduces: 32 MiB at most)."""

JOURNAL_BLOCK = 64
"""With a journal, its lines are written at least every this many steps (`tail -f` follows the run;
an interrupted run loses little; checkpoints are taken at the end of the block they fall in)."""


@dataclass(frozen=True)
class SequenceConfig:
    """How to step the models. Every field has a CLI flag in phase 2 (`--state`, `--init-state`, ...)."""

    state: Tuple[Tuple[str, str], ...] = ()
    init_state: Optional[Path] = None
    shapes: Tuple[Tuple[str, Tuple[int, ...]], ...] = ()
    """`--shape`: a state input's initial shape, or one symbolic dim of the state (sequence/cachedims)."""
    steps: Optional[int] = None
    chunk: Optional[int] = None
    gates: Tuple[Gate, ...] = ()
    decision_output: Optional[str] = None
    """Output whose argmax (last axis; > 0.5 for one value) is the step's decision; default: the first
    floating step output."""
    journal: Optional[Path] = None
    resume: bool = False
    checkpoint_every: int = 100
    bundle_dir: Optional[Path] = None
    """Where the non-finite step's inputs + state are written (nan-bisect hand-off)."""
    stop_on_nonfinite: bool = True
    allow_nonfinite: bool = False
    """Compare mode: a NaN, or an Inf the other model lacks, neither fails the run nor stops it; the
    metrics are read over the positions finite in both (`--allow-nonfinite`). Counts stay reported."""
    attribute: bool = True
    runtime: RuntimeConfig = RuntimeConfig()
    timeline_points: int = 512
    block: int = 256
    """Steps reduced together: at most this many, at most BLOCK_BYTES of both models' outputs held, and
    with a journal at most JOURNAL_BLOCK and `checkpoint_every`."""

    def to_dict(self) -> Dict[str, Any]:
        return {"state": [f"{a}={b}" for a, b in self.state], "init_state": str(self.init_state) if self.init_state else None,
                "shapes": {n: list(d) for n, d in self.shapes},
                "steps": self.steps, "chunk": self.chunk, "gates": [g.describe() for g in self.gates],
                "decision_output": self.decision_output, "journal": str(self.journal) if self.journal else None,
                "resume": self.resume, "checkpoint_every": self.checkpoint_every,
                "bundle_dir": str(self.bundle_dir) if self.bundle_dir else None,
                "stop_on_nonfinite": self.stop_on_nonfinite, "allow_nonfinite": self.allow_nonfinite, "runtime": self.runtime.to_dict()}
