"""Result of `mi profile`: measured kernels, their original nodes, aggregates, critical path, memory.

Times are microseconds (`_us`), sizes bytes, throughput GFLOP/s. A *kernel* is one node of the graph
onnxruntime actually ran (its optimised graph); a *group* ties kernels to the original nodes they
came from (`kept` 1:1, `replaced`, `fused`, `folded` away at load, or `added` by the runtime).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from .placement import Placement
from .base import Finding, GateOutcome, ModelRef, NodeValues, Result, Severity
from .scopes import RollupRow, ScopeMap


@dataclass(frozen=True)
class LatencyStats:
    """A latency distribution over runs, in microseconds."""

    runs: int
    mean_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    min_us: float
    max_us: float
    std_us: float = 0.0


@dataclass(frozen=True)
class KernelStat:
    """One executed kernel (a node of the optimised graph) over the kept runs."""

    name: str
    op_type: str
    provider: str
    group: int
    original_nodes: List[str]
    """Original nodes whose work this kernel does (its fused group when it cannot be narrowed)."""
    mean_us: float
    p50_us: float
    p90_us: float
    min_us: float
    max_us: float
    share: float
    """Fraction of the summed kernel time of a run (`per_run_us` over their sum)."""
    per_run_us: float
    """Time per run used for shares, totals and the critical path: the median over the runs the
    kernel ran in times the fraction of runs it ran in (robust to a stalled run)."""
    runs: int
    calls_per_run: float = 1.0
    input_shapes: List[str] = field(default_factory=list)
    output_shapes: List[str] = field(default_factory=list)
    flops: Optional[int] = None
    bytes_accessed: Optional[int] = None
    """Input activations + parameters + outputs, as onnxruntime reports them for this kernel."""
    gflops_per_s: Optional[float] = None
    """FLOPs / p50 time."""
    intensity: Optional[float] = None
    """Arithmetic intensity: FLOPs per byte accessed."""
    slow_ratio: Optional[float] = None
    """Set when flagged: how many times below the median throughput of its op type it runs."""


@dataclass(frozen=True)
class NodeGroup:
    """Original nodes and the kernels that executed them."""

    id: int
    kind: str
    """kept, replaced, fused, folded (no kernel: removed or constant-folded at load) or added."""
    original_nodes: List[str]
    original_ops: List[str]
    kernels: List[str]
    per_run_us: float = 0.0
    flops: Optional[int] = None


@dataclass(frozen=True)
class OpTypeStat:
    op_type: str
    count: int
    total_us: float
    share: float
    mean_us: float
    flops: Optional[int] = None
    gflops_per_s: Optional[float] = None


@dataclass(frozen=True)
class ProviderStat:
    provider: str
    count: int
    total_us: float
    share: float


@dataclass(frozen=True)
class PathStep:
    node: str
    op_type: str
    weight_us: float
    kernel: Optional[str] = None


@dataclass(frozen=True)
class CriticalPath:
    """Longest path through the original DAG, nodes weighted by the measured time of their kernels."""

    length_us: float
    sum_us: float
    """Summed time of every node: what a strictly sequential executor pays."""
    e2e_p50_us: float
    steps: List[PathStep]
    parallelism: float
    """sum / length: the speed-up an ideal parallel executor could reach at most."""


@dataclass(frozen=True)
class LiveTensor:
    name: str
    bytes: int
    shape: str
    producer: str


@dataclass(frozen=True)
class NodeMemory:
    """onnxruntime's own per-node memory statistics (session.collect_node_memory_stats_to_file)."""

    node: str
    input_bytes: int
    initializer_bytes: int
    dynamic_output_bytes: int
    temp_bytes: int


@dataclass(frozen=True)
class MemoryProfile:
    peak_bytes: int
    """Peak of live activations (graph inputs included, weights excluded) over the execution order."""
    peak_node: str
    peak_step: int
    live_at_peak: List[LiveTensor]
    activation_bytes: int
    """Sum of every activation's size (what no buffer reuse at all would need)."""
    parameter_bytes: int
    parameter_count: int
    unknown_tensors: int = 0
    arena_peak_bytes: Optional[int] = None
    """onnxruntime's arena peak in use during the profiled runs, when its profiler reports it."""
    node_stats: List[NodeMemory] = field(default_factory=list)


@dataclass(frozen=True)
class Hint:
    pattern: str
    nodes: List[str]
    message: str
    time_us: float
    share: float
    fused_by_runtime: bool
    """onnxruntime already fused or removed these nodes at this optimisation level."""


