"""Result of `mi inspect`: the model's scope tree, node facts (--find, --node) and a structural diff (--diff).

Nothing is run: every fact is static (names, shapes from ONNX shape inference, stored weights,
quantisation parameters). FLOPs and bytes count dynamic dimensions as 1 (`dynamic_dims`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .base import ModelRef, NodeValues, Result
from .scopes import ScopeMap


@dataclass(frozen=True)
class TensorFact:
    name: str
    dtype: str = ""
    shape: str = "?"
    kind: str = "activation"
    """activation, input (of the model), output (of the model), weight (initializer) or constant."""


@dataclass(frozen=True)
class ParamSummary:
    """A quantisation parameter: its value, or per-channel min/max/count."""

    tensor: str
    count: int
    min: Optional[float] = None
    max: Optional[float] = None
    dtype: str = ""


@dataclass(frozen=True)
class QuantFact:
    """Scale and zero point of a quantising op, for one of its tensors (input, output, weight)."""

    role: str
    scale: Optional[ParamSummary] = None
    zero_point: Optional[ParamSummary] = None
    axis: Optional[int] = None


@dataclass(frozen=True)
class NodeFacts:
    """Everything static about one node."""

    name: str
    op_type: str
    domain: str
    scope: str
    order: int
    attributes: Dict[str, str] = field(default_factory=dict)
    inputs: List[TensorFact] = field(default_factory=list)
    outputs: List[TensorFact] = field(default_factory=list)
    params: int = 0
    flops: Optional[int] = None
    quant: List[QuantFact] = field(default_factory=list)
    producers: List[str] = field(default_factory=list)
    consumers: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class NodeBrief:
    """A node in the map: name, op, scope, and its edges (tensor names) for drawings."""

    name: str
    op_type: str
    scope: str
    inputs: List[str] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    flops: Optional[int] = None
    activation_bytes: int = 0


@dataclass(frozen=True)
class ScopeChange:
    """How one scope differs between model A and model B."""

    scope: str
    """Scope path in A ('' when only in B)."""
    other: str
    """Matching scope path in B ('' when only in A)."""
    matched_by: str
    """name, structure, or unmatched."""
    nodes_a: int
    nodes_b: int
    changed: bool
    added: Dict[str, int] = field(default_factory=dict)
    removed: Dict[str, int] = field(default_factory=dict)
    replaced: List[str] = field(default_factory=list)
    """'Softmax -> HardSigmoid': an op of A whose place B takes with another op."""
    fused: List[str] = field(default_factory=list)
    """'Conv+BatchNormalization -> Conv': consecutive ops of A that B does as fewer ops."""
    qdq_inserted: int = 0
    """QuantizeLinear/DequantizeLinear nodes B has and A has not."""
    boundary: List[str] = field(default_factory=list)
    """Boundary tensors whose dtype or shape changed: 'out x: float32[1,4] -> float16[1,4]'."""
    summary: str = ""


@dataclass(frozen=True)
class InspectResult(Result):
    """What `mi inspect` found; `passed` is always true (inspect reports, it does not gate)."""

    kind: ClassVar[str] = "inspect"

    models: List[ModelRef]
    config: Dict[str, Any]
    mode: str
    """tree, find, node or diff."""
    depth: int
    scope_map: ScopeMap
    nodes: List[NodeBrief]
    model_inputs: List[TensorFact] = field(default_factory=list)
    model_outputs: List[TensorFact] = field(default_factory=list)
    opsets: Dict[str, int] = field(default_factory=dict)
    dynamic_dims: bool = False
    pattern: str = ""
    matches: List[NodeFacts] = field(default_factory=list)
    other_map: Optional[ScopeMap] = None
    other_nodes: List[NodeBrief] = field(default_factory=list)
    changes: List[ScopeChange] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return True

    def summary(self) -> str:
        root = self.scope_map.scopes[0] if self.scope_map.scopes else None
        text = f"{self._node_count()} nodes in {self._scope_count()} scopes ({self.scope_map.source})"
        if root is not None:
            text += f", {root.params:,} parameters"
        if self.mode == "find":
            text += f"; {len(self.matches)} node(s) match '{self.pattern}'"
        if self.mode == "diff":
            differing = sum(1 for c in self.changes if c.changed)
            text += f"; {differing} of {len(self.changes)} scopes differ"
        return text

    def _node_count(self) -> int:
        return len(self.nodes)

    def _scope_count(self) -> int:
        return len(self.scope_map.scopes) - 1

    def node_values(self) -> List[NodeValues]:
        """Static per-node numbers for the map and Model Explorer: FLOPs and activation bytes."""
        flops = {n.name: float(n.flops) for n in self.nodes if n.flops is not None}
        act = {n.name: float(n.activation_bytes) for n in self.nodes}
        return [NodeValues(metric="flops", higher_is_better=False, values=flops, key="node"),
                NodeValues(metric="activation_bytes", higher_is_better=False, values=act, key="node", unit="B")]


@dataclass(frozen=True)
class InspectTable(InspectResult):
    """An `InspectResult` made only to be printed as a table (`mi inspect` without --json, --html or a
    suite): its scope map stops at `depth` and it has no node list, so its counts are kept apart."""

    node_count: int = 0
    scope_count: int = 0

    def _node_count(self) -> int:
        return self.node_count

    def _scope_count(self) -> int:
        return self.scope_count
