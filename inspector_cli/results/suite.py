"""Result of `mi run`: every step of a suite with its verdict, exit code and full result envelope."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from ..errors import EXIT_CANNOT_ANALYSE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from .base import ModelRef, Result


class StepStatus(str, enum.Enum):
    """What happened to one step."""

    PASSED = "passed"
    """Ran; exit 0."""
    FAILED = "failed"
    """Ran; a gate failed or a defect was found (exit 1)."""
    ERROR = "error"
    """Could not run: usage/config (2), cannot analyse (3), internal error (4), interrupted (130)."""
    NOT_RUN = "not-run"
    """Not started, because an earlier step could not run (no --keep-going)."""
    SKIPPED = "skipped"
    """Left out by --only / --skip."""


# Worst first: which exit code a suite reports when its steps disagree.
_SEVERITY = {EXIT_OK: 0, 1: 1, EXIT_USAGE: 2, EXIT_CANNOT_ANALYSE: 3, EXIT_INTERNAL: 4, EXIT_INTERRUPTED: 5}


def worst_exit_code(codes: List[int]) -> int:
    """The most severe of `codes` (0 < 1 gate failed < 2 usage < 3 cannot analyse < 4 bug < 130)."""
    return max(codes, key=lambda c: _SEVERITY.get(c, 4), default=EXIT_OK)


@dataclass(frozen=True)
class SuiteStep:
    """One step of a suite: which command, how it went, and the command's own result envelope."""

    name: str
    kind: str
    status: StepStatus
    exit_code: Optional[int] = None
    summary: str = ""
    seconds: float = 0.0
    line: int = 0
    """Line of the step in the suite file."""
    options: Dict[str, Any] = field(default_factory=dict)
    """The step's resolved options (suite defaults, then the step's own keys), as the command got them."""
    result: Optional[Dict[str, Any]] = None
    """The command's full JSON envelope (kind, models, config, inputs, verdict, results)."""

    @property
    def ran(self) -> bool:
        return self.status in (StepStatus.PASSED, StepStatus.FAILED, StepStatus.ERROR)


@dataclass(frozen=True)
class SuiteResult(Result):
    """Everything `mi run` did; `exit_code` is the worst exit code of the steps that ran."""

    kind: ClassVar[str] = "suite"

    suite: str
    steps: List[SuiteStep]
    config: Dict[str, Any] = field(default_factory=dict)
    models: List[ModelRef] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        ran = [s for s in self.steps if s.status != StepStatus.SKIPPED]
        return all(s.status == StepStatus.PASSED for s in ran)

    @property
    def exit_code(self) -> int:
        return worst_exit_code([s.exit_code for s in self.steps if s.exit_code is not None])

    def checks(self) -> List[Any]:
        """One check per step (did it pass), then each step's own checks, named after the step.

        For JUnit and run-to-run diffs. Uses results.base.Check, which the report writers bring.
        """
        from .document import result_from_document
        from .base import Check  # type: ignore[attr-defined]

        checks: List[Any] = []
        for step in self.steps:
            if step.status == StepStatus.SKIPPED:
                continue
            checks.append(Check(name=f"step {step.name}", group="suite.steps",
                                passed=step.status == StepStatus.PASSED, message=step.summary))
            if step.result is not None:
                inner = result_from_document(step.result, f"step {step.name}")
                checks.extend(Check(name=f"{step.name}: {c.name}", group=f"suite.{step.name}.{c.group}",
                                    passed=c.passed, message=c.message, value=c.value, threshold=c.threshold)
                              for c in inner.checks())
        return checks

    def counts(self) -> Dict[str, int]:
        counts = {status.value: 0 for status in StepStatus}
        for step in self.steps:
            counts[step.status.value] += 1
        return counts

    def summary(self) -> str:
        counts = self.counts()
        run = len(self.steps) - counts["skipped"]
        parts = [f"{counts['passed']} passed"]
        for status, label in ((StepStatus.FAILED, "failed"), (StepStatus.ERROR, "could not run"),
                              (StepStatus.NOT_RUN, "not run"), (StepStatus.SKIPPED, "skipped")):
            names = [s.name for s in self.steps if s.status == status]
            if names:
                shown = ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")
                parts.append(f"{len(names)} {label} ({shown})")
        verdict = "PASS" if self.passed else "FAIL"
        return f"{verdict}: {run} step{'s' if run != 1 else ''}: " + ", ".join(parts)
