"""From profiler files to a `ModelProfile`: parse, map, aggregate, critical path, cost, memory, hints.

Everything here is post-processing of finished runs; each step's wall time is recorded in
`ModelProfile.timings` (the benchmark reports them).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..core.graph import ModelGraph
from ..results.base import Finding
from ..results.profile import CriticalPath, ModelProfile, NodeGroup, PathStep
from . import assign, cost, critical, hints, mapping, memory, shapes, stats
from .trace import Trace, parse_trace, per_run_matrix


@dataclass
class AnalysisInput:
    graph: ModelGraph
    trace_files: Sequence[Path]
    warmup: int
    e2e_us: Sequence[float]
    input_shapes: Mapping[str, Tuple[int, ...]]
    optimized_model: Optional[Path] = None
    memory_csv: Optional[Path] = None
    role: str = ""
    opt_level: str = "all"
    expected_runs: Optional[List[int]] = None
    notes: List[str] = field(default_factory=list)
    top: int = 10


@dataclass
class Analysis:
    """The profile plus what `--trace` and `--against` need beyond it."""

    profile: ModelProfile
    trace: Trace
    mapping: mapping.NodeMapping
    kernel_p50: Dict[str, float]
    node_names: List[str]
    cells: Dict[str, List[int]] = field(default_factory=dict)
    """Kernel -> original node indices it does (helpers share their group's main kernel's nodes)."""
    findings: List[Finding] = field(default_factory=list)


class _Clock:
    def __init__(self) -> None:
        self.timings: Dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self._last
        self._last = now


def analyse(inp: AnalysisInput) -> Analysis:
    """Build the profile of one model from its finished profiled and timed runs."""
    clock = _Clock()
    graph = inp.graph
    notes = list(inp.notes)
    trace = parse_trace(inp.trace_files, inp.warmup)
    notes.extend(trace.notes)
    _check_recorded_runs(trace, inp.expected_runs, inp.warmup, notes)
    clock.lap("parse")

    opt_nodes, opt_inits = None, set()
    if inp.optimized_model is not None:
        opt_model = onnx.load(str(inp.optimized_model), load_external_data=False)
        opt_nodes, opt_inits = mapping.optimized_nodes(opt_model)
        del opt_model
    node_map = mapping.map_nodes(graph, opt_nodes, opt_inits, trace.names)
    notes.extend(node_map.notes)
    clock.lap("map")

    time_matrix, calls = per_run_matrix(trace)
    per_run = dict(zip(trace.names, stats.robust_per_run(time_matrix, calls).tolist()))
    preds = critical.graph_predecessors(graph)
    node_kernel = assign.assign_nodes(node_map, per_run, [n.op_type for n in graph.nodes], preds)
    clock.lap("map")

    observed = [(out, typed) for o in (opt_nodes or []) if o.name in trace.info
                for out, typed in zip(o.outputs, trace.info[o.name].outputs)]
    tensors = shapes.runtime_tensors(graph, inp.input_shapes, observed)
    costs = cost.model_costs(graph, lambda name: tensors[name].shape if name in tensors else None)
    clock.lap("static_cost")

    assigned: Dict[str, List[int]] = {}
    for i, kernel in node_kernel.items():
        assigned.setdefault(kernel, []).append(i)
    flops_of: Dict[str, Optional[int]] = {}
    original_of: Dict[str, List[str]] = {}
    for kernel, indices in assigned.items():
        known = [costs[i].flops for i in indices if costs[i] is not None]  # type: ignore[union-attr]
        flops_of[kernel] = int(sum(known)) if known else None
        original_of[kernel] = [graph.nodes[i].name for i in sorted(indices)]
    nested = [k for g in node_map.groups if g.kind == "nested" for k in g.kernels]
    kernels, kernel_sum = stats.kernel_table(trace.names, time_matrix, calls, trace.info, node_map.group_of_kernel,
                                             original_of, flops_of, exclude=nested)
    kernels, findings = stats.flag_slow_kernels(kernels)
    op_types = stats.op_type_table(kernels, kernel_sum)
    providers = stats.provider_table(kernels, kernel_sum)
    groups = _groups(graph, node_map, per_run, costs)
    clock.lap("aggregate")

    e2e = stats.latency_stats(inp.e2e_us)
    weights = assign.node_weights(node_map, node_kernel, per_run, len(graph.nodes))
    length, path = critical.longest_path(weights, preds)
    steps = [PathStep(node=graph.nodes[i].name, op_type=graph.nodes[i].op_type, weight_us=weights[i],
                      kernel=node_kernel.get(i)) for i in path]
    total_nodes = float(sum(weights))
    crit = CriticalPath(length_us=length, sum_us=total_nodes, e2e_p50_us=e2e.p50_us, steps=steps,
                        parallelism=(total_nodes / length) if length > 0 else 1.0)
    clock.lap("critical_path")

    order = _execution_order(graph, node_kernel, trace, preds)
    stats_rows = memory.read_node_memory_stats(inp.memory_csv) if inp.memory_csv is not None else []
    mem = memory.memory_profile(graph, tensors, arena_peak=trace.arena_peak, node_stats=stats_rows[:inp.top * 5],
                                order=order, top=inp.top)
    clock.lap("memory")

    priced = hints.priced_hints(graph, node_map, node_kernel, per_run, kernel_sum, inp.opt_level)
    clock.lap("hints")

    model_runs = trace.run_dur[trace.kept].astype(float)
    profiled = stats.latency_stats(model_runs)
    overhead = (profiled.p50_us / e2e.p50_us - 1.0) if e2e.p50_us > 0 and profiled.runs else 0.0
    _overhead_note(profiled.p50_us, e2e.p50_us, sum(k.calls_per_run for k in kernels), notes)
    known_flops = [c.flops for c in costs if c is not None]
    profile = ModelProfile(
        model=graph.display_name, role=inp.role, e2e=e2e, profiled=profiled, overhead=overhead,
        kernel_sum_us=kernel_sum, kernels=kernels, groups=groups, op_types=op_types, providers=providers,
        critical_path=crit, memory=mem, hints=priced, original_nodes=len(graph.nodes),
        optimized_nodes=len(opt_nodes) if opt_nodes is not None else len(trace.names),
        sessions=len(inp.trace_files), warmup_dropped=int((~trace.kept).sum()),
        flops=int(sum(known_flops)) if known_flops else None, timings=dict(clock.timings), notes=notes)
    p50 = {k.name: k.p50_us for k in kernels}
    return Analysis(profile=profile, trace=trace, mapping=node_map, kernel_p50=p50,
                    node_names=[n.name for n in graph.nodes], findings=findings,
                    cells=assign.kernel_cells(node_map, node_kernel, per_run))


def _overhead_note(profiled_us: float, e2e_us: float, kernels_per_run: float, notes: List[str]) -> None:
    """Say how much the profiler inflates each kernel when it slows runs noticeably."""
    if e2e_us <= 0 or profiled_us <= 1.5 * e2e_us or kernels_per_run <= 0:
        return
    per_kernel = (profiled_us - e2e_us) / kernels_per_run
    notes.append(f"the profiler slowed runs by {profiled_us / e2e_us - 1:.0%} (~{per_kernel:.1f} µs per kernel): "
                 f"kernel times under ~{3 * per_kernel:.0f} µs are mostly profiler overhead; end-to-end figures "
                 "are measured without it")


def _check_recorded_runs(trace: Trace, expected: Optional[List[int]], warmup: int, notes: List[str]) -> None:
    if not expected:
        return
    for session, want in enumerate(expected):
        got = int((trace.run_session == session).sum())
        if got < want + warmup:
            notes.append(f"profiled session {session + 1} recorded {got} of {want + warmup} runs "
                         "(onnxruntime's profiler event limit); the missing runs are left out")


def _groups(graph: ModelGraph, node_map: mapping.NodeMapping, per_run: Mapping[str, float],
            costs: Sequence[Optional[cost.NodeCost]]) -> List[NodeGroup]:
    """Every group that is not a plain 1:1 kept node (those are the kernel rows themselves)."""
    result = []
    for g in node_map.groups:
        if g.kind == "kept":
            continue
        known = [costs[i].flops for i in g.original if costs[i] is not None]  # type: ignore[union-attr]
        result.append(NodeGroup(
            id=g.id, kind=g.kind, original_nodes=[graph.nodes[i].name for i in g.original],
            original_ops=[graph.nodes[i].op_type for i in g.original], kernels=list(g.kernels),
            per_run_us=float(sum(per_run.get(k, 0.0) for k in g.kernels)),
            flops=int(sum(known)) if known else None))
    return result


def _execution_order(graph: ModelGraph, node_kernel: Mapping[int, str], trace: Trace,
                     preds: Sequence[Sequence[int]]) -> List[int]:
    """Original nodes in the order their kernels first ran; topological order when that is not valid."""
    first: Dict[str, int] = {}
    kept = trace.kept_runs
    if len(kept):
        in_run = trace.run == kept[0]
        for k, ts in zip(trace.kernel[in_run].tolist(), trace.ts[in_run].tolist()):
            name = trace.names[k]
            if name not in first or ts < first[name]:
                first[name] = ts
    n = len(graph.nodes)
    start = [first.get(node_kernel.get(i, ""), -1) for i in range(n)]
    # Nodes without a kernel (folded) keep their topological slot behind the node before them.
    for i in range(1, n):
        if start[i] < 0:
            start[i] = start[i - 1]
    order = sorted(range(n), key=lambda i: (start[i], i))
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    for i, before in enumerate(preds):
        if any(position[p] > position[i] for p in before):
            return list(range(n))
    return order
