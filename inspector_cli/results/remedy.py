"""The remedy section of a compare result (issue 18): fallback plan, optimiser bisection, accuracy.

Plain data like every result piece; filled by remedy/compare_run.py, drawn by render/remedy_view.py.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

Metrics = Dict[str, Optional[float]]


@dataclass(frozen=True)
class FallbackStepRow:
    """One evaluated float set of the search: the node added (or removed when pruning) and what it gave."""

    action: str
    node: str
    float_nodes: List[str]
    metrics: Metrics
    meets: bool
    latency_ms: float


@dataclass(frozen=True)
class WeightAdviceRow:
    """Per-tensor vs per-channel SQNR of one quantised weight, computed from the fp32 weight."""

    node: str
    weight: str
    sqnr_deployed: float
    sqnr_per_tensor: float
    sqnr_per_channel: float
    advise_per_channel: bool
    per_channel_enough: Optional[bool] = None
    """For plan nodes: whether re-quantising this weight per channel alone meets the targets (verified)."""

    @property
    def gain_db(self) -> float:
        """What per-channel quantisation gains over per-tensor, in dB of weight SQNR."""
        return self.sqnr_per_channel - self.sqnr_per_tensor


@dataclass(frozen=True)
class FallbackSection:
    """`--fallback-plan`: the nodes to keep in float (QDQ) or fp32 (fp16 block list), verified on the samples."""

    mode: str
    """'qdq' (nodes_to_exclude for quantize_static) or 'fp16' (node_block_list for float16 conversion)."""
    found: bool
    nodes: List[str]
    """Names in MODEL_B (QDQ) or in the fp32 model (fp16)."""
    fp32_nodes: List[str]
    targets: List[str]
    baseline: Metrics
    final: Metrics
    steps: List[FallbackStepRow] = field(default_factory=list)
    runs: int = 0
    inferences: int = 0
    seconds: float = 0.0
    baseline_latency_ms: float = 0.0
    final_latency_ms: float = 0.0
    skipped: Dict[str, str] = field(default_factory=dict)
    weight_advice: List[WeightAdviceRow] = field(default_factory=list)
    written_model: Optional[str] = None
    exclude_list: Optional[str] = None
    recheck: Metrics = field(default_factory=dict)
    """The targets measured again on the written model, loaded from disk (empty without --write-model)."""
    recheck_meets: Optional[bool] = None
    baseline_nonfinite_samples: List[str] = field(default_factory=list)
    ranking: str = ""
    """How candidates were ranked before their sensitivity runs: 'isolated' (each layer's own error,
    measured for the plan), 'isolated (--isolate)' (from the comparison's own isolation), 'weight-sqnr'
    (the heuristic, when isolating every layer would not fit the budget), '' (fp16 block list)."""
    ranking_note: Optional[str] = None
    """Why the heuristic was used and how to get the isolation ranking; None otherwise."""
    isolation_seconds: float = 0.0
    isolated_layers: int = 0
    baseline_meets: Optional[bool] = None
    """Whether the quantised model itself meets the targets (None: not recorded, results before issue 44)."""


@dataclass(frozen=True)
class OptimizerSection:
    """`--bisect-optimizers`: the onnxruntime graph transformer(s) that change B's outputs against A's settings."""

    applied: List[str]
    culprits: List[str]
    together: bool
    """True when no single transformer does it: the culprits are needed together."""
    differs: bool
    max_abs_diff: float
    rewritten_nodes: Dict[str, List[str]]
    session_builds: int
    verdict: str
    trials: List[Dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class AccuracyRow:
    """Top-k accuracy of A and B against `--labels` on one output, the drop A - B and its bootstrap 95% interval."""

    output: str
    k: int
    samples: int
    accuracy_a: float
    accuracy_b: float
    drop: float
    drop_ci95: List[float]
    a_right_b_wrong: List[str]
    a_wrong_b_right: List[str]
    unlabelled: List[str] = field(default_factory=list)
    failed_gates: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No accuracy gate failed on this row."""
        return not self.failed_gates


@dataclass(frozen=True)
class QuantStepRow:
    """A layer paired through a quantiser: its error in units of that tensor's quantisation scale
    (0.5 rounding, 1 an off-by-one tie, tens saturation or a wrong scale)."""

    layer: str
    tensor_b: str
    scale: float
    max_steps: Optional[float]
    mean_steps: Optional[float]
    isolated_cosine: Optional[float] = None
    flagged: bool = False
    """More than a few steps while the layer's own (isolated) error is large too."""


@dataclass(frozen=True)
class SimulatedRow:
    """A tensor's error against A in QDQ arithmetic (B with optimisations off) and as deployed."""

    layer: str
    cosine_simulated: Optional[float]
    cosine_deployed: Optional[float]
    max_abs_simulated: Optional[float] = None
    max_abs_deployed: Optional[float] = None


@dataclass(frozen=True)
class RemedySection:
    """What `--fallback-plan`, `--bisect-optimizers` and `--labels` found (each None / empty when not asked)."""

    fallback: Optional[FallbackSection] = None
    optimizers: Optional[OptimizerSection] = None
    accuracy: List[AccuracyRow] = field(default_factory=list)
    labels: Optional[str] = None
    quant_steps: List[QuantStepRow] = field(default_factory=list)
    """Every compared layer paired through a quantiser (with --layers on a quantised MODEL_B)."""
    simulated: List[SimulatedRow] = field(default_factory=list)
    """`--simulated`: per output and layer, QDQ arithmetic beside the deployed kernels."""
    label_notes: List[str] = field(default_factory=list)
    """One line per output the labels were read for (which output of a classifier, and why)."""


def metric_text(value: Optional[float]) -> str:
    """A plan's metric as the tables and findings print it: 6 significant digits, more for a value just
    below 1 so that 1 - value keeps 3 of them (an fp16 cosine of 0.9999999 against a target of 0.99999993
    read "1" at 6 digits)."""
    if value is None:
        return "n/a"
    if 0.999 < value < 1.0:
        digits = max(6, int(math.ceil(-math.log10(1.0 - value))) + 3)
        return f"{value:.{digits}g}"
    return f"{value:.6g}"
