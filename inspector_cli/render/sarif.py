"""SARIF 2.1.0 for `mi validate`: one run, the rules that fired, one result per finding.

Code-scanning services (GitHub, GitLab, Azure DevOps) read this: the model file is the artifact,
the node (and tensor) the logical location, the finding's severity the level.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..results.base import Finding, Severity
from ..results.codec import to_jsonable
from ..results.validate import RuleInfo, ValidateResult
from ..version import __version__

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def artifact_uri(path: str) -> str:
    """Relative paths stay relative (repository-relative in CI); absolute ones become file:// URIs."""
    p = Path(path)
    return p.as_uri() if p.is_absolute() else p.as_posix()


def rule_descriptor(rule: RuleInfo) -> Dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.help},
        "help": {"text": rule.help, "markdown": f"**{rule.id} {rule.title}**\n\n{rule.help}"},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"family": rule.family, "tags": ["onnx", rule.family]},
    }


def _result(finding: Finding, index: int, uri: str, graph: str) -> Dict[str, Any]:
    logical: List[Dict[str, Any]] = []
    if finding.node:
        logical.append({"name": finding.node, "fullyQualifiedName": f"{graph}/{finding.node}", "kind": "function"})
    if finding.tensor:
        logical.append({"name": finding.tensor, "fullyQualifiedName": f"{graph}/{finding.tensor}",
                        "kind": "variable"})
    location: Dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": uri, "index": 0}}}
    if logical:
        location["logicalLocations"] = logical
    text = finding.message + (f" ({finding.hint})" if finding.hint else "")
    identity = "|".join([finding.rule, finding.node or "", finding.tensor or "", finding.message])
    properties: Dict[str, Any] = {}
    if finding.hint:
        properties["hint"] = finding.hint
    if finding.data:
        properties["data"] = to_jsonable(finding.data)
    out: Dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": index,
        "level": LEVELS[finding.severity],
        "message": {"text": text},
        "locations": [location],
        "partialFingerprints": {"miFinding/v1": hashlib.sha256(identity.encode()).hexdigest()[:32]},
    }
    if properties:
        out["properties"] = properties
    return out


def validate_to_sarif(result: ValidateResult, rules: Optional[List[RuleInfo]] = None) -> Dict[str, Any]:
    """The SARIF log of a validate result (`rules`: the descriptors to list, default the ones that fired)."""
    listed = list(rules) if rules is not None else list(result.rules)
    known = {r.id for r in listed}
    listed += [r for r in result.rules if r.id not in known]
    index = {r.id: i for i, r in enumerate(listed)}
    model = result.models[0] if result.models else None
    uri = artifact_uri(model.path) if model else "model.onnx"
    artifact: Dict[str, Any] = {"location": {"uri": uri}, "roles": ["analysisTarget"]}
    if model is not None:
        artifact["length"] = model.size_bytes
        if model.sha256:
            artifact["hashes"] = {"sha-256": model.sha256}
    graph = Path(model.path).name if model else "model"
    run: Dict[str, Any] = {
        "tool": {"driver": {"name": "mi", "fullName": "model-inspector validate", "version": __version__,
                            "semanticVersion": __version__, "rules": [rule_descriptor(r) for r in listed]}},
        "artifacts": [artifact],
        "invocations": [{"executionSuccessful": True,
                         "properties": {"failOn": result.fail_on.value, "checked": result.checked,
                                        "skipped": result.skipped}}],
        "results": [_result(f, index[f.rule], uri, graph) for f in result.findings if f.rule in index],
        "properties": {"verdict": result.summary(), "config": to_jsonable(result.config)},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def sarif_text(result: ValidateResult) -> str:
    return json.dumps(validate_to_sarif(result), indent=2, allow_nan=False, ensure_ascii=False)
