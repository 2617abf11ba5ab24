"""Result of `mi compare`: per-output metrics over all samples, gate outcomes and findings."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Optional

from .base import Finding, GateOutcome, ModelRef, NodeValues, Result, Severity
from .placement import PartitionChange, Placement

if TYPE_CHECKING:
    from .layers import LayerSection
    from .remedy import RemedySection
    from .scope_section import ScopeSection

# The layer, scope and remedy sections (~25 dataclasses) are imported on first use: an outputs-only
# comparison, what a CI gate runs most, never builds them (issue 16). Annotations stay strings;
# `codec.type_hints` resolves these names through the module's __getattr__ when a result is decoded.
_SECTIONS = {"LayerSection": ".layers", "ScopeSection": ".scope_section", "RemedySection": ".remedy"}


def __getattr__(name: str) -> Any:
    if name in _SECTIONS:
        value = getattr(importlib.import_module(_SECTIONS[name], __package__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

Metrics = Dict[str, Optional[float]]


@dataclass(frozen=True)
class SampleMetrics:
    """One sample's metrics for one output."""

    sample: str
    metrics: Metrics
    nonfinite_mismatch: int = 0
    shape_mismatch: bool = False
    unequal: Optional[int] = None
    """Values compared for equality (strings, labels, map keys) that differ on this sample; None when
    the output holds none."""
    nan_same: int = 0
    """Positions where both sides hold NaN on this sample (left out of the metrics; finding MI807)."""


@dataclass(frozen=True)
class Equality:
    """Equality counts of the strings, labels and map keys of a non-tensor output (no metric applies to them).

    Compared item by item; numbers inside sequences and maps get the usual metrics instead."""

    items: int
    """Values compared over all samples."""
    unequal: int
    """Of them, how many differ (0: all equal)."""
    unequal_samples: int = 0
    first_sample: Optional[str] = None
    """The first differing value: its sample, where inside the output ('[5]', '[1][0]'), both values."""
    first_at: Optional[str] = None
    first_a: Optional[str] = None
    first_b: Optional[str] = None


@dataclass(frozen=True)
class OutputDiff:
    """One output pair compared over every sample; non-tensor outputs: dtype string, seq(...) or map(...), shape [length], `equality`.

    A string output reads dtype `string`, its metrics null and its `equality` counts; a sequence
    `seq(tensor(float32))` with shape [its length], metrics over its tensors' values one after another; a
    ZipMap output `seq(map(int64,float32))`, metrics over the [rows, classes] matrix of probabilities (KL and
    top-k included). A sequence length, element shape or key set that differs is a shape mismatch (MI801)."""

    name: str
    """The reference model's (A's) output name."""
    name_b: str
    matched_by: str
    """'name', 'map' (the user's --map) or 'position' (names differed; counts, dtypes and shapes agreed)."""
    dtype_a: str
    dtype_b: str
    shape_a: List[int]
    shape_b: List[int]
    samples: int
    dataset: Metrics
    """Exact data-set-level values: all samples taken as one tensor (cosine, RMSE, SQNR, ...)."""
    worst: Metrics
    """Worst per-sample value of each metric."""
    mean: Metrics
    """Mean over samples of each per-sample metric."""
    nonfinite: Dict[str, int] = field(default_factory=dict)
    kl_mode: Optional[str] = None
    shape_mismatch_samples: int = 0
    per_sample: List[SampleMetrics] = field(default_factory=list)
    equality: Optional[Equality] = None
    """Non-tensor outputs: `dtype_a`/`dtype_b` read `string`, `seq(tensor(float32))`, `seq(map(int64,float32))`
    or `map(...)`, `shape_*` a sequence's length; numbers inside are measured by the metrics (a sequence's
    tensors as one, a ZipMap's probabilities as a [rows, classes] matrix), strings and labels here."""


@dataclass(frozen=True)
class CompareResult(Result):
    """Everything `mi compare` found; `passed` is what the exit code reports."""

    kind: ClassVar[str] = "compare"

    models: List[ModelRef]
    config: Dict[str, Any]
    runtime: Dict[str, Any]
    inputs: Dict[str, Any]
    outputs: List[OutputDiff]
    gates: List[GateOutcome]
    findings: List[Finding] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    unmatched_a: List[str] = field(default_factory=list)
    unmatched_b: List[str] = field(default_factory=list)
    samples: int = 0
    layers: Optional[LayerSection] = None
    """Layer-by-layer section (`--layers`)."""
    scopes: Optional[ScopeSection] = None
    """Scopes of the model and the rows rolled up by scope (depth 1; `--group-by` picks another)."""
    remedy: Optional[RemedySection] = None
    """Fallback plan, optimiser bisection, accuracy against labels (`--fallback-plan`, ... ; issue 18)."""
    placement: List[Placement] = field(default_factory=list)
    """Which provider ran each node of session A, then B, as deployed (results/placement.py)."""
    partition: List[PartitionChange] = field(default_factory=list)
    """With --layers, per model read by exposing tensors: its partition then against the plain session's."""

    def node_values(self) -> List[NodeValues]:
        """Cosine, max abs error and SQNR per compared tensor (data-set values), keyed by A's names:
        the layers in the reference's topological order (with --layers), then the outputs."""
        rows: List[NodeValues] = []
        sources = [(layer.name, layer.dataset) for layer in (self.layers.layers if self.layers else [])]
        sources += [(o.name, o.dataset) for o in self.outputs]
        for metric, higher, thresholds in (("cosine", True, [0.99, 0.999]), ("max_abs", False, []),
                                           ("sqnr", True, [20.0, 30.0])):
            values: Dict[str, float] = {}
            for name, dataset in sources:
                value = dataset.get(metric)
                if value is not None and name not in values:
                    values[name] = value
            rows.append(NodeValues(metric=metric, higher_is_better=higher, values=values, thresholds=thresholds))
        return rows

    @property
    def failed_gates(self) -> List[GateOutcome]:
        return [g for g in self.gates if not g.passed and g.scope == "output"]

    @property
    def failed_layer_gates(self) -> List[GateOutcome]:
        return [g for g in self.gates if not g.passed and g.scope == "layer"]

    @property
    def passed(self) -> bool:
        errors = [f for f in self.findings if f.severity == Severity.ERROR]
        layers_fail = bool(self.layers and self.layers.gates_affect_exit and self.failed_layer_gates)
        return not self.failed_gates and not errors and not layers_fail

    def summary(self) -> str:
        n_out, n_gates = len(self.outputs), len([g for g in self.gates if g.scope == "output"])
        layer_text = self._layer_summary()
        if self.passed:
            gates = f"all {n_gates} gate checks passed" if n_gates else "no gates set"
            return f"PASS: {n_out} output(s) compared over {self.samples} sample(s); {gates}{layer_text}"
        errors = [f.message for f in self.findings if f.severity == Severity.ERROR]
        layer_gates = self.failed_layer_gates if self.layers and self.layers.gates_affect_exit else []
        failed = self.failed_gates + layer_gates
        parts = [g.message() for g in failed[:3]] + errors[:3]
        more = len(failed) + len(errors) - len(parts)
        tail = f" (+{more} more)" if more > 0 else ""
        return f"FAIL: {'; '.join(parts)}{tail}{layer_text}"

    def _layer_summary(self) -> str:
        if self.layers is None:
            return ""
        section = self.layers
        text = f"; {len(section.layers)} layer(s) compared"
        if section.first_divergence:
            text += f", first divergence at '{section.first_divergence}' ({', '.join(section.first_divergence_metrics)})"
        elif section.thresholds:
            text += ", none crosses the layer thresholds"
        return text
