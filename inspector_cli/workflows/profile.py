"""`profile_model`: per-node latency, aggregates, critical path, cost and memory of one or two models."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ..core.graph import ModelGraph
from ..core.model_arg import ModelArg, as_graph
from ..core.refusals import require_loadable
from ..core.inputs import SampleSet, adapt_feeds, open_samples
from ..core.io_match import match_names, rename_feeds
from ..core.runner import Session
from ..core.types import TensorMap
from ..errors import InputDataError, UsageError
from ..placement import placement_findings
from ..profile import measure
from ..profile.analysis import Analysis, AnalysisInput, analyse
from ..profile.config import ProfileConfig
from ..profile.memory import parameters
from ..progress import Progress, no_progress
from ..results.base import Finding, GateOutcome, ModelRef
from ..inspection.rollups import model_scope_map, profile_rollup
from ..results.placement import build_placement
from ..results.profile import ModelProfile, ProfileComparison, ProfileResult
from ..results.scopes import ScopeMap

SAVE_OPTIMIZED_LIMIT = 1 << 30
"""Above this many weight bytes the optimised graph is not saved (it would copy every weight to disk);
kernels are then mapped to original nodes by name."""


def _load_feeds(samples: SampleSet, count: int) -> Tuple[List[TensorMap], List[str]]:
    """The first `count` samples in memory (runs cycle through them)."""
    feeds = [samples.load(ref) for ref in samples.refs[:count]]
    notes = [f"{len(samples)} samples given; the first {count} were used (one per run)"] \
        if len(samples) > count else []
    return feeds, notes


def profile_model(model: ModelArg, config: Optional[ProfileConfig] = None, *,
                  progress: Progress = no_progress) -> ProfileResult:
    """Profile `model` (and `config.against`, side by side) and return a `ProfileResult`.

    Runs, in order: end-to-end timing without the profiler (interleaved between the two models),
    profiled sessions (warm-up dropped), then the analysis. Raises `MiError` subclasses only when
    no result is possible.
    """
    config = config or ProfileConfig()
    if config.runs < 1:
        raise UsageError("--runs must be at least 1")
    if config.min_speedup is not None and not config.against:
        raise UsageError("--min-speedup needs --against OTHER.onnx", hint="it gates the second model's speed-up")
    graphs = [as_graph(model)] + ([as_graph(config.against)] if config.against else [])
    for graph in graphs:
        require_loadable(graph, config.runtime)
    samples = open_samples(config.inputs, graphs[0].inputs, config.synthetic)
    feeds_a, warnings = _load_feeds(samples, config.runs)
    warnings = list(samples.notes) + warnings
    labels = [("A " if len(graphs) > 1 else "") + g.display_name for g in graphs]
    timing = [measure.open_timing_session(g, config.runtime, label) for g, label in zip(graphs, labels)]
    feeds = [feeds_a]
    if len(graphs) > 1:
        feeds_b, cast_notes = _feeds_for_b(graphs[0], graphs[1], feeds_a, timing[1])
        feeds.append(feeds_b)
        warnings.extend(cast_notes)
    e2e = measure.time_runs(timing, feeds, config.runs, config.warmup, progress)
    del timing
    analyses: List[Analysis] = []
    with tempfile.TemporaryDirectory(prefix="mi-profile-") as tmp:
        for index, (graph, label) in enumerate(zip(graphs, labels)):
            analyses.append(_profile_one(graph, config, feeds[index], e2e[index], Path(tmp) / f"m{index}", label,
                                         "reference" if index == 0 else "candidate", progress))
    if config.trace_path:
        from ..profile.chrome import write_chrome_trace

        write_chrome_trace(config.trace_path, list(zip(labels, analyses)))
    comparison = None
    if len(analyses) > 1:
        from ..profile.compare import compare_profiles

        comparison = compare_profiles(analyses[0], analyses[1], e2e[0], e2e[1], top=config.top)
    findings: List[Finding] = []
    for index, analysis in enumerate(analyses):
        prefix = "" if len(analyses) == 1 else ("A: " if index == 0 else "B: ")
        findings.extend(Finding(rule=f.rule, severity=f.severity, message=prefix + f.message, node=f.node,
                                hint=f.hint, data=f.data) for f in analysis.findings)
    profiles, smap = _with_rollups(graphs, [a.profile for a in analyses], config.group_depth)
    return ProfileResult(
        models=[ModelRef.of(g, "reference" if i == 0 else "candidate") for i, g in enumerate(graphs)],
        config=config.to_dict(), runtime=config.runtime.to_dict(), inputs=samples.describe(),
        profiles=profiles, comparison=comparison,
        gates=_gates(config, analyses, comparison, e2e), findings=findings, warnings=warnings,
        scope_map=smap, group_by=config.group_by)


def _with_rollups(graphs: Sequence[ModelGraph], profiles: Sequence[ModelProfile], depth: Optional[int]
                  ) -> Tuple[List[ModelProfile], ScopeMap]:
    """Each profile with its kernel time by scope; the scope map of the last model."""
    out: List[ModelProfile] = []
    smap = None
    for graph, profile in zip(graphs, profiles):
        smap = model_scope_map(graph)
        out.append(dataclasses.replace(profile, scope_rollup=profile_rollup(smap, profile, depth), group_depth=depth))
    assert smap is not None
    return out, smap


def _feeds_for_b(graph_a: ModelGraph, graph_b: ModelGraph, feeds: Sequence[TensorMap],
                 session_b: Session) -> Tuple[List[TensorMap], List[str]]:
    matching = match_names(graph_a.inputs, graph_b.inputs, what="input")
    if matching.unmatched_a or matching.unmatched_b:
        raise InputDataError(
            f"the models' inputs do not correspond: {graph_a.display_name} has {', '.join(graph_a.input_names)}; "
            f"{graph_b.display_name} has {', '.join(graph_b.input_names)}",
            hint="profile models that take the same inputs")
    out: List[TensorMap] = []
    notes: List[str] = list(matching.warnings)
    for sample in feeds:
        adapted, cast = adapt_feeds(rename_feeds(sample, matching.pairs), session_b.input_dtypes)  # type: ignore[arg-type]
        notes.extend(n for n in cast if n not in notes)
        out.append(adapted)
    return out, notes


def _profile_one(graph: ModelGraph, config: ProfileConfig, feeds: List[TensorMap], e2e: List[float],
                 workdir: Path, label: str, role: str, progress: Progress) -> Analysis:
    notes: List[str] = []
    save_optimized = parameters(graph)[0] <= SAVE_OPTIMIZED_LIMIT
    if not save_optimized:
        notes.append("the model's weights exceed 1 GiB: the optimised graph was not saved")
    runs = measure.profile_runs(graph, config.runtime, feeds, config.runs, config.warmup, workdir, label=label,
                                max_events=config.max_events, save_optimized=save_optimized,
                                memory_stats=config.memory_stats, progress=progress)
    notes.extend(runs.notes)
    progress(0, None, f"analysing {label}")
    analysis = analyse(AnalysisInput(
        graph=graph, trace_files=runs.trace_files, warmup=config.warmup, e2e_us=e2e,
        input_shapes=measure.input_shapes(feeds), optimized_model=runs.optimized_model, memory_csv=runs.memory_csv,
        role=role, opt_level=config.runtime.opt_level.value, expected_runs=runs.runs_per_session, notes=notes,
        top=config.top))
    order = [n.name for n in graph.nodes]
    kernels = [(k.name, k.op_type, k.provider, k.per_run_us) for k in analysis.profile.kernels]
    requested = runs.providers[0] if runs.providers else "CPUExecutionProvider"
    where = build_placement(label, requested, runs.assignment, kernels, order, asked=runs.providers)
    analysis.profile = dataclasses.replace(analysis.profile, placement=where)
    analysis.findings.extend(placement_findings([where], config.require_provider))
    return analysis


def _gates(config: ProfileConfig, analyses: Sequence[Analysis], comparison: Optional[ProfileComparison],
           e2e: Sequence[Sequence[float]]) -> List[GateOutcome]:
    gates: List[GateOutcome] = []
    if config.max_latency_ms is not None:
        p50_ms = analyses[0].profile.e2e.p50_us / 1000.0
        over = sum(1 for v in e2e[0] if v / 1000.0 > config.max_latency_ms)
        gates.append(GateOutcome(gate=f"--max-latency {config.max_latency_ms:g}", metric="p50_ms", op="<=",
                                 threshold=config.max_latency_ms, tensor=analyses[0].profile.model,
                                 passed=p50_ms <= config.max_latency_ms, worst=p50_ms, failed_samples=over,
                                 total_samples=len(e2e[0]), scope="model"))
    if config.min_speedup is not None and comparison is not None:
        speedup = comparison.e2e_speedup
        gates.append(GateOutcome(gate=f"--min-speedup {config.min_speedup:g}", metric="speedup", op=">=",
                                 threshold=config.min_speedup, tensor="end-to-end",
                                 passed=speedup >= config.min_speedup, worst=speedup,
                                 failed_samples=0 if speedup >= config.min_speedup else 1, total_samples=1,
                                 scope="model"))
    return gates
