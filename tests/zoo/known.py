"""Known open defects of mi that the zoo sweep reproduces (issue 14), as xfails: when a fix makes one pass,
the run shows XPASS, the cue to delete its entry here (and in docs/zoo.md). Keys: (check, model, variant);
model or variant "*" matches any."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

KNOWN: Dict[Tuple[str, str, str], str] = {
    # full zoo (MI_ZOO=full), every check, 2026-12-01 (docs/zoo.md): none open
    # non-tensor members (issue 29), 2026-12-02
    ("isolation", "seqlist", "*"): "isolation feeds and measures tensors only: the sequence tensors "
    "(SplitToSequence's, the Loop's list) and ConcatFromSequence, which reads one, are skipped with that "
    "reason (3 of 5 paired layers)",
    ("isolation", "sklearn_zipmap", "*"): "isolation measures tensors only: ZipMap's seq(map) output is "
    "skipped with that reason (1 of 3 paired layers)",
}


def known(check: str, model: str, variant: str) -> Optional[str]:
    """The defect that makes `check` fail on this model and variant, or None."""
    for (c, m, v), reason in KNOWN.items():
        if c == check and m in ("*", model) and v in ("*", variant):
            return reason
    return None
