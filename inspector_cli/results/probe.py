"""Results of `mi probe`: per-tensor statistics, triggers, quantisation ranges, plugins, history."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .base import Finding, ModelRef, NodeValues, Result, Severity
from .placement import PartitionChange, Placement
from .scope_section import ScopeSection

Number = Optional[float]


@dataclass(frozen=True)
class ChannelInfo:
    """Per-channel tracking of one tensor along `axis`."""

    axis: int
    channels: int
    dead: List[int] = field(default_factory=list)
    """Channels that were exactly zero on every sample (dead units)."""


@dataclass(frozen=True)
class TensorStats:
    """One tensor's statistics over every probed sample (finite values only, NaN/Inf counted apart)."""

    name: str
    op_type: str
    node: str
    dtype: str
    shape: List[int]
    samples: int
    count: int
    """Finite values seen over all samples."""
    min: Number = None
    max: Number = None
    mean: Number = None
    std: Number = None
    """Population standard deviation (ddof=0)."""
    absmax: Number = None
    percentiles: Dict[str, Number] = field(default_factory=dict)
    """'p0.1', 'p1', 'p50', 'p99', 'p99.9': rank-exact, value within 2**-8 relative (see README)."""
    zero_frac: Number = None
    nan: int = 0
    inf: int = 0
    outlier_ratio: Number = None
    """Share of values with |x - mean| > 3 std (from the histogram; bounds in `outlier_bounds`)."""
    outlier_bounds: List[float] = field(default_factory=list)
    histogram: List[int] = field(default_factory=list)
    """Counts in equal-width bins over [min, max] (each log bucket counted at its midpoint)."""
    channels: Optional[ChannelInfo] = None
    zero_samples: int = 0
    """Samples on which the whole tensor was exactly zero."""
    zero_sample_ids: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    masked: int = 0
    """-Inf (or +Inf) values an attention mask sets on purpose (core/masks.py): not counted in `inf`."""
    masked_rows: int = 0
    """A Softmax output: rows whose every input was masked (-Inf), which it turns into NaN."""
    moved: bool = False
    """Its producing node ran on another execution provider with tensors exposed than in the plain
    session: these statistics describe a partition other than the deployed one."""

    def stat(self, name: str) -> Any:
        """A statistic by name ('min', 'p99', 'zero_frac', 'dead_channels', ...)."""
        if name in self.percentiles:
            return self.percentiles[name]
        if name == "dead_channels":
            return len(self.channels.dead) if self.channels else None
        return getattr(self, name, None)


@dataclass(frozen=True)
class SampleRow:
    """One tensor on one sample (`--per-sample`)."""

    sample: str
    tensor: str
    min: Number = None
    max: Number = None
    mean: Number = None
    std: Number = None
    absmax: Number = None
    zero_frac: Number = None
    nan: int = 0
    inf: int = 0


@dataclass(frozen=True)
class DumpInfo:
    """What a trigger wrote: the sample's probed tensors and its inputs, under a size cap."""

    tensors_path: str
    inputs_path: Optional[str]
    written: List[str]
    skipped: List[str]
    bytes: int
    max_bytes: int


@dataclass(frozen=True)
class TriggerHit:
    """The first sample and tensor that met a `--break-on` condition."""

    condition: str
    sample: str
    sample_index: int
    tensor: str
    values: Dict[str, Number]
    dump: Optional[DumpInfo] = None


@dataclass(frozen=True)
class QuantRange:
    """Observed values at one quantiser against what its (scale, zero point) can represent."""

    node: str
    op_type: str
    tensor: str
    """The float tensor quantised (QuantizeLinear input) or the integer output (QLinear ops)."""
    source: str
    """'activation', 'weight' or 'qlinear-output'."""
    qtype: str
    scale: float
    """The scale (the smallest one for per-axis quantisation)."""
    zero_point: int
    axis: Optional[int]
    representable: List[float]
    observed: List[float]
    count: int
    saturated: int
    saturated_share: float
    used_share: float
    """Share of the integer range [qmin, qmax] covered by the observed values (mean over channels)."""
    flagged: bool = False
    reference: Optional[Dict[str, Any]] = None
    clipped_low: int = 0
    """Values below 0 at a quantiser whose range starts at 0 (a folded ReLU): not saturation."""
    """The same check on the float reference model's tensor (`--reference`)."""


