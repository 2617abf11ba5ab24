"""`InputsConfig`: what `mi inputs make` / `mi inputs show` read and write."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..core.synthetic import SyntheticSpec

DEFAULT_MAKE_COUNT = 8


@dataclass(frozen=True)
class InputsConfig:
    """Where samples come from (files or synthetic), how files are decoded, and where .npz go."""

    inputs: Tuple[str, ...] = ()
    synthetic: SyntheticSpec = field(default_factory=SyntheticSpec)
    reader_options: Dict[str, Any] = field(default_factory=dict)
    limit: Optional[int] = None
    """Read at most this many samples of `inputs` (all when None)."""
    out: Optional[str] = None
    force: bool = False
    """Write into an output folder that already holds .npz files (files of the same name are replaced)."""

    def to_dict(self) -> Dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "synthetic": None if self.inputs else self.synthetic.to_dict(),
            "limit": self.limit,
            "out": self.out,
            "force": self.force,
            **({"reader_options": dict(self.reader_options)} if self.reader_options else {}),
        }
