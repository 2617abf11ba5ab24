"""`probe_model`: statistics of chosen tensors over a data set, with triggers, quantisation
ranges, plugins and a history of runs.

Tensors are captured under a memory budget (`core.capture`), reduced sample by sample by the
trackers of `inspector_cli.probe` and dropped; nothing grows with the number of samples except
the optional per-sample rows.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from ..inspection.rollups import attach_scopes
from ..core.types import tensor_shapes
from ..core.capture import estimate_sizes, plan_capture
from ..core.graph import ModelGraph, load_model
from ..core.model_arg import ModelArg, as_graph
from ..core.refusals import require_loadable
from ..core.inputs import SampleSet, open_samples
from ..core.masks import find_masks
from ..core.select import select_tensors
from ..core.types import TensorMap
from ..errors import InputDataError, UsageError
from ..plugins import call_plugin, load_plugin
from ..probe.batch import lost_finding, probe_blocks
from ..probe.config import ProbeConfig
from ..probe.dump import finish_dump, open_dump
from ..probe.quant import Quantizer, QuantTracker, constant_value, find_quantizers
from ..probe.report import build_findings, check_since, quant_results, record_history
from ..probe.runner import Hit, capture_chunks
from ..probe.triggers import parse_triggers
from ..progress import Progress, no_progress
from ..results.base import ModelRef
from ..results.probe import DumpInfo, PluginResult, ProbeResult, TriggerHit
from ..placement import exposed_placement, plain_check_wanted, placement_findings, unchecked_note



@dataclass
class ProbePlan:
    """What a probe will run, decided before any inference."""

    graph: ModelGraph
    tensors: List[str]
    chunks: List[List[str]]
    samples: SampleSet
    capture: Dict[str, object]
    quant: List[Quantizer]
    notes: List[str]
    input_shapes: Dict[str, Tuple[int, ...]]



def plan_probe(graph: ModelGraph, config: ProbeConfig, samples: Optional[SampleSet] = None) -> ProbePlan:
    """Select the tensors, find the quantisers and the samples (`samples`, else from the config), and
    split the capture into chunks."""
    notes: List[str] = []
    quant: List[Quantizer] = []
    if config.quant_ranges:
        quant, skipped = find_quantizers(graph)
        notes.extend(skipped)
        if not quant:
            notes.append(f"--quant-ranges: {graph.display_name} has no QuantizeLinear or QLinear op with constant parameters")
    patterns = config.select or (() if config.quant_ranges else ("all",))
    tensors = select_tensors(graph, patterns) if patterns else []
    extra = [q.tensor for q in quant if q.source != "weight"]
    tensors = sorted(dict.fromkeys([*tensors, *extra]), key=graph.topo_position)
    if not tensors and not quant:
        if config.quant_ranges:  # e.g. a weight-only quantisation: DequantizeLinear of weights, no QuantizeLinear
            raise UsageError(f"{graph.display_name}: nothing to probe: --quant-ranges found no QuantizeLinear or "
                             "QLinear op with constant parameters", hint="add --select to probe tensors")
        raise UsageError(f"{graph.display_name}: nothing to probe", hint="choose tensors with --select")
    if samples is None:
        samples = open_samples(config.inputs, graph.inputs, config.synthetic)
    shapes = tensor_shapes(samples.load(samples.refs[0]))
    declared = {i.name: i.shape for i in graph.inputs}
    # Static inputs equal to the samples: the graph's own (cached) shape inference serves both the
    # size estimate and the session's output declarations, saving a second inference pass.
    same = all(declared.get(k) == v for k, v in shapes.items())
    sizes = estimate_sizes(graph, tensors, None if same else shapes)
    plan = plan_capture(sizes, config.capture_budget)
    chunks = [[tensors[i] for i in chunk] for chunk in plan.chunks] if tensors else []
    return ProbePlan(graph, tensors, chunks, samples, plan.to_dict(), quant, notes, shapes)


def probe_model(model: ModelArg, config: Optional[ProbeConfig] = None, *,
                progress: Progress = no_progress, samples: Optional[SampleSet] = None) -> ProbeResult:
    """Probe the configured tensors of `model` over the configured samples (or `samples`: e.g. the
    steps of a sequence, which read their state from the probe's own runs).

    Returns a `ProbeResult`; raises `MiError` subclasses only when no result is possible.
    """
    config = config or ProbeConfig()
    config = replace(config, runtime=config.runtime.without_spinning())
    triggers = parse_triggers(config.break_on)
    if config.dump_dir and not triggers:
        raise UsageError("--dump needs --break-on: it writes the sample that met the condition")
    for spec in config.plugins:  # unknown or broken plugins are usage errors before any inference
        load_plugin(spec)
    graph = as_graph(model, lazy=True)  # weights stay in the file: no parse or re-serialisation of them
    require_loadable(graph, config.runtime)  # its sessions expose tensors: onnxruntime would refuse the file
    check_since(config, graph)
    plan = plan_probe(graph, config, samples)
    # blocks of samples, in this process or in workers (config.executor): merged in sample order
    started = time.perf_counter()
    run = probe_blocks(graph, plan, config, progress)
    run_seconds = time.perf_counter() - started
    hit, done, consumers = run.hit, run.done, run.consumers
    dumps: List[DumpInfo] = [_dump_again(plan, config, hit)] if hit is not None and config.dump_dir else []
    quant_trackers = _weight_trackers(plan) + [q for qs in consumers.quant.values() for q in qs]
    reference = _reference_ranges(plan, config, done) if config.reference else {}
    trigger = None
    if hit is not None:
        trigger = TriggerHit(condition=hit.trigger.text, sample=hit.stats.sample, sample_index=hit.sample_index,
                             tensor=hit.stats.tensor, values=hit.trigger.values(hit.stats),
                             dump=dumps[0] if dumps else None)
    tensors = [consumers.trackers[t].finish() for t in plan.tensors]
    check = plain_check_wanted(config.require_provider, run.build_seconds, run_seconds)
    where = exposed_placement(graph, config.runtime, [run.assignments[i] for i in sorted(run.assignments)],
                              check_plain=check)
    tensors = [replace(t, moved=True) if t.name in where.moved else t for t in tensors]
    warnings = list(plan.samples.notes) + plan.notes
    if not check and run.assignments:
        warnings += unchecked_note(config.runtime, run.build_seconds, run_seconds)
    if run.restarted:
        warnings.append("a trigger in a later capture chunk stopped at an earlier sample: statistics were "
                        f"recomputed over the first {done} sample(s)")
    quant = quant_results(quant_trackers, reference, config.max_saturation)
    plugin_results = [PluginResult(name=p.name, spec=spec, description=p.description,
                                   rows=dict(call_plugin(p, "summary") or {}))
                      for (p, _), spec in zip(consumers.plugins, config.plugins)]
    model_ref = ModelRef.of(graph, "model")
    history = record_history(config, graph, model_ref, plan.samples, done, tensors, warnings)
    per_sample = [row for t in plan.tensors for row in consumers.trackers[t].rows] if config.per_sample else []
    return attach_scopes(ProbeResult(
        models=[model_ref], config=config.to_dict(), runtime=config.runtime.to_dict(),
        inputs=plan.samples.describe(), tensors=tensors, samples=done, per_sample=per_sample, trigger=trigger,
        quant=quant, plugins=plugin_results, history=history,
        findings=build_findings(tensors, trigger, quant, config, find_masks(graph)) + ([lost_finding(run.lost)] if run.lost else [])
        + placement_findings([where.placement], config.require_provider),
        warnings=warnings, capture=plan.capture, placement=where.placement, partition=where.change), graph)


def _dump_again(plan: ProbePlan, config: ProbeConfig, hit: Hit) -> DumpInfo:
    assert config.dump_dir is not None
    ref = plan.samples.refs[hit.sample_index]
    writer = open_dump(config.dump_dir, hit.stats.sample, config.dump_max_bytes)
    one = plan.samples.subset([ref])

    def consume(tensors: TensorMap) -> None:
        for name in plan.tensors:
            if name in tensors:
                writer.add(name, tensors[name])

    capture_chunks(plan.graph, config.runtime, plan.chunks, one, consume)
    return finish_dump(writer, plan.samples.load(ref))


def _weight_trackers(plan: ProbePlan) -> List[QuantTracker]:
    trackers = []
    for spec in plan.quant:
        if spec.source == "weight":
            value, _ = constant_value(plan.graph, spec.tensor)
            tracker = QuantTracker(spec)
            if value is not None:
                tracker.update(value)
            trackers.append(tracker)
    return trackers


def _reference_ranges(plan: ProbePlan, config: ProbeConfig, done: int) -> Dict[Tuple[str, str], dict]:
    """The quantisers' checks on the float reference model's same-named tensors."""
    assert config.reference is not None
    reference = load_model(config.reference)
    if sorted(reference.input_names) != sorted(plan.graph.input_names):
        raise InputDataError(f"--reference {config.reference}: its inputs ({', '.join(reference.input_names)}) differ "
                             f"from the model's ({', '.join(plan.graph.input_names)})")
    known = set(reference.producer) | set(reference.input_names)
    specs = [s for s in plan.quant if s.source == "activation" and s.tensor in known]
    if not specs:
        return {}
    trackers: Dict[str, List[QuantTracker]] = {}
    for spec in specs:
        trackers.setdefault(spec.tensor, []).append(QuantTracker(spec))
    names = list(trackers)
    samples = plan.samples if done >= len(plan.samples) else plan.samples.subset(plan.samples.refs[:done])
    sizes = estimate_sizes(reference, names, plan.input_shapes)
    chunks = [[names[i] for i in chunk] for chunk in plan_capture(sizes, config.capture_budget).chunks]

    def consume(tensors: TensorMap) -> None:
        for name, array in tensors.items():
            for tracker in trackers.get(name, ()):
                tracker.update(array)

    capture_chunks(reference, config.runtime, chunks, samples, consume)
    return {(t.spec.node, t.spec.tensor): t.finish() for ts in trackers.values() for t in ts}