@dataclass(frozen=True)
class PluginResult:
    """A plugin's summary: rows (usually tensors) of named values."""

    name: str
    spec: str
    description: str
    rows: Dict[str, Dict[str, Any]]


@dataclass(frozen=True)
class StatChange:
    tensor: str
    stat: str
    before: Number
    now: Number
    change: Number
    rel_change: Number


@dataclass(frozen=True)
class HistoryInfo:
    """Where this run's summary was stored and how it compares with an earlier run (`--since`)."""

    run_id: str
    key: str
    saved: Optional[str] = None
    pruned: int = 0
    since: Optional[str] = None
    since_created: Optional[str] = None
    changes: List[StatChange] = field(default_factory=list)
    only_now: List[str] = field(default_factory=list)
    only_before: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeResult(Result):
    """Everything `mi probe` measured; `passed` is false when a defect was found (exit 1)."""

    kind: ClassVar[str] = "probe"

    models: List[ModelRef]
    config: Dict[str, Any]
    runtime: Dict[str, Any]
    inputs: Dict[str, Any]
    tensors: List[TensorStats]
    samples: int
    """Samples probed (fewer than the data set when a trigger stopped the run)."""
    per_sample: List[SampleRow] = field(default_factory=list)
    trigger: Optional[TriggerHit] = None
    quant: List[QuantRange] = field(default_factory=list)
    plugins: List[PluginResult] = field(default_factory=list)
    history: Optional[HistoryInfo] = None
    findings: List[Finding] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    capture: Dict[str, Any] = field(default_factory=dict)
    scopes: Optional[ScopeSection] = None
    """Scopes of the model and the rows rolled up by scope (depth 1; `--group-by` picks another)."""
    placement: Optional[Placement] = None
    """Which provider ran each node as deployed (results/placement.py)."""
    partition: Optional[PartitionChange] = None
    """With a provider other than CPU: the capture sessions' partition against the plain session's."""

    @property
    def passed(self) -> bool:
        return not any(f.severity == Severity.ERROR for f in self.findings)

    def node_values(self) -> List[NodeValues]:
        """Per probed tensor: abs max, zero share and std; per quantiser: saturated share."""
        rows: List[NodeValues] = []
        for metric, attr, higher in (("absmax", "absmax", False), ("zero_frac", "zero_frac", False),
                                     ("std", "std", True)):
            values = {t.name: float(getattr(t, attr)) for t in self.tensors if getattr(t, attr) is not None}
            rows.append(NodeValues(metric=metric, higher_is_better=higher, values=values))
        if self.quant:
            rows.append(NodeValues(metric="saturated_share", higher_is_better=False,
                                   values={q.tensor: q.saturated_share for q in self.quant}, thresholds=[0.001, 0.01]))
        return rows

    def tensor(self, name: str) -> TensorStats:
        for stats in self.tensors:
            if stats.name == name:
                return stats
        raise KeyError(name)

    def summary(self) -> str:
        head = f"{len(self.tensors)} tensor(s) probed over {self.samples} sample(s)"
        errors = [f.message for f in self.findings if f.severity == Severity.ERROR]
        if not errors:
            warnings = sum(1 for f in self.findings if f.severity == Severity.WARNING)
            return f"PASS: {head}" + (f"; {warnings} warning(s)" if warnings else "")
        more = f" (+{len(errors) - 2} more)" if len(errors) > 2 else ""
        return f"FAIL: {head}; {'; '.join(errors[:2])}{more}"


@dataclass(frozen=True)
class TensorEntry:
    """One selectable tensor (`mi probe MODEL --list`)."""

    name: str
    op_type: str
    node: str
    dtype: str
    shape: str


@dataclass(frozen=True)
class TensorListResult(Result):
    kind: ClassVar[str] = "probe-list"

    models: List[ModelRef]
    tensors: List[TensorEntry]
    config: Dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return True

    def summary(self) -> str:
        return f"{len(self.tensors)} selectable tensor(s)"


@dataclass(frozen=True)
class HistoryEntry:
    """One stored probe run (`mi probe --history`)."""

    run_id: str
    created: str
    model: str
    model_sha256: Optional[str]
    selection: List[str]
    inputs: str
    samples: int
    tensors: int
    key: str


@dataclass(frozen=True)
class HistoryListResult(Result):
    kind: ClassVar[str] = "probe-history"

    directory: str
    runs: List[HistoryEntry]
    config: Dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return True

    def summary(self) -> str:
        return f"{len(self.runs)} stored probe run(s) in {self.directory}"
