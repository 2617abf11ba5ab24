"""Gates: thresholds on metrics, applied per output (or per layer) and per sample."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from .metrics import METRICS

# flag name -> (metric, comparison shown in messages)
GATE_FLAGS: Dict[str, Tuple[str, str]] = {
    "min-cosine": ("cosine", ">="),
    "max-abs": ("max_abs", "<="),
    "max-rel": ("max_rel", "<="),
    "min-sqnr": ("sqnr", ">="),
    "min-top1": ("top1", ">="),
    "min-top5": ("top5", ">="),
}


@dataclass(frozen=True)
class Gate:
    """One threshold: `metric` must meet `threshold` on `target` (a tensor name or glob; None = all)."""

    flag: str
    metric: str
    threshold: float
    target: Optional[str] = None

    @property
    def op(self) -> str:
        return ">=" if METRICS[self.metric].higher_is_better else "<="

    def describe(self) -> str:
        where = f"{self.target}=" if self.target else ""
        return f"--{self.flag} {where}{self.threshold:g}"

    def to_dict(self) -> Dict[str, object]:
        return {"flag": self.flag, "metric": self.metric, "op": self.op, "threshold": self.threshold,
                "target": self.target}

    def applies_to(self, name: str) -> bool:
        if self.target is None:
            return True
        return name == self.target or fnmatch.fnmatchcase(name, self.target)


def parse_gate(flag: str, text: "str | float") -> Gate:
    """'0.99' or 'logits=0.05' for flag 'min-cosine' -> Gate."""
    metric, _ = GATE_FLAGS[flag]
    target: Optional[str] = None
    raw = str(text).strip()
    if "=" in raw:
        target, _, raw = raw.rpartition("=")
        target = target.strip() or None
    try:
        threshold = float(raw)
    except ValueError as exc:
        raise UsageError(f"--{flag} '{text}': expected a number or OUTPUT=NUMBER, e.g. --{flag} logits=0.05") from exc
    if metric in ("cosine", "top1", "top5") and not -1.0 <= threshold <= 1.0:
        raise UsageError(f"--{flag} {threshold:g}: must lie between 0 and 1")
    return Gate(flag=flag, metric=metric, threshold=threshold, target=target)


def parse_gates(values: Dict[str, Sequence["str | float"]]) -> List[Gate]:
    """All gates from {flag: [values]}, in flag order."""
    gates: List[Gate] = []
    for flag in GATE_FLAGS:
        for value in values.get(flag, ()) or ():
            gates.append(parse_gate(flag, value))
    return gates


def gates_for(name: str, gates: Sequence[Gate]) -> List[Gate]:
    """Gates applying to tensor `name`: a targeted gate replaces the untargeted one of its metric."""
    targeted = {g.metric for g in gates if g.target is not None and g.applies_to(name)}
    return [g for g in gates if (g.target is not None and g.applies_to(name))
            or (g.target is None and g.metric not in targeted)]


def check_gate_targets(gates: Sequence[Gate], names: Sequence[str], what: str = "output") -> None:
    """A gate naming a tensor that is not compared is a usage error, not a silent no-op."""
    for gate in gates:
        if gate.target is not None and not any(gate.applies_to(n) for n in names):
            raise UsageError(f"{gate.describe()}: no compared {what} is named '{gate.target}'",
                             hint=f"{what}s: {', '.join(names)}")
