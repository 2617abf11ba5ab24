"""The layer-by-layer section of a `CompareResult` (`mi compare --layers`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

Metrics = Dict[str, Optional[float]]


@dataclass(frozen=True)
class LayerDiff:
    """One tensor of the reference paired with its counterpart, compared over every sample."""

    index: int
    """Position in the reference model's topological order among the compared layers."""
    name: str
    name_b: str
    op_a: str
    """The reference's op(s) producing it, fused chains as 'Conv+BatchNormalization+Relu'."""
    op_b: str
    shape_a: List[int]
    shape_b: List[int]
    dtype_a: str
    dtype_b: str
    method: str
    """How it was paired: map, name, qdq, cast, identity, fused or structural."""
    confidence: float
    located_by: str
    evidence: str
    capture_a: str
    """'deployed' (read from onnxruntime's optimised graph), 'instrumented' (exposed in the model) or
    'recomputed' (fused away as deployed: its original ops rerun unfused on the deployed tensors)."""
    capture_b: str
    samples: int
    dataset: Metrics
    worst: Metrics
    mean: Metrics
    nonfinite: Dict[str, int] = field(default_factory=dict)
    failed_gates: List[str] = field(default_factory=list)
    """Metrics whose layer gate failed on at least one sample."""
    isolated: Optional[Metrics] = None
    """Data-set metrics of B's producing subgraph run on A's captured inputs (the layer's own error)."""
    own_share: Optional[float] = None
    """Share of the accumulated squared error the layer causes itself (isolated / accumulated)."""
    error_source: Optional[str] = None
    """'own' (the layer loses precision), 'inherited' (error from upstream) or 'mixed'."""
    qdq_noise: Optional[Metrics] = None
    """The pure quantisation noise of the candidate's Q/DQ pair, applied to the reference's tensor."""
    negligible: bool = False
    """max |b - a| <= the section's `atol` over every sample: the two tensors differ by rounding noise only
    (a tensor near zero), so its cosine, SQNR and relative errors say nothing; it passes every layer
    threshold but max_abs, and is never the first divergence nor a worst layer by a scale-free metric."""
    excused_gates: List[str] = field(default_factory=list)
    """Metrics whose layer threshold a sample crossed but passed as negligible (the false alarms avoided)."""
    recomputed: Optional[str] = None
    """Set when a model's tensor is fused away in onnxruntime's deployed graph (capture 'recomputed'): its
    original ops were rerun unfused beside the deployed kernels; says which model, ops and inputs."""
    moved: List[str] = field(default_factory=list)
    """Models ('A', 'B') whose node producing this tensor ran on another execution provider with tensors
    exposed than in the plain session: the row describes a partition other than the deployed one."""


@dataclass(frozen=True)
class UnpairedTensor:
    model: str
    """'a' (reference) or 'b' (candidate)."""
    tensor: str
    op: str
    reason: str


@dataclass(frozen=True)
class ObserverCheck:
    """A model's final output captured alongside the layers, against a plain run of the same model."""

    model: str
    output: str
    capture: str
    identical: bool
    max_abs: float
    cosine: float
    sample: str


@dataclass(frozen=True)
class CaptureInfo:
    strategy: str
    """'all-at-once' or 'chunked' (tensors split across runs to stay within the memory budget)."""
    chunks: int
    runs: int
    """onnxruntime runs made for the capture (all models, chunks and samples)."""
    estimated_bytes: int
    budget_bytes: int
    capture_a: str
    capture_b: str
    isolation_runs: int = 0
    notes: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class StructureSummary:
    """Static differences of the two models (no inference)."""

    op_counts: Dict[str, Tuple[int, int]]
    only_a: List[str]
    only_b: List[str]
    signature: List[Dict[str, str]]
    nodes: Tuple[int, int]
    qdq_pairs: Tuple[int, int]
    quantized_ops: Tuple[int, int]
    initializer_bytes: Tuple[int, int]


@dataclass(frozen=True)
class LayerThreshold:
    metric: str
    op: str
    threshold: float
    target: Optional[str]
    source: str
    """'user' or 'default' (min-cosine 0.99, used for the first divergence when no layer gate is set)."""
    flag: str = ""


@dataclass(frozen=True)
class LayerSection:
    layers: List[LayerDiff]
    pairing: Dict[str, int]
    """Number of compared pairs per method."""
    unpaired_a: List[UnpairedTensor]
    unpaired_b: List[UnpairedTensor]
    skipped: Dict[str, int]
    """Tensors of the reference not compared, by reason (inside fused chains, not materialised ...)."""
    thresholds: List[LayerThreshold]
    gates_affect_exit: bool
    first_divergence: Optional[str]
    first_divergence_metrics: List[str]
    worst: Dict[str, List[str]]
    """Metric -> the worst layers by it, worst first."""
    capture: CaptureInfo
    observer: List[ObserverCheck]
    structure: Optional[StructureSummary] = None
    isolation: Optional[Dict[str, object]] = None
    atol: float = 0.0
    """`--layer-atol`: layers differing by at most this (max |b - a|) are negligible (0: off)."""

    @property
    def failed(self) -> List[LayerDiff]:
        return [layer for layer in self.layers if layer.failed_gates]
