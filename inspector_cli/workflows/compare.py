"""`compare_models`: run two models on the same samples and compare their outputs (and, with
`layers`, every paired intermediate tensor: see layers.py; with `golden`, one model against saved
outputs: see golden.py)."""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ..config.compare import CompareConfig
from ..core.graph import ModelGraph
from ..core.lazyload import load_model_lazy
from ..core.inputs import SampleSet, adapt_feeds, open_samples
from ..core.io_match import NameMatching, match_names, rename_feeds
from ..core.runner import Session
from ..diff.engine import TensorTracker
from ..diff.gates import check_gate_targets
from ..errors import InputDataError, UsageError
from ..results.base import Finding, GateOutcome, ModelRef, Severity
from ..results.compare import CompareResult, OutputDiff, SampleMetrics
from ..results.layers import LayerSection
from . import Progress, no_progress

ModelArg = Union[str, "os.PathLike[str]", ModelGraph]


def as_graph(model: ModelArg) -> ModelGraph:
    """The model as a graph; large weights stay in the file (lazyload.py), onnxruntime reads them there."""
    return model if isinstance(model, ModelGraph) else load_model_lazy(model)


def split_map(config: CompareConfig, graph_a: ModelGraph) -> Tuple[Tuple[str, str], ...]:
    """The --map entries naming inputs or outputs of A; others name intermediate tensors (--layers)."""
    io_names = set(graph_a.output_names) | set(graph_a.input_names)
    io_map = tuple((a, b) for a, b in config.output_map if a in io_names)
    rest = [a for a, _ in config.output_map if a not in io_names]
    if rest and config.layers is None:
        raise UsageError(f"--map {rest[0]}=...: '{rest[0]}' is not an output or input of {graph_a.display_name}",
                         hint="intermediate tensors are paired only with --layers")
    return io_map


@dataclass
class ComparePlan:
    """What a comparison will run: both graphs, their pairings and the samples."""

    graph_a: ModelGraph
    graph_b: ModelGraph
    outputs: NameMatching
    inputs: NameMatching
    samples: SampleSet


def plan_comparison(model_a: ModelArg, model_b: ModelArg, config: CompareConfig) -> ComparePlan:
    """Load both models, pair their inputs and outputs, and find the samples (no inference yet)."""
    graph_a, graph_b = as_graph(model_a), as_graph(model_b)
    io_map = split_map(config, graph_a)
    outputs = match_names(graph_a.outputs, graph_b.outputs, io_map, what="output")
    if not outputs.pairs:
        raise InputDataError(
            f"no output of {graph_a.display_name} ({', '.join(graph_a.output_names)}) could be paired "
            f"with an output of {graph_b.display_name} ({', '.join(graph_b.output_names)})",
            hint="pair them with --map A_NAME=B_NAME")
    check_gate_targets(config.gates, [p.a for p in outputs.pairs])
    inputs = match_names(graph_a.inputs, graph_b.inputs, io_map, what="input", allow_map_unknown=True)
    if inputs.unmatched_a or inputs.unmatched_b:
        raise InputDataError(
            f"the models' inputs do not correspond: {graph_a.display_name} has "
            f"{', '.join(graph_a.input_names)}; {graph_b.display_name} has {', '.join(graph_b.input_names)}",
            hint="pair them with --map A_INPUT=B_INPUT")
    samples = open_samples(config.inputs, graph_a.inputs, config.synthetic, config.reader_options)
    return ComparePlan(graph_a, graph_b, outputs, inputs, samples)


def compare_models(model_a: ModelArg, model_b: ModelArg, config: Optional[CompareConfig] = None,
                   *, progress: Progress = no_progress) -> CompareResult:
    """Compare the outputs of `model_a` (the reference) and `model_b` over the configured samples.

    Samples stream: each is run on both models, reduced to metrics and dropped. Returns a
    `CompareResult`; raises `MiError` subclasses only when no result is possible.
    """
    config = config or CompareConfig()
    if not config.executor.in_process and (config.golden or config.layers is not None):
        raise UsageError(f"{'--golden' if config.golden else '--layers'} runs in this process",
                         hint="leave --workers and --executor out")
    if config.golden:
        from .golden import compare_golden

        return compare_golden(model_a, config, progress=progress)
    plan = plan_comparison(model_a, model_b, config)
    if config.layers is not None:
        return _compare_with_layers(plan, config, progress)
    from .compare_batch import compare_outputs, lost_finding

    trackers = [TensorTracker(p.a, p.b, gates=list(config.gates), topk=config.topk,
                              keep_per_sample=config.per_sample) for p in plan.outputs.pairs]
    # samples run in this process or in workers (config.executor); either way the per-sample sums
    # are folded here in sample order, so the result is the same whichever ran them
    notes, lost = compare_outputs(plan, config, trackers, progress)
    result = build_result(plan, config, trackers, notes)
    return replace(result, findings=[*result.findings, lost_finding(lost)]) if lost else result


def _compare_with_layers(plan: ComparePlan, config: CompareConfig, progress: Progress) -> CompareResult:
    from .layer_report import build_section, layer_gate_outcomes
    from .layers import run_layers

    assert config.layers is not None
    run = run_layers(plan, config, progress)
    section, notes = build_section(run, gate_layers=config.layers.gate_layers, worst_count=config.layers.worst)
    return build_result(plan, config, run.output_trackers, notes, layers=section, extra_gates=layer_gate_outcomes(run))


