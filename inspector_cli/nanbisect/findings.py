"""Findings of a nan-bisect run (stable rule ids MI6xx), from the static pass and the groups."""
from __future__ import annotations

from typing import List, Sequence

from ..core.masks import Mask
from ..results.base import Finding, Severity
from ..results.nan_bisect import Group, WeightIssue
from .batch import Summary

RULES = {"static": "MI901", "origin": "MI902", "masked": "MI903", "fp16-overflow": "MI904",
         "fp16-underflow": "MI905", "error": "MI906", "mask": "MI907"}


def mask_findings(masks: Sequence[Mask]) -> List[Finding]:
    """MI907 (info): one per mask recognised (core/masks.py), naming its constants and nodes."""
    return [
        Finding(rule=RULES["mask"], severity=Severity.INFO, node=mask.nodes[0] if mask.nodes else None,
                tensor=mask.constants[0],
                message=f"{mask.describe()}: its infinities are intended, not weights holding Inf nor NaN/Inf births",
                data={"constants": list(mask.constants), "nodes": list(mask.nodes), "ends": list(mask.ends)})
        for mask in masks]


def build_findings(static: Sequence[WeightIssue], groups: Sequence[Group], summary: Summary) -> List[Finding]:
    findings: List[Finding] = []
    for issue in static:
        readers = ", ".join(issue.consumers[:5]) + (" ..." if len(issue.consumers) > 5 else "")
        findings.append(Finding(
            rule=RULES["static"], severity=Severity.ERROR, tensor=issue.tensor,
            node=issue.consumers[0] if issue.consumers else None,
            message=f"weight '{issue.tensor}' holds {issue.nan} NaN and {issue.inf} Inf of {issue.size} values; "
                    f"read by {readers or 'no node'}",
            hint="re-export the model from a healthy checkpoint", data={"consumers": list(issue.consumers)}))
    for group in groups:
        rule = RULES.get(group.kind, "MI902")
        severity = Severity.WARNING if group.kind == "masked" else Severity.ERROR
        examples = ", ".join(group.examples[:3])
        if group.kind == "error":
            message = f"{group.samples} sample(s) could not be analysed (e.g. {examples}): {group.message}"
        else:
            message = f"{group.message} [{group.samples} sample(s), e.g. {examples}]"
        findings.append(Finding(rule=rule, severity=severity, node=None if group.kind == "error" else group.node,
                                message=message, hint=group.hint,
                                data={"samples": group.samples, "examples": list(group.examples), "kind": group.kind}))
    return findings
