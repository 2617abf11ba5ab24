"""Result of a sequence run: models A and B (or one model) stepped through time with their state fed back.

Holds the state wiring, per-output and per-state summaries over steps (worst value, the step it
occurred at, mean), the first step where a gate fails / the decision differs / a value turns
non-finite, whether the divergence was born in the state or in the step's own computation, the
decode summary for causal LMs, and a bounded time-line for the HTML chart.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .base import Check, Finding, GateOutcome, ModelRef, NodeValues, Result, Severity


@dataclass(frozen=True)
class WiringRow:
    """One fed-back tensor: `output` of step t becomes `input` of step t+1."""

    input: str
    output: str
    dtype: str
    shape: str
    kv_cache: bool = False
    source: str = "auto"


@dataclass(frozen=True)
class StepSummary:
    """One compared tensor (a step output, or a state) over all steps."""

    tensor: str
    role: str
    """'output' or 'state'."""
    worst: Dict[str, Optional[float]] = field(default_factory=dict)
    worst_step: Dict[str, int] = field(default_factory=dict)
    mean: Dict[str, Optional[float]] = field(default_factory=dict)
    last: Dict[str, Optional[float]] = field(default_factory=dict)
    nonfinite: Dict[str, int] = field(default_factory=dict)
    """NaN/Inf element counts summed over the steps: nonfinite_a, nonfinite_b (NaN + Inf of each
    model), nonfinite_mismatch (positions not finite in both and not the same Inf: a NaN always),
    nonfinite_same (the same Inf in both, e.g. a mask: equal), 'steps' with a mismatch and the
    'first_step' of them. Empty when every value was finite."""


@dataclass(frozen=True)
class Divergence:
    """The first step where A and B part, and where the difference comes from."""

    step: int
    trigger: str
    """'gate', 'decision' or 'token'."""
    detail: str
    born: str
    """'state' (B's step with A's state agrees with A: the error was carried in), 'step' (it does not)
    or 'unknown' (no replay possible, e.g. step 0 has no carried state)."""
    replay: Dict[str, Optional[float]] = field(default_factory=dict)
    """Metrics of A's output vs B's output when B is fed A's state at this step."""
    replay_agrees: Optional[bool] = None
    state_cosine: Optional[float] = None
    """Cosine of A's vs B's state going into this step (worst over the state tensors)."""


@dataclass(frozen=True)
class NonFiniteStep:
    """The first step at which a model produced NaN/Inf in an output or its state."""

    step: int
    model: str
    """'A' or 'B'."""
    tensors: List[str]
    in_state: bool
    """True when a fed-back state tensor is among them."""
    inputs_finite: bool = True
    """Whether the step's inputs (including the carried state) were all finite."""
    handoff: Optional[str] = None
    """An .npz holding every model input at that step (step inputs + state): one nan-bisect sample."""
    repro: Optional[str] = None


@dataclass(frozen=True)
class DecodeSummary:
    """Greedy decoding of both models from the same prompt."""

    mode: str
    """'free-running' (each model on its own tokens) or 'teacher-forced' (both on A's tokens)."""
    prompt_length: int
    steps: int
    tokens_a: List[int] = field(default_factory=list)
    tokens_b: List[int] = field(default_factory=list)
    agreement: float = 1.0
    """Fraction of steps where both models chose the same token."""
    first_difference: Optional[int] = None
    """First decode step (0 = the token after the prompt) where the tokens differ."""
    prompt: int = 0
    """Index of the prompt in the prompts given (0 with a single prompt)."""


@dataclass(frozen=True)
class Timeline:
    """A metric per step, bounded: each point is the worst value over `bucket` consecutive steps."""

    metric: str
    tensor: str
    bucket: int
    steps: List[int] = field(default_factory=list)
    values: List[Optional[float]] = field(default_factory=list)
    drift: List[Optional[float]] = field(default_factory=list)
    """Worst state cosine per bucket (empty without state or without a model B)."""


@dataclass(frozen=True)
class StepLayer:
    """One intermediate tensor at the diverging step (both models fed the step's inputs and A's state)."""

    tensor: str
    op: str
    cosine: Optional[float] = None
    max_abs: Optional[float] = None
    failed: bool = False