def run_pair(session_a: Session, session_b: Session, plan: ComparePlan, feeds: Dict, sample_id: str,
             outputs_a: Optional[Sequence[str]] = None, outputs_b: Optional[Sequence[str]] = None
             ) -> Tuple[Dict, Dict, List[str]]:
    """Run one sample on both models (B's feeds renamed and float-cast as B expects)."""
    names_a = list(outputs_a) if outputs_a is not None else [p.a for p in plan.outputs.pairs]
    names_b = list(outputs_b) if outputs_b is not None else [p.b for p in plan.outputs.pairs]
    out_a = session_a.run(feeds, names_a, sample=sample_id)
    feeds_b, cast_notes = adapt_feeds(rename_feeds(feeds, plan.inputs.pairs), session_b.input_dtypes)
    out_b = session_b.run(feeds_b, names_b, sample=sample_id)
    return out_a, out_b, cast_notes


def output_diff(tracker: TensorTracker, matched_by: str) -> OutputDiff:
    return OutputDiff(
        name=tracker.name, name_b=tracker.name_b, matched_by=matched_by,
        dtype_a=tracker.dtype_a, dtype_b=tracker.dtype_b, shape_a=tracker.shape_a, shape_b=tracker.shape_b,
        samples=tracker.samples, dataset=tracker.dataset_metrics(), worst=tracker.worst_metrics(),
        mean=tracker.mean_metrics(), nonfinite=tracker.total.nonfinite(), kl_mode=tracker.total.kl_mode,
        shape_mismatch_samples=tracker.shape_mismatch_samples,
        per_sample=[SampleMetrics(**row) for row in tracker.per_sample],
    )


def gate_outcomes(tracker: TensorTracker, scope: str = "output") -> List[GateOutcome]:
    outcomes = []
    for tally in tracker.tallies:
        gate = tally.gate
        outcomes.append(GateOutcome(
            gate=gate.describe(), metric=gate.metric, op=gate.op, threshold=gate.threshold,
            tensor=tracker.name, passed=tally.failed == 0, worst=tally.worst, failed_samples=tally.failed,
            total_samples=tally.evaluated, examples=list(tally.examples), applicable=tally.evaluated > 0,
            scope=scope))
    return outcomes


def tracker_findings(tracker: TensorTracker, what: str = "output") -> List[Finding]:
    findings = []
    if tracker.shape_mismatch_samples:
        findings.append(Finding(
            rule="MI801", severity=Severity.ERROR, tensor=tracker.name,
            message=f"{what} '{tracker.name}': shapes differ ({tracker.shape_a} vs {tracker.shape_b}) "
                    f"on {tracker.shape_mismatch_samples} sample(s)"))
    mismatch = tracker.total.nonfinite_mismatch
    if mismatch:
        nf = tracker.total.nonfinite()
        findings.append(Finding(
            rule="MI802", severity=Severity.ERROR, tensor=tracker.name,
            message=f"{what} '{tracker.name}': {mismatch} NaN/Inf value(s) not matched by the other model "
                    f"(A: {nf['nan_a']} NaN, {nf['inf_a']} Inf; B: {nf['nan_b']} NaN, {nf['inf_b']} Inf)",
            hint="run 'mi nan-bisect' on the model that produces them"))
    return findings


def build_result(plan: ComparePlan, config: CompareConfig, trackers: Sequence[TensorTracker],
                 notes: Sequence[str], *, layers: Optional[LayerSection] = None,
                 extra_gates: Sequence[GateOutcome] = ()) -> CompareResult:
    methods = {p.a: p.method for p in plan.outputs.pairs}
    findings: List[Finding] = []
    for name in plan.outputs.unmatched_a:
        findings.append(Finding(rule="MI803", severity=Severity.ERROR, tensor=name,
                                message=f"output '{name}' of the first model has no counterpart in the second",
                                hint="pair it with --map A_NAME=B_NAME"))
    for name in plan.outputs.unmatched_b:
        findings.append(Finding(rule="MI803", severity=Severity.WARNING, tensor=name,
                                message=f"output '{name}' of the second model has no counterpart in the first"))
    gates: List[GateOutcome] = []
    for tracker in trackers:
        findings.extend(tracker_findings(tracker))
        gates.extend(gate_outcomes(tracker))
    gates.extend(extra_gates)
    warnings = list(plan.outputs.warnings) + list(plan.inputs.warnings) + list(plan.samples.notes) + list(notes)
    return CompareResult(
        models=[ModelRef.of(plan.graph_a, "reference"), ModelRef.of(plan.graph_b, "candidate")],
        config=config.to_dict(), runtime=config.runtime.to_dict(), inputs=plan.samples.describe(),
        outputs=[output_diff(t, methods[t.name]) for t in trackers], gates=gates, findings=findings,
        warnings=warnings, unmatched_a=list(plan.outputs.unmatched_a), unmatched_b=list(plan.outputs.unmatched_b),
        samples=len(plan.samples), layers=layers,
    )