@dataclass(frozen=True)
class ModelProfile:
    """Everything measured and derived for one model."""

    model: str
    role: str
    e2e: LatencyStats
    """Runs without the profiler."""
    profiled: LatencyStats
    """The same runs under the profiler (onnxruntime's model_run events)."""
    overhead: float
    """profiled p50 / e2e p50 - 1."""
    kernel_sum_us: float
    """Sum of the kernels' `per_run_us`."""
    kernels: List[KernelStat]
    groups: List[NodeGroup]
    op_types: List[OpTypeStat]
    providers: List[ProviderStat]
    critical_path: CriticalPath
    memory: MemoryProfile
    hints: List[Hint]
    original_nodes: int
    optimized_nodes: int
    sessions: int = 1
    warmup_dropped: int = 0
    flops: Optional[int] = None
    timings: Dict[str, float] = field(default_factory=dict)
    """Seconds spent in each post-processing step (parse, map, aggregate, critical_path, ...)."""
    notes: List[str] = field(default_factory=list)
    scope_rollup: List[RollupRow] = field(default_factory=list)
    """Kernel time by scope (time_us, share, kernels, flops, gflops_per_s), largest first."""
    group_depth: Optional[int] = None
    """Depth of `scope_rollup` below the model (None: each node's own scope)."""
    placement: Optional[Placement] = None
    """Which provider ran each node, nodes and kernel time per provider, transfers (results/placement.py)."""


@dataclass(frozen=True)
class OpTypeDelta:
    op_type: str
    """Base op type: QLinearConv, FusedConv and Conv all count as Conv."""
    a_us: float
    b_us: float
    a_count: int
    b_count: int
    speedup: Optional[float]
    """a / b: above 1 means B is faster."""


@dataclass(frozen=True)
class NodeDelta:
    label: str
    a_nodes: List[str]
    a_kernels: List[str]
    b_kernels: List[str]
    a_us: float
    b_us: float
    speedup: float


@dataclass(frozen=True)
class ProfileComparison:
    e2e_speedup: float
    """p50(A) / p50(B)."""
    ci_low: float
    ci_high: float
    """95% bootstrap interval of the speed-up of the medians."""
    mean_speedup: float
    op_types: List[OpTypeDelta]
    slower: List[NodeDelta]
    faster: List[NodeDelta]
    matched_units: int
    unmatched_a_us: float
    unmatched_b_us: float


@dataclass(frozen=True)
class ProfileResult(Result):
    """Everything `mi profile` measured; `passed` is what the exit code reports."""

    kind: ClassVar[str] = "profile"

    models: List[ModelRef]
    config: Dict[str, Any]
    runtime: Dict[str, Any]
    inputs: Dict[str, Any]
    profiles: List[ModelProfile]
    comparison: Optional[ProfileComparison] = None
    gates: List[GateOutcome] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    scope_map: Optional[ScopeMap] = None
    """Scopes of the last profiled model (the one `node_values` describes), for roll-ups and the HTML map."""
    group_by: bool = False
    """--group-by scope was given: the terminal shows the roll-up first."""

    @property
    def passed(self) -> bool:
        errors = [f for f in self.findings if f.severity == Severity.ERROR]
        return all(g.passed for g in self.gates) and not errors

    def node_values(self) -> List[NodeValues]:
        """Measured time per original node (µs per run, the last model profiled), keyed by node name.

        A kernel's time is shared equally by the original nodes it executed (a fused Conv+Relu
        gives half to each), so per-node values add up to the kernel sum.
        """
        profile = self.profiles[-1]
        per_node: Dict[str, float] = {}
        for kernel in profile.kernels:
            nodes = kernel.original_nodes or [kernel.name]
            for node in nodes:
                per_node[node] = per_node.get(node, 0.0) + kernel.per_run_us / len(nodes)
        return [NodeValues(metric="latency_us", higher_is_better=False, values=per_node, key="node", unit="µs")]

    def summary(self) -> str:
        main = self.profiles[0]
        text = f"p50 {main.e2e.p50_us / 1000:.3f} ms over {main.e2e.runs} runs"
        if self.comparison is not None and len(self.profiles) > 1:
            c = self.comparison
            text += (f"; B p50 {self.profiles[1].e2e.p50_us / 1000:.3f} ms, speed-up {c.e2e_speedup:.2f}x "
                     f"[{c.ci_low:.2f}, {c.ci_high:.2f}]")
        failed = [g.message() for g in self.gates if not g.passed]
        failed += [f.message for f in self.findings if f.severity == Severity.ERROR]
        if failed:
            return "FAIL: " + "; ".join(failed) + f" ({text})"
        return f"PASS: {text}" + ("" if not self.gates else f"; {len(self.gates)} gate(s) passed")
