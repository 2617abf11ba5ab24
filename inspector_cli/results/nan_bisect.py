"""Result of `mi nan-bisect`: where NaN/Inf values are born, for which samples, and why.

A run produces one `SampleRecord` per sample (also written as one JSONL line each) and a
`NanBisectResult` that summarises them: failing samples grouped by origin node, the static pass
over the weights, masked values (`--deep`) and fp16 range events (`--simulate fp16`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from ..errors import EXIT_CANNOT_ANALYSE, EXIT_GATE_FAILED, EXIT_INTERRUPTED, EXIT_OK
from .base import Check, Finding, ModelRef, NodeValues, Result, Severity
from .placement import PartitionChange, Placement
from .scope_section import ScopeSection
from .remedy import RemedySection


@dataclass(frozen=True)
class TensorStats:
    """Value statistics of one tensor (min/max over its finite values; None when it has none)."""

    name: str
    dtype: str
    shape: List[int]
    count: int
    nan: int = 0
    inf: int = 0
    zeros: int = 0
    negatives: int = 0
    min: Optional[float] = None
    max: Optional[float] = None
    source: str = "computed"
    """'computed' (a node's output), 'input' (of the sample) or 'initializer' (a weight)."""

    @property
    def nonfinite(self) -> int:
        return self.nan + self.inf


@dataclass(frozen=True)
class Hint:
    """A rule-based explanation of why a node produced NaN/Inf; `rule` is a stable id."""

    rule: str
    message: str


@dataclass(frozen=True)
class Transition:
    """A later node where Inf values from the origin became NaN (e.g. Inf - Inf)."""

    node: str
    op_type: str
    hints: List[Hint] = field(default_factory=list)


@dataclass(frozen=True)
class NestedOrigin:
    """Where, inside an If/Loop/Scan body, the non-finite values appear."""

    attribute: str
    """The body: 'then_branch', 'else_branch' or 'body'."""
    node: Optional[str] = None
    op_type: Optional[str] = None
    iteration: Optional[int] = None
    hints: List[Hint] = field(default_factory=list)
    inputs: List[TensorStats] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class Origin:
    """A node whose computed inputs are all finite and one of whose outputs is not."""

    node: str
    op_type: str
    position: int
    """Position of the node in topological order."""
    outputs: List[TensorStats]
    inputs: List[TensorStats] = field(default_factory=list)
    attributes: Dict[str, Any] = field(default_factory=dict)
    hints: List[Hint] = field(default_factory=list)
    reaches_outputs: bool = True
    """False for masked values (`--deep`): they never reach a model output."""
    nested: Optional[NestedOrigin] = None
    nan_birth: Optional[Transition] = None

    @property
    def label(self) -> str:
        if self.op_type == "(input)":
            return f"input '{self.node}'"
        return f"{self.node} ({self.op_type})"

    def describe(self) -> str:
        """One line: the node, what it produced and the first hint."""
        nan = sum(o.nan for o in self.outputs)
        inf = sum(o.inf for o in self.outputs)
        what = " and ".join(p for p in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "") if p) or "non-finite values"
        if self.op_type == "(input)":  # NaN/Inf fed in by the sample, not born in the model
            return self.hints[0].message if self.hints else f"input '{self.node}' of the sample holds {what}"
        inputs = "a fully masked row" if self.hints and self.hints[0].rule == "fully-masked-row" else "finite inputs"
        text = f"{self.node} ({self.op_type}) produced {what} from {inputs}"
        if self.nested is not None:
            inner = f" at node '{self.nested.node}' ({self.nested.op_type})" if self.nested.node else ""
            when = f", iteration {self.nested.iteration}" if self.nested.iteration is not None else ""
            text += f"; they are born inside its {self.nested.attribute}{inner}{when}"
        if self.hints:
            text += f": {self.hints[0].message}"
        return text


@dataclass(frozen=True)
class RangeEvent:
    """`--simulate fp16`: a tensor whose fp32 values would not survive conversion to fp16."""

    tensor: str
    node: str
    op_type: str
    position: int
    rule: str
    """'fp16-overflow' (|x| > 65504) or 'fp16-underflow' (non-zero values below 6e-8 flush to 0)."""
    max_abs: float
    count: int
    """Number of elements concerned."""
    total: int
    message: str = ""


@dataclass(frozen=True)
class SampleRecord:
    """Everything found for one sample; one JSONL line. Deterministic (no timings), so a resumed
    run writes the same lines as an uninterrupted one."""

    sample: str
    status: str
    """'clean', 'nonfinite' (outputs hold NaN/Inf), 'masked' (only masked values, --deep),
    'fp16' (only fp16 range events, --simulate), or 'error'."""
    outputs: Dict[str, Dict[str, int]] = field(default_factory=dict)
    """Non-finite outputs: name -> {'nan': n, 'inf': m}."""
    origin: Optional[Origin] = None
    origins: List[Origin] = field(default_factory=list)
    """With `--all`: every origin reaching the outputs (the first is `origin`); else empty."""
    masked: List[Origin] = field(default_factory=list)
    fp16: List[RangeEvent] = field(default_factory=list)
    strategy: str = ""
    runs: int = 0
    inputs_nonfinite: Dict[str, Dict[str, int]] = field(default_factory=dict)
    error: Optional[str] = None
    repro: Optional[str] = None
    intended: Dict[str, Dict[str, int]] = field(default_factory=dict)
    """Outputs whose NaN/Inf are all intended (a mask's -inf, a reduction's identity over an empty
    set: findings MI907/MI908): name -> {'nan': n, 'inf': m}. They do not make the sample fail."""

    @property
    def failed(self) -> bool:
        return self.status in ("nonfinite", "masked", "fp16")


