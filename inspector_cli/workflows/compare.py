"""`compare_models`: run two models on the same samples and compare their outputs (and, with
`layers`, every paired intermediate tensor: see compare/layers.py; with `golden`, one model against
saved outputs: see compare/golden.py). The engine is the compare/ package; this module only
chooses which of its paths runs."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional, Sequence

from ..compare.batch import EarlySessions, compare_outputs, early_sessions, lost_finding
from ..compare.config import CompareConfig
from ..compare.outputs import build_result
from ..compare.plan import ComparePlan, ModelArg, plan_comparison, plan_from_files
from ..diff.engine import TensorTracker
from ..errors import UsageError
from ..progress import Progress, no_progress
from ..results.base import Finding
from ..core.runner import cpu_only
from ..results.compare import CompareResult
from ..results.placement import PartitionChange
from ..placement import mark_moved_rows, moved_tensors, partition_changes, placement_findings, session_placement

if TYPE_CHECKING:
    from ..compare.layers import LayerRun
    from ..remedy.config import RemedyRequest

# The layer pass, golden files, remedies and scope roll-ups are imported where they run: an
# outputs-only comparison (what a CI gate runs most) does not pay for their imports (issue 16).


def compare_models(model_a: ModelArg, model_b: ModelArg, config: Optional[CompareConfig] = None,
                   *, progress: Progress = no_progress, remedy: Optional["RemedyRequest"] = None) -> CompareResult:
    """Compare the outputs of `model_a` (the reference) and `model_b` over the configured samples.

    Samples stream: each is run on both models, reduced to metrics and dropped. Returns a
    `CompareResult`; raises `MiError` subclasses only when no result is possible.
    """
    config = config or CompareConfig()
    if remedy is not None and remedy.active:
        if config.golden:
            raise UsageError("--fallback-plan, --bisect-optimizers and --labels need MODEL_B (not --golden) for now")
        result = compare_models(model_a, model_b, config, progress=progress)
        from ..remedy.compare_run import run_remedies

        # the remedies run on the same pairing and samples, after the comparison (issue 18)
        section, findings = run_remedies(model_a, model_b, config, remedy, result.layers)
        if result.remedy is not None:
            section = replace(section, quant_steps=result.remedy.quant_steps)
        if remedy.simulated:
            rows, finding = _simulated(model_a, model_b, config, result)
            section = replace(section, simulated=rows)
            findings += [finding] if finding else []
        return replace(result, remedy=section, findings=[*result.findings, *findings])
    if config.golden:
        from ..compare.golden import compare_golden

        return compare_golden(model_a, config, progress=progress)
    early = early_sessions(model_a, model_b, config)  # outputs only: sessions built from the files meanwhile
    plan = _plan(model_a, model_b, config, early)
    if config.layers is not None:
        return _compare_with_layers(plan, config, progress)
    trackers = [TensorTracker(p.a, p.b, gates=list(config.gates), topk=config.topk,
                              keep_per_sample=config.per_sample) for p in plan.outputs.pairs]
    # samples run in this process or in workers (config.executor); either way the per-sample sums
    # are folded here in sample order, so the result is the same whichever ran them
    run = compare_outputs(plan, config, trackers, progress, early)
    result = build_result(plan, config, trackers, run.notes)
    result = replace(result, findings=[*result.findings, lost_finding(run.lost)]) if run.lost else result
    a, b = run.assignment or (None, None)
    return with_placement(result, plan, config, a, b)


def _plan(model_a: ModelArg, model_b: ModelArg, config: CompareConfig, early: Optional[EarlySessions]) -> ComparePlan:
    """The comparison's plan. Outputs only, both models plain files (`early` is being built from them):
    from the files' headers alone, without onnx or either graph, when both sessions built (issue 16);
    otherwise (and when a session failed, whose error the usual path then reports) both graphs load."""
    if early is not None:
        plan = plan_from_files(model_a, model_b, config)  # planning errors first, as on the usual path
        if plan is not None and early.result() is not None:
            return plan
    return plan_comparison(model_a, model_b, config)


def _compare_with_layers(plan: ComparePlan, config: CompareConfig, progress: Progress) -> CompareResult:
    from ..compare.layers import run_layers
    from ..compare.section import build_section, layer_gate_outcomes
    from ..inspection.rollups import attach_scopes
    from ..remedy.qstep_layers import quant_step_findings, quant_step_rows
    from ..results.remedy import RemedySection

    assert config.layers is not None
    run = run_layers(plan, config, progress)
    section, notes = build_section(run, gate_layers=config.layers.gate_layers, worst_count=config.layers.worst,
                                   atol=config.layers.atol)
    result = build_result(plan, config, run.measured.output_trackers, notes, layers=section,
                          extra_gates=layer_gate_outcomes(run))
    result = attach_scopes(result, plan.graph_a, plan.graph_b)
    result = _layer_placement(result, plan, config, run)
    steps = quant_step_rows(plan.graph_b.model, section)  # error in quantisation steps (issue 18)
    if not steps:
        return result
    return replace(result, remedy=RemedySection(quant_steps=steps),
                   findings=[*result.findings, *quant_step_findings(steps)])


def with_placement(result: CompareResult, plan: ComparePlan, config: CompareConfig, assignment_a: Optional[list],
                   assignment_b: Optional[list], partition: Sequence[PartitionChange] = ()) -> CompareResult:
    """The result with both sessions' placement and the --require-provider findings (MI871)."""
    placements = [session_placement("A", config.runtime_a, assignment_a, plan.graph_a),
                  session_placement("B", config.runtime_of_b, assignment_b, plan.graph_b)]
    findings = placement_findings(placements, config.require_provider)
    return replace(result, placement=[p for p in placements if p is not None], partition=list(partition),
                   findings=[*result.findings, *findings])


