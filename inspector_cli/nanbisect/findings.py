"""Findings of a nan-bisect run (stable rule ids MI6xx), from the static pass and the groups."""
from __future__ import annotations

from typing import List, Sequence

from ..core.identities import static_empty_reductions
from ..core.masks import Mask, MaskAnalysis
from ..results.base import Finding, Severity
from ..results.nan_bisect import Group, WeightIssue
from .batch import Summary

RULES = {"static": "MI901", "origin": "MI902", "masked": "MI903", "fp16-overflow": "MI904",
         "fp16-underflow": "MI905", "error": "MI906", "mask": "MI907", "empty-reduction": "MI908"}


def mask_findings(masks: Sequence[Mask]) -> List[Finding]:
    """MI907 (info): one per mask recognised (core/masks.py), naming its constants and nodes."""
    return [
        Finding(rule=RULES["mask"], severity=Severity.INFO, node=mask.nodes[0] if mask.nodes else None,
                tensor=(*mask.constants, *mask.inputs)[0],
                message=f"{mask.describe()}: its infinities are intended, not weights holding Inf nor NaN/Inf births",
                data={"constants": list(mask.constants), "nodes": list(mask.nodes), "ends": list(mask.ends),
                      "inputs": list(mask.inputs)})
        for mask in masks]


def intended_findings(analysis: MaskAnalysis) -> List[Finding]:
    """MI907 per mask, MI908 (info) per reduction whose input is empty by its static shape: its
    infinity is the documented answer over an empty set (core/identities.py), not a NaN/Inf birth."""
    findings = mask_findings(analysis.masks)
    for entry, shape in static_empty_reductions(analysis.graph, analysis.empty):
        value = "-inf" if entry.sign < 0 else "+inf"
        what = "the log of its empty sum" if entry.op_type == "ReduceSum" else f"{entry.op_type} of no element"
        findings.append(Finding(
            rule=RULES["empty-reduction"], severity=Severity.INFO, node=entry.node, tensor=entry.data,
            message=f"{entry.node} ({entry.op_type}) reduces '{entry.data}' of shape {shape}, which holds no element: "
                    f"its {value} ({what}) is the documented answer, not a NaN/Inf birth",
            data={"data": entry.data, "shape": shape, "sign": entry.sign}))
    return findings


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