@dataclass(frozen=True)
class WeightIssue:
    """Static pass: an initializer (or Constant) holding NaN/Inf, with the nodes that read it."""

    tensor: str
    nan: int
    inf: int
    size: int
    consumers: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Group:
    """Failing samples sharing an origin node (or a masked node, or an fp16 tensor)."""

    node: str
    op_type: str
    kind: str
    """'origin', 'masked', 'fp16-overflow', 'fp16-underflow' or 'error'."""
    samples: int
    examples: List[str] = field(default_factory=list)
    hint: Optional[str] = None
    message: str = ""


@dataclass(frozen=True)
class NanBisectResult(Result):
    """Summary of a `mi nan-bisect` run; `records` holds the failing samples' details."""

    kind: ClassVar[str] = "nan-bisect"

    models: List[ModelRef]
    config: Dict[str, Any]
    runtime: Dict[str, Any]
    inputs: Dict[str, Any]
    plan: Dict[str, Any] = field(default_factory=dict)
    static: List[WeightIssue] = field(default_factory=list)
    samples_total: int = 0
    scanned: int = 0
    resumed: int = 0
    nonfinite: int = 0
    masked: int = 0
    fp16: int = 0
    errors: int = 0
    intended: int = 0
    """Samples whose outputs hold only intended NaN/Inf (records' `intended`)."""
    groups: List[Group] = field(default_factory=list)
    records: List[SampleRecord] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    runs: int = 0
    interrupted: bool = False
    jsonl: Optional[str] = None
    elapsed_s: float = 0.0
    scopes: Optional[ScopeSection] = None
    placement: Optional[Placement] = None
    """Which provider ran each node as deployed (results/placement.py)."""
    partition: Optional[PartitionChange] = None
    """With a provider other than CPU: the scan session's partition (checkpoints exposed) against the plain one."""
    """Scopes of the model and the rows rolled up by scope (depth 1; `--group-by` picks another)."""
    remedy: Optional[RemedySection] = None
    """`--fallback-plan --reference fp32.onnx`: the fp32 block list of the fp16 conversion (issue 18)."""

    @property
    def found(self) -> bool:
        return bool(self.static) or self.nonfinite > 0 or self.masked > 0 or self.fp16 > 0

    @property
    def passed(self) -> bool:
        return not self.found and not any(f.severity == Severity.ERROR for f in self.findings)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.found:
            return EXIT_GATE_FAILED
        if self.errors:
            return EXIT_CANNOT_ANALYSE
        return EXIT_OK if self.passed else EXIT_GATE_FAILED

    def checks(self) -> List[Check]:
        """Finite weights, finite outputs over the scanned samples, then the error findings."""
        done = self.scanned + self.resumed
        checks = [Check(name="weights hold no NaN/Inf", group="nan-bisect.static", passed=not self.static,
                        message=", ".join(w.tensor for w in self.static[:5])),
                  Check(name="outputs stay finite", group="nan-bisect.samples", passed=self.nonfinite == 0,
                        message=self.summary(), value=float(self.nonfinite), threshold=0.0)]
        if self.masked or self.config.get("deep"):
            checks.append(Check(name="no masked NaN/Inf", group="nan-bisect.samples", passed=self.masked == 0,
                                message=f"{self.masked} of {done} sample(s)"))
        checks += [c for c in super().checks() if c.group.endswith("findings") and c.name.split()[0] != "MI902"]
        return checks

    def node_values(self) -> List[NodeValues]:
        """Samples whose NaN/Inf is born at each node (origin groups), keyed by node name."""
        origins = {g.node: float(g.samples) for g in self.groups if g.kind == "origin"}
        return [NodeValues(metric="origin_samples", higher_is_better=False, values=origins, key="node")] if origins else []

    def summary(self) -> str:
        done = self.scanned + self.resumed
        scope = f"{done}/{self.samples_total} sample(s)" + (" (interrupted)" if self.interrupted else "")
        parts: List[str] = []
        if self.static:
            parts.append(f"{len(self.static)} weight(s) hold NaN/Inf")
        if self.nonfinite:
            top = next((g for g in self.groups if g.kind == "origin"), None)
            where = f", first born at {top.node} ({top.op_type}) in {top.samples} of them" if top else ""
            if top is not None and top.op_type == "(input)":
                where = f", already in input '{top.node}' in {top.samples} of them"  # fed in, not born in the model
            parts.append(f"{self.nonfinite} sample(s) with NaN/Inf outputs{where}")
        if self.masked:
            parts.append(f"{self.masked} sample(s) with masked NaN/Inf")
        if self.fp16:
            parts.append(f"{self.fp16} sample(s) leave the fp16 range")
        if self.errors:
            parts.append(f"{self.errors} sample(s) could not be analysed")
        if self.found:
            return f"FOUND: {'; '.join(parts)} ({scope} scanned)"
        if self.errors:
            return f"INCOMPLETE: {'; '.join(parts)} ({scope} scanned)"
        if self.intended:
            return (f"CLEAN: no NaN/Inf but intended ones in {scope}; the outputs of {self.intended} hold such "
                    f"values (a mask's -inf, a reduction's answer over an empty set)")
        return f"CLEAN: no NaN/Inf in {scope}"


def origin_finding(origin: Origin, samples: int, examples: List[str], rule: str = "MI902") -> Finding:
    """The finding that reports one origin group."""
    severity = Severity.ERROR if origin.reaches_outputs else Severity.WARNING
    return Finding(rule=rule, severity=severity, node=origin.node,
                   tensor=origin.outputs[0].name if origin.outputs else None,
                   message=f"{origin.describe()} ({samples} sample(s), e.g. {', '.join(examples[:3])})",
                   hint=origin.hints[0].rule if origin.hints else None)
