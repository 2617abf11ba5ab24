"""Result of `mi validate`: findings with stable rule IDs, plus the `--against` structure and weight checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .base import Finding, ModelRef, Result, Severity


@dataclass(frozen=True)
class RuleInfo:
    """What a rule checks. IDs never change meaning: MI1xx loading ... MI7xx --against."""

    id: str
    name: str
    """PascalCase name, e.g. 'ShapeConflict' (SARIF's rule name)."""
    family: str
    severity: Severity
    """Default severity (YAML `severity:` or `--severity` re-levels it)."""
    title: str
    help: str


@dataclass(frozen=True)
class WeightCheck:
    """One quantised weight dequantised and compared with its float counterpart (`--against`)."""

    tensor: str
    """The quantised tensor in the validated model."""
    reference: str
    """The float tensor of the --against model."""
    node: str
    sqnr_db: float
    max_abs: float
    elements: int
    folded: str = ""
    """Name of the BatchNormalization folded into the reference before comparing ('' when none)."""


@dataclass(frozen=True)
class AgainstSection:
    """Structural comparison with the `--against` model (the reference) and the weight checks."""

    model: str
    op_counts: Dict[str, List[int]]
    """op type -> [count in the reference, count in the validated model]."""
    only_reference: List[str]
    only_model: List[str]
    signature: List[Dict[str, str]]
    """Inputs/outputs that differ: kind, name, reference ('float32 [1, 3]' or '-'), model."""
    nodes: List[int]
    qdq_pairs: List[int]
    quantized_ops: List[int]
    initializer_bytes: List[int]
    weights: List[WeightCheck] = field(default_factory=list)


SEVERITY_ORDER = (Severity.ERROR, Severity.WARNING, Severity.INFO)


@dataclass(frozen=True)
class ValidateResult(Result):
    """Everything `mi validate` found; `passed` is false when a finding is at or above `fail_on`."""

    kind: ClassVar[str] = "validate"

    models: List[ModelRef]
    config: Dict[str, Any]
    findings: List[Finding]
    fail_on: Severity = Severity.ERROR
    rules: List[RuleInfo] = field(default_factory=list)
    """Metadata of every rule that has a finding (for SARIF and re-rendering)."""
    checked: List[str] = field(default_factory=list)
    """Rule families that ran."""
    skipped: Dict[str, str] = field(default_factory=dict)
    """Family -> why it did not run (the model did not load, ...)."""
    notes: List[str] = field(default_factory=list)
    against: Optional[AgainstSection] = None
    runtime: Dict[str, Any] = field(default_factory=dict)
    timings: Dict[str, float] = field(default_factory=dict)
    """Seconds spent per family."""

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def failing(self) -> List[Finding]:
        return [f for f in self.findings if f.severity.rank >= self.fail_on.rank]

    @property
    def passed(self) -> bool:
        return not self.failing

    def checks(self) -> List[Any]:
        """CI checks (JUnit, run-to-run diffs): one failing check per finding at or above `fail_on`
        ('MI202 on node add_18'), and one passing check per family that ran without such a finding.

        `Check` comes from the reporting foundation's results.base; this branch predates it.
        """
        from . import base

        check = getattr(base, "Check")
        family = {r.id: r.family for r in self.rules}
        checks: List[Any] = []
        names: Dict[str, int] = {}
        for f in self.failing:
            where = f" on node {f.node}" if f.node else (f" on tensor {f.tensor}" if f.tensor else "")
            name = f"{f.rule}{where}"
            names[name] = names.get(name, 0) + 1
            if names[name] > 1:  # names identify checks across runs: keep them unique
                name = f"{name} #{names[name]}"
            checks.append(check(name=name, group=f"validate.{family.get(f.rule, 'rules')}", passed=False,
                                message=f"{f.severity.value}: {f.message}"))
        failed = {c.group for c in checks}
        for name in self.checked:
            if f"validate.{name}" not in failed:
                checks.append(check(name=f"{name} rules", group=f"validate.{name}", passed=True,
                                    message=f"no finding at {self.fail_on.value} or above"))
        return checks

    def node_values(self) -> List[Any]:
        """Per node, the worst severity found there (3 error, 2 warning, 1 info), for graph overlays."""
        from . import base

        worst: Dict[str, float] = {}
        for f in self.findings:
            if f.node:
                worst[f.node] = max(worst.get(f.node, 0.0), float(f.severity.rank + 1))
        if not worst:
            return []
        return [getattr(base, "NodeValues")(metric="validate_severity", higher_is_better=False, values=worst,
                                            key="node", thresholds=[1.5, 2.5])]

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(s)} {s.value}{'s' if self.count(s) != 1 and s != Severity.INFO else ''}"
                           for s in SEVERITY_ORDER)
        if self.passed:
            return f"PASS: {counts} (failing at {self.fail_on.value} or above)"
        first = self.failing[0]
        where = f" [{first.node}]" if first.node else ""
        more = f" (+{len(self.failing) - 1} more)" if len(self.failing) > 1 else ""
        return f"FAIL: {counts} (failing at {self.fail_on.value} or above); first: {first.rule}{where} {first.message}{more}"
