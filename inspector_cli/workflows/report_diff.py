"""`diff_results`: regressions between two saved results of the same kind (`mi report --diff`)."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

from ..errors import UsageError
from ..results.base import Result
from ..results.report_diff import CheckChange, EnvironmentChange, FindingChange, ReportDiffResult, ValueChange

DEFAULT_TOLERANCE = 0.05


def worsening(old: float, new: float, higher_is_better: bool, bounded: bool) -> float:
    """Relative worsening of a value (> 0 worse, < 0 better).

    Lower-is-better values (errors, latency): (new - old) / |old|. Higher-is-better values bounded
    by 1 (cosine, top-k overlap): the same on the gap to 1, so cosine 0.9999 -> 0.9998 doubles the
    gap (+1.0). Other higher-is-better values (SQNR in dB): (old - new) / |old|.
    """
    if old == new or (math.isnan(old) and math.isnan(new)):
        return 0.0
    if math.isnan(new):
        return math.inf
    if math.isnan(old):
        return -math.inf
    if higher_is_better and bounded:
        old, new, higher_is_better = 1.0 - old, 1.0 - new, False
    if math.isinf(old) or math.isinf(new):
        worse = (new > old) != higher_is_better
        return math.inf if worse else -math.inf
    scale = max(abs(old), 1e-9)
    return (new - old) / scale if not higher_is_better else (old - new) / scale


def _check_changes(old: Result, new: Result) -> List[CheckChange]:
    before = {c.name: c for c in old.checks()}
    after = {c.name: c for c in new.checks()}
    changes = []
    for name in list(before) + [n for n in after if n not in before]:
        b, a = before.get(name), after.get(name)
        old_state = b.passed if b else None
        new_state = a.passed if a else None
        if old_state != new_state:
            source = a or b
            assert source is not None
            changes.append(CheckChange(name=name, group=source.group, old=old_state, new=new_state,
                                       message=source.message))
    return changes


def _value_changes(old: Result, new: Result, tolerance: float) -> Tuple[List[ValueChange], List[ValueChange]]:
    worse, better = [], []
    before = {v.metric: v for v in old.node_values()}
    for values in new.node_values():
        previous = before.get(values.metric)
        if previous is None:
            continue
        everything = [v for v in [*values.values.values(), *previous.values.values()] if math.isfinite(v)]
        bounded = values.higher_is_better and bool(everything) and max(everything) <= 1.0 and min(everything) >= -1.0
        for key, new_value in values.values.items():
            if key not in previous.values:
                continue
            old_value = previous.values[key]
            change = worsening(old_value, new_value, values.higher_is_better, bounded)
            entry = ValueChange(metric=values.metric, key=key, old=old_value, new=new_value, change=change)
            if change > tolerance:
                worse.append(entry)
            elif change < -tolerance:
                better.append(entry)
    worse.sort(key=lambda c: -c.change if math.isfinite(c.change) else -1e300)
    return worse, better


def _findings(result: Result) -> Dict[Tuple[str, Optional[str], Optional[str], str], FindingChange]:
    found = {}
    for f in getattr(result, "findings", []) or []:
        severity = getattr(f.severity, "value", str(f.severity))
        found[(f.rule, f.node, f.tensor, f.message)] = FindingChange(f.rule, severity, f.message, f.node, f.tensor)
    return found


def environment_changes(old: Result, new: Result) -> List[EnvironmentChange]:
    """Changed facts of the two runs' fingerprints (none when either result predates fingerprints)."""
    from ..core.fingerprint import diff_fingerprints

    if not old.fingerprint or not new.fingerprint:
        return []
    return [EnvironmentChange(c["key"], c["old"], c["new"]) for c in diff_fingerprints(old.fingerprint, new.fingerprint)]


def diff_results(old: Result, new: Result, *, tolerance: float = DEFAULT_TOLERANCE,
                 old_source: str = "old", new_source: str = "new") -> ReportDiffResult:
    """Checks that flipped, per-tensor values that got worse or better beyond `tolerance`, findings
    added and removed."""
    if old.kind != new.kind:
        raise UsageError(f"cannot diff a '{old.kind}' result ({old_source}) with a '{new.kind}' result ({new_source})",
                         hint="pass two results of the same command")
    if tolerance < 0:
        raise UsageError("--tolerance must not be negative")
    worse, better = _value_changes(old, new, tolerance)
    before, after = _findings(old), _findings(new)
    return ReportDiffResult(
        models=new.model_refs(), config={"tolerance": tolerance, "old": old_source, "new": new_source},
        compared_kind=new.kind, old_source=old_source, new_source=new_source, tolerance=tolerance,
        check_changes=_check_changes(old, new), worse=worse, better=better,
        findings_added=[f for k, f in after.items() if k not in before],
        findings_removed=[f for k, f in before.items() if k not in after],
        environment=environment_changes(old, new),
        old_passed=old.passed, new_passed=new.passed,
    )
