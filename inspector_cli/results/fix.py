"""The result of `mi fix` (issue 44): the cheapest remedies making a quantised model meet its targets.

Plain data like every result kind; filled by workflows/fix.py, drawn by render/fix_view.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .base import Check, Finding, ModelRef, NodeValues, Result, Severity
from .remedy import AccuracyRow, FallbackSection, Metrics, metric_text


@dataclass(frozen=True)
class FixChoiceRow:
    """One candidate of the plan and its remedy: `node` (the QDQ name), its fp32 name, the nodes it covers."""

    node: str
    fp32_node: str
    remedy: str
    nodes: List[str]
    op_type: str = ""


@dataclass(frozen=True)
class FixStepRow:
    """One measured variant of the search (the trade-off curve)."""

    action: str
    node: str
    float_nodes: int
    remedies: Dict[str, int]
    metrics: Metrics
    meets: bool
    latency_ms: float
    partial: int = 0
    """Stopped after this many samples, a target out of reach (its metrics are those samples'); 0: all."""


@dataclass(frozen=True)
class FixGroupRow:
    """A group the top-down search tried to re-quantise, and what keeping it in float bought."""

    name: str
    nodes: int
    kept_float: bool
    untried: bool
    requantised: Metrics


@dataclass(frozen=True)
class FixCost:
    """What the plan costs on the device."""

    float_nodes: int = 0
    tensors_16bit: int = 0
    per_channel_weights: int = 0
    recalibrated_tensors: int = 0
    added_bytes: Optional[int] = 0
    quantised_nodes: int = 0
    float_share: float = 0.0
    near_float: bool = False


@dataclass(frozen=True)
class FixPolish:
    """`--polish RUNS`: the nodes the plan left alone given `remedy` past the targets, and what it bought."""

    remedy: str
    nodes: List[str]
    before: Metrics
    after: Metrics
    runs: int
    ideal: bool
    """Every target's metric reached its best value (agreement or cosine 1, a drop or an error 0)."""
    candidates: int
    note: str = ""
    remedies: Dict[str, int] = field(default_factory=dict)
    """remedy -> nodes given it: each takes the costliest remedy short of float that applies to it
    (`remedy` is the costliest allowed)."""


@dataclass(frozen=True)
class FixResult(Result):
    """`mi fix FP32 QUANTISED`: the plan (choices with their remedies), its evidence, its cost and exports."""

    kind: ClassVar[str] = "fix"

    models: List[ModelRef]
    config: Dict[str, Any]
    runtime: Dict[str, Any]
    inputs: Dict[str, Any]
    mode: str
    """'qdq' (remedies of an int8 QDQ model) or 'fp16' (the fp32 block list of an fp16 conversion)."""
    found: bool
    targets: List[str]
    baseline: Metrics
    baseline_meets: bool
    final: Metrics
    remedies: List[str] = field(default_factory=list)
    """The remedies the search could choose from (`--remedies`), cheapest first."""
    choices: List[FixChoiceRow] = field(default_factory=list)
    cost: FixCost = field(default_factory=FixCost)
    strategy: str = ""
    """'none' (the quantised model meets), 'candidates' (bottom up), 'groups' (top down, spread or
    catastrophic error), 'fp16' (block list)."""
    no_answer: bool = False
    groups: List[FixGroupRow] = field(default_factory=list)
    steps: List[FixStepRow] = field(default_factory=list)
    runs: int = 0
    replayed: int = 0
    inferences: int = 0
    seconds: float = 0.0
    baseline_latency_ms: float = 0.0
    final_latency_ms: float = 0.0
    exports: Dict[str, Any] = field(default_factory=dict)
    """Per consumer: onnxruntime (nodes_to_exclude, TensorQuantOverrides, extra_options), nncf, modelopt."""
    ranges: Dict[str, List[Any]] = field(default_factory=dict)
    written_model: Optional[str] = None
    export_file: Optional[str] = None
    recheck: Metrics = field(default_factory=dict)
    recheck_meets: Optional[bool] = None
    labels: Optional[str] = None
    label_notes: List[str] = field(default_factory=list)
    accuracy: List[AccuracyRow] = field(default_factory=list)
    """Accuracy of fp32 and of the written plan against --labels (top-1/top-5)."""
    ranking: str = ""
    journal: Optional[str] = None
    budget_note: Optional[str] = None
    polish: Optional[FixPolish] = None
    skipped: Dict[str, str] = field(default_factory=dict)
    fp16: Optional[FallbackSection] = None
    """mode 'fp16': the block list (remedy section of compare, issue 18)."""
    findings: List[Finding] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def passed(self) -> bool:
        return not any(f.severity == Severity.ERROR for f in self.findings)

    def summary(self) -> str:
        if self.no_answer:
            strongest = self.remedies[-1] if self.remedies else "float"
            return f"no plan: even every candidate given {strongest} misses the targets"
        what = "plan found" if self.found else "NO plan meets the targets (best found)"
        cost = self.cost
        parts = (f"{cost.float_nodes} node(s) in float, {cost.tensors_16bit} tensor(s) at 16 bits, "
                 f"{cost.per_channel_weights} weight(s) per channel, {cost.recalibrated_tensors} re-calibrated")
        final = ", ".join(f"{k} {metric_text(v)}" for k, v in self.final.items())
        near = " (near-float)" if cost.near_float else ""
        return f"{what}: {parts}{near}; {final}; {self.runs} runs, {self.seconds:.1f} s"

    def checks(self) -> List[Check]:
        checks = [Check(name=f"target {t}", group="fix.targets", passed=bool(self.found),
                        message=f"{t}: {metric_text(self.final.get(t))}", value=self.final.get(t)) for t in self.targets]
        return checks + [c for c in super().checks() if c.group != "fix.gates"]

    def node_values(self) -> List[NodeValues]:
        order = {"calibration": 1.0, "per-channel": 2.0, "a16": 3.0, "a16+per-channel": 4.0, "float": 5.0}
        values = {n: order.get(c.remedy, 0.0) for c in self.choices for n in c.nodes}
        return [NodeValues("remedy cost rank", False, values, key="node", thresholds=[1.5, 3.5])] if values else []