@dataclass(frozen=True)
class StepLayers:
    """`--layers` in sequence mode: the layer comparison of the first diverging step.

    Both models run that step on the same inputs: the step's own inputs and the state A carried into
    it, so the rows show where inside the step B's computation departs from A's."""

    step: int
    first_divergence: Optional[str] = None
    layers: List[StepLayer] = field(default_factory=list)
    """In A's topological order."""
    worst: List[str] = field(default_factory=list)
    """The layers with the lowest cosine, worst first."""
    sample: Optional[str] = None
    """The .npz holding the step's inputs and A's state (kept with --repro)."""
    notes: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class SequenceResult(Result):
    """A sequence run: per-step comparison of A and B (or one model's NaN scan) with state fed back."""

    kind: ClassVar[str] = "sequence"

    models: List[ModelRef]
    mode: str
    """'compare', 'decode' or 'scan' (one model, non-finite check only)."""
    wiring: List[WiringRow]
    steps: int
    resumed_steps: int = 0
    outputs: List[StepSummary] = field(default_factory=list)
    states: List[StepSummary] = field(default_factory=list)
    gates: List[GateOutcome] = field(default_factory=list)
    first_gate_failure: Optional[int] = None
    decision_output: Optional[str] = None
    first_decision_difference: Optional[int] = None
    decision_agreement: Optional[float] = None
    divergence: Optional[Divergence] = None
    nonfinite: Optional[NonFiniteStep] = None
    decode: Optional[DecodeSummary] = None
    """Decode mode: the prompt's summary; with several prompts the first prompt whose tokens differ
    (else the first prompt)."""
    decode_runs: List[DecodeSummary] = field(default_factory=list)
    """With several prompts: one summary per prompt, in order (their steps are numbered across the
    run: prompt i's decode step k is step i * steps + k)."""
    timeline: Optional[Timeline] = None
    layers: Optional[StepLayers] = None
    """With --layers: the layer comparison of the first diverging step."""
    source: Dict[str, Any] = field(default_factory=dict)
    journal: Optional[str] = None
    config: Dict[str, Any] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    nonfinite_allowed: bool = False
    """`--allow-nonfinite`: the non-finite step is reported but does not fail the run."""

    @property
    def failed_gates(self) -> List[GateOutcome]:
        return [g for g in self.gates if g.applicable and not g.passed]

    @property
    def passed(self) -> bool:
        errors = [f for f in self.findings if f.severity == Severity.ERROR]
        return not self.failed_gates and (self.nonfinite is None or self.nonfinite_allowed) and not errors

    def summary(self) -> str:
        what = f"{self.steps} step(s)" + (f" ({self.resumed_steps} resumed)" if self.resumed_steps else "")
        parts: List[str] = []
        if self.nonfinite is not None:
            n = self.nonfinite
            parts.append(f"model {n.model} turns non-finite at step {n.step} "
                         f"({', '.join(n.tensors[:3])}{', state' if n.in_state else ''})")
        if self.first_gate_failure is not None:
            parts.append(f"first gate failure at step {self.first_gate_failure}")
        if len(self.decode_runs) > 1:
            differing = [r for r in self.decode_runs if r.first_difference is not None]
            parts.append(f"tokens differ in {len(differing)} of {len(self.decode_runs)} prompts")
            if differing:
                parts.append(f"first differing token at step {differing[0].first_difference} of prompt "
                             f"{differing[0].prompt} (agreement {differing[0].agreement:.1%})")
        elif self.decode is not None and self.decode.first_difference is not None:
            parts.append(f"first differing token at step {self.decode.first_difference} "
                         f"(agreement {self.decode.agreement:.1%})")
        elif self.first_decision_difference is not None:
            parts.append(f"decision of '{self.decision_output}' first differs at step {self.first_decision_difference}")
        if self.divergence is not None and self.divergence.born != "unknown":
            parts.append(f"born in the {self.divergence.born}")
        head = "PASS" if self.passed else "FAIL"
        if not parts:
            gates = f"all {len(self.gates)} gate checks passed" if self.gates else "no gates set"
            return f"{head}: {what}; {gates}"
        return f"{head}: {what}; " + "; ".join(parts)

    def checks(self) -> List[Check]:
        checks = super().checks()
        if self.mode != "decode" or self.nonfinite is not None:
            checks.append(Check(name="non-finite values", group="sequence.nonfinite",
                                passed=self.nonfinite is None or self.nonfinite_allowed,
                                message="" if self.nonfinite is None else
                                f"step {self.nonfinite.step}: {', '.join(self.nonfinite.tensors)}"))
        return checks

    def node_values(self) -> List[NodeValues]:
        """Worst cosine per step output and per state over all steps."""
        values = {s.tensor: s.worst["cosine"] for s in self.outputs + self.states
                  if s.worst.get("cosine") is not None}
        return [NodeValues("cosine", True, values, thresholds=[0.99, 0.999])] if values else []
