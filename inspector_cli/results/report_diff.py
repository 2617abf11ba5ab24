"""Result of `mi report OLD NEW --diff`: what regressed between two runs of the same kind."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .base import ModelRef, Result


@dataclass(frozen=True)
class CheckChange:
    name: str
    group: str
    old: Optional[bool]
    """None when the check did not exist in the old run."""
    new: Optional[bool]
    message: str = ""

    @property
    def regression(self) -> bool:
        return self.new is False and self.old is not False


@dataclass(frozen=True)
class ValueChange:
    metric: str
    key: str
    old: float
    new: float
    change: float
    """Relative worsening (> 0 means worse), as compared with the tolerance."""


@dataclass(frozen=True)
class FindingChange:
    rule: str
    severity: str
    message: str
    node: Optional[str] = None
    tensor: Optional[str] = None


@dataclass(frozen=True)
class EnvironmentChange:
    """One fact of the run's environment (fingerprint) that differs, e.g. 'onnxruntime.version'."""

    key: str
    old: Any = None
    new: Any = None


@dataclass(frozen=True)
class ReportDiffResult(Result):
    """Regressions and improvements between an old and a new result of the same kind."""

    kind: ClassVar[str] = "report-diff"

    models: List[ModelRef]
    config: Dict[str, Any]
    compared_kind: str
    old_source: str
    new_source: str
    tolerance: float
    check_changes: List[CheckChange] = field(default_factory=list)
    """Checks whose outcome changed, appeared or disappeared."""
    worse: List[ValueChange] = field(default_factory=list)
    better: List[ValueChange] = field(default_factory=list)
    findings_added: List[FindingChange] = field(default_factory=list)
    findings_removed: List[FindingChange] = field(default_factory=list)
    environment: List[EnvironmentChange] = field(default_factory=list)
    """What changed in the environment between the two runs (empty when either has no fingerprint)."""
    old_passed: bool = True
    new_passed: bool = True

    @property
    def regressions(self) -> int:
        flipped = sum(1 for c in self.check_changes if c.regression)
        added_errors = sum(1 for f in self.findings_added if f.severity == "error")
        return flipped + len(self.worse) + added_errors + (1 if self.old_passed and not self.new_passed else 0)

    @property
    def passed(self) -> bool:
        return self.regressions == 0

    def summary(self) -> str:
        if self.passed:
            return (f"NO REGRESSION: {self.compared_kind} {self.old_source} -> {self.new_source} "
                    f"({len(self.better)} value(s) improved beyond tolerance {self.tolerance:g})")
        parts = []
        flipped = [c for c in self.check_changes if c.regression]
        if flipped:
            parts.append(f"{len(flipped)} check(s) now failing (e.g. {flipped[0].name})")
        if self.worse:
            w = self.worse[0]
            parts.append(f"{len(self.worse)} value(s) worse beyond tolerance (e.g. {w.metric} of {w.key}: "
                         f"{w.old:.6g} -> {w.new:.6g})")
        errors = [f for f in self.findings_added if f.severity == "error"]
        if errors:
            parts.append(f"{len(errors)} new error finding(s) (e.g. {errors[0].rule})")
        if self.old_passed and not self.new_passed and not parts:
            parts.append("the verdict went from pass to fail")
        return f"REGRESSION: {'; '.join(parts)}"
