"""What every rule family gets: the model, the settings, and `report()` to record a finding.

`report` applies the user's rule settings (disabled rules are dropped, severities re-levelled), so
rule code never looks at them. Constant values (initializers and Constant nodes) are read lazily
and cached, one tensor at a time.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

import numpy as np
import onnx

from ..core.graph import ModelGraph
from ..core.types import TensorInfo
from ..core.weights import initializer_array
from ..results.base import Finding, Severity
from .catalog import RULES
from .config import ValidateConfig

REFUSAL_CAUSES = frozenset({"MI202", "MI203"})
"""Disputed rules (onnx's shape and type inference) whose finding, when onnxruntime refuses the model after
all, is why it did: its refusal is not reported again (MI404). MI201/MI204 are onnx's objections only."""


@dataclass
class Reporter:
    """Collects findings, honouring disabled rules and severity overrides."""

    config: ValidateConfig
    findings: List[Finding] = field(default_factory=list)
    disputed: Dict[int, Severity] = field(default_factory=dict)
    """Index in `findings` -> its level in onnxruntime's view, for what onnx's checker rejects and
    onnxruntime accepts (issue 41); `settle` applies it once the session said whether the model loads."""

    def enabled(self, rule_id: str) -> bool:
        return self.config.enabled(rule_id)

    def any_enabled(self, prefix: str) -> bool:
        """True when a rule whose ID starts with `prefix` (e.g. 'MI4') is enabled."""
        return any(self.config.enabled(r) for r in RULES if r.startswith(prefix))

    def report(self, rule_id: str, message: str, *, node: Optional[str] = None, tensor: Optional[str] = None,
               hint: Optional[str] = None, level: Optional[Severity] = None, runtime_level: Optional[Severity] = None,
               **data: Any) -> Optional[Finding]:
        """Record a finding. `level`: this finding's own level instead of the rule's (the user's --severity
        still wins); `runtime_level`: its level once onnxruntime's session loads the model (onnx's checker
        and onnxruntime disagree), applied by `settle`."""
        if rule_id not in RULES:
            raise KeyError(f"unknown rule {rule_id}")  # a bug in a rule module, not user input
        if not self.config.enabled(rule_id):
            return None
        severity = self.config.severity_of(rule_id, level or RULES[rule_id].severity)
        finding = Finding(rule=rule_id, severity=severity, message=message, node=node, tensor=tensor, hint=hint,
                          data={k: v for k, v in data.items() if v is not None})
        if runtime_level is not None:
            self.disputed[len(self.findings)] = runtime_level
        self.findings.append(finding)
        return finding

    def has_error_on(self, nodes: List[str], tensors: List[str]) -> bool:
        """Whether an earlier error finding already points at one of these nodes or tensors."""
        for index, f in enumerate(self.findings):
            if index in self.disputed and f.rule not in REFUSAL_CAUSES:
                continue  # the checker's objection, not why onnxruntime failed
            if f.severity.value == "error" and ((f.node and f.node in nodes) or (f.tensor and f.tensor in tensors)):
                return True
        return False

    def settle(self, loaded: Optional[bool]) -> None:
        """Level the findings where onnx's checker and onnxruntime disagree by onnxruntime's view, now that
        its session said whether the model loads (`loaded`; None: no session was built). Loaded: the
        runtime level, unless --strict or the user's --severity for the rule keeps the checker's. Every
        such message says which accepts what."""
        overridden = {rid for rid, _ in self.config.severity}
        for index, level in self.disputed.items():
            finding = self.findings[index]
            severity = finding.severity
            if loaded:
                kept = self.config.strict or finding.rule in overridden
                said = "onnx's checker rejects it; onnxruntime loads the model" + \
                    (" (--strict: the checker's view)" if self.config.strict else "")
                severity = severity if kept else level
            elif loaded is None:
                said = "onnx's checker rejects it; onnxruntime's session was not built"
            else:
                said = "onnx's checker rejects it, and onnxruntime does not load the model"
            runtime = "loads" if loaded else ("not asked" if loaded is None else "refuses")
            self.findings[index] = replace(finding, severity=severity, message=f"{finding.message} ({said})",
                                           data={**finding.data, "checker": "rejects", "onnxruntime": runtime})


@dataclass
class Context:
    """One model under validation."""

    path: Path
    graph: ModelGraph
    config: ValidateConfig
    reporter: Reporter
    notes: List[str] = field(default_factory=list)
    weights_readable: bool = True
    """False when external data is unsafe or missing: rules must not read tensor values."""
    _consts: Optional[Dict[str, onnx.TensorProto]] = None
    _values: Dict[str, Optional[np.ndarray]] = field(default_factory=dict)

    def report(self, rule_id: str, message: str, **kwargs: Any) -> Optional[Finding]:
        return self.reporter.report(rule_id, message, **kwargs)

    def info(self, tensor: str) -> TensorInfo:
        return self.graph.tensor_info(tensor)

    def const_proto(self, name: str) -> Optional[onnx.TensorProto]:
        """The stored tensor behind a top-level initializer or Constant output, if any."""
        if self._consts is None:
            consts = {t.name: t for t in self.graph.model.graph.initializer}
            for node in self.graph.model.graph.node:
                if node.op_type == "Constant" and node.output:
                    for attr in node.attribute:
                        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                            consts[node.output[0]] = attr.t
            self._consts = consts
        return self._consts.get(name)

    def const_value(self, name: str) -> Optional[np.ndarray]:
        """Value of a constant tensor (None when not constant, unreadable, or weights are off-limits)."""
        if not name or not self.weights_readable:
            return None
        if name not in self._values:
            proto = self.const_proto(name)
            self._values[name] = initializer_array(self.graph, proto) if proto is not None else None
        return self._values[name]

    def int_attribute(self, node_name: str, attribute: str, default: int) -> int:
        """An integer attribute, or `default` when absent or malformed (the checker reports malformed ones)."""
        value = self.graph.node_attribute(node_name, attribute, default)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    def node_label(self, node_name: str) -> str:
        """"Add 'add_3'": how messages name a node."""
        node = self.graph.node_by_name.get(node_name)
        return f"{node.op_type} '{node_name}'" if node else f"'{node_name}'"

    def ancestors_within(self, start: str, members: Set[str]) -> List[str]:
        """Nodes of `members` that feed `start` through members only (not `start` itself), in the
        order a depth-first walk up the graph finds them. MI306 (dead code) and MI606 (constant
        subgraphs) name these as the nodes that go with `start`."""
        found: List[str] = []
        stack = [start]
        while stack:
            for tensor in self.graph.node_by_name[stack.pop()].all_inputs:
                producer = self.graph.producer.get(tensor)
                if producer is not None and producer.name in members and producer.name not in found \
                        and producer.name != start:
                    found.append(producer.name)
                    stack.append(producer.name)
        return found
