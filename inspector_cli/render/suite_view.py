"""Table of a `SuiteResult`: one row per step with its verdict, exit code, time and summary."""
from __future__ import annotations

from ..results.suite import StepStatus, SuiteResult
from .table import FAIL, MUTED, OK, WARN, Cell, Table, View

_STATUS = {
    StepStatus.PASSED: ("PASS", OK),
    StepStatus.FAILED: ("FAIL", FAIL),
    StepStatus.ERROR: ("ERROR", FAIL),
    StepStatus.NOT_RUN: ("not run", WARN),
    StepStatus.SKIPPED: ("skipped", MUTED),
}


def suite_view(result: SuiteResult) -> View:
    """The suite as one table, then the verdict line."""
    table = Table(title=f"suite {result.suite}", columns=["#", "step", "kind", "result", "exit", "time", "summary"],
                  numeric=[True, False, False, False, True, True, False])
    for number, step in enumerate(result.steps, start=1):
        label, status = _STATUS[step.status]
        exit_text = "" if step.exit_code is None else str(step.exit_code)
        time_text = f"{step.seconds:.1f} s" if step.ran else ""
        summary = step.summary if step.status != StepStatus.SKIPPED else "left out by --only/--skip"
        table.add(str(number), step.name, step.kind, Cell(label, status), Cell(exit_text, status), time_text,
                  Cell(summary, MUTED if not step.ran else None))
    return View(tables=[table], verdict=result.summary(), passed=result.passed)