def _layer_placement(result: CompareResult, plan: ComparePlan, config: CompareConfig, run: "LayerRun") -> CompareResult:
    """Placement of the plain sessions (or, CPU only, of the capture sessions: all CPU either way), and
    per model read by exposing tensors, its partition against the plain one, moved rows marked."""
    captured = run.measured.instrumented
    assignments, changes, moved = {}, [], {}
    for side, runtime, graph in ((run.plan.side_a, config.runtime_a, plan.graph_a),
                                 (run.plan.side_b, config.runtime_of_b, plan.graph_b)):
        chunks = captured.get(side.label) or [None]
        assignments[side.label] = side.plain_assignment or (chunks[0] if cpu_only(runtime) else None)
        if side.mode != "instrumented" or side.plain_assignment is None or cpu_only(runtime):
            continue
        plain = session_placement(side.label, runtime, side.plain_assignment, graph)
        change = partition_changes(plain, chunks, runtime, side.label)
        if change is not None:
            changes.append(change)
            moved[side.label] = moved_tensors(change, graph)
    result = replace(result, layers=mark_moved_rows(result.layers, moved))
    return with_placement(result, plan, config, assignments["A"], assignments["B"], changes)


def _simulated(model_a: ModelArg, model_b: ModelArg, config: CompareConfig, deployed: CompareResult
               ) -> "tuple[list, Optional[Finding]]":
    """B again with optimisations off: its QDQ arithmetic, beside the deployed kernels (`--simulated`)."""
    from ..remedy.qstep_layers import simulated_finding, simulated_rows
    from ..core.graph import ModelGraph
    from ..core.model_arg import as_graph
    from ..core.runner import OptLevel
    from ..core.fingerprint import read_cpuinfo

    runtime_b = (config.runtime_b or config.runtime).replace(opt_level=OptLevel.DISABLE)
    simulated = compare_models(model_a, model_b, replace(config, runtime_b=runtime_b))

    def by_name(result: CompareResult) -> dict:
        found = {o.name: o.dataset for o in result.outputs}
        found.update({layer.name: layer.dataset for layer in (result.layers.layers if result.layers else [])})
        return found

    rows = simulated_rows(by_name(deployed), by_name(simulated))
    graph_b = model_b if isinstance(model_b, ModelGraph) else as_graph(model_b)
    return rows, simulated_finding(rows, graph_b.model, read_cpuinfo()["flags"])
