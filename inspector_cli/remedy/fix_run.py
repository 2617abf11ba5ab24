"""`mi fix` end to end: compare's pairing and samples, the ranking, `plan_fix` (or the fp16 block list),
the written model re-checked from its file, the exports, the findings. workflows/fix.py wraps it.

Findings: MI861 no plan within the budget meets the targets (error), MI864 the written model misses them when
re-checked (error), MI867 the plan keeps most quantised nodes in float (warning), MI868 the search stopped at
its budget with candidates untried (warning), MI869 even every quantised node in float misses the targets (error).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..compare.plan import ModelArg, plan_comparison
from ..core.lazyload import save_standalone
from ..executor.base import ExecutorSpec
from ..results.base import Finding, Severity
from ..results.fix import FixChoiceRow, FixCost, FixGroupRow, FixPolish, FixStepRow
from ..results.remedy import AccuracyRow, metric_text
from ..serialize import write_atomic
from .compare_run import (_Standalone, fp16_fallback, is_fp16, isolated_own_errors, isolation_budget,
                          qoperator_kernels, refuse_qoperator)
from .config import FixConfig


def run_fix(model_a: ModelArg, model_b: ModelArg, config: FixConfig) -> Dict[str, Any]:
    """The fields of a `FixResult` (workflows/fix.py adds the models, inputs and timing)."""
    from .evaluate import parse_target
    from .fix import plan_fix
    from .qdq_patch import quantised_nodes

    plan = plan_comparison(model_a, model_b, config.compare)
    models = _Standalone(plan)
    ids, samples = [], []
    for sample_id, feeds in plan.samples:
        ids.append(sample_id)
        samples.append(feeds)
    runtime = config.compare.runtime
    targets = [parse_target(t) for t in config.targets]
    from ..results.base import ModelRef

    common = {"models": [ModelRef.of(plan.graph_a, "fp32"), ModelRef.of(plan.graph_b, "quantised")],
              "runtime": runtime.to_dict(), "inputs": plan.samples.describe()}
    if is_fp16(models.b):
        section = fp16_fallback(models.a, ids, samples, runtime, config.remedy_config(), inputs=models.inputs)
        from .compare_run import plan_findings

        return {**common, "mode": "fp16", "found": section.found, "targets": section.targets, "baseline": section.baseline,
                "baseline_meets": bool(section.steps and section.steps[0].meets), "final": section.final,
                "strategy": "fp16", "fp16": section, "runs": section.runs, "written_model": section.written_model,
                "recheck": section.recheck, "recheck_meets": section.recheck_meets,
                "findings": plan_findings(section, config.remedy_config())}
    nodes = quantised_nodes(models.b)
    if not nodes:
        refuse_qoperator(models.b, "mi fix: QUANTISED")
    binding, notes = _binding(config, plan, ids, samples, runtime)
    calibration = _calibration(config, plan)
    ranking = "weight-sqnr"

    def own_errors() -> Any:
        """The isolated own errors, asked for by plan_fix only when there is something to rank (the baseline
        misses the targets, or --polish): a quantised model that meets them costs no layer pass (3.5 s of
        a 6 s run on the zoo's ResNet)."""
        nonlocal ranking
        if len(nodes) > isolation_budget(config.max_runs):
            return None
        try:
            own, _layers, _seconds = isolated_own_errors(plan, config.compare, models.b)
        except Exception:  # noqa: BLE001 - the layer pass cannot run on this pair: the heuristic still can
            return None
        ranking = "isolated" if own else ranking
        return own

    fix = plan_fix(models.a, models.b, samples, targets, sample_ids=ids, own_errors=own_errors,
                   remedies=config.chosen_remedies(), calibration=calibration, labels=binding,
                   max_nodes=config.max_nodes, max_runs=config.max_runs, runtime=runtime,
                   executor=ExecutorSpec(workers=config.workers), journal=config.journal, resume=config.resume,
                   polish_runs=config.polish)
    written, recheck, meets, accuracy = _write(fix, config, models, ids, samples, targets, binding)
    export_file = _write_exports(fix, config)
    cost = fix.applied.cost
    op_of = {n.name: n.op_type for n in models.b.graph.node}
    return {
        **common, "mode": "qdq", "found": fix.found, "targets": fix.targets, "baseline": fix.baseline,
        "baseline_meets": fix.baseline_meets, "final": fix.final, "remedies": fix.remedies,
        "choices": [FixChoiceRow(c.head, fix.fp32_names.get(c.head, c.head), c.remedy, list(c.nodes),
                                 op_of.get(c.head, "")) for c in fix.choices],
        "cost": FixCost(cost.float_nodes, cost.tensors_16bit, cost.per_channel_weights, cost.recalibrated_tensors,
                        cost.added_bytes, len(nodes), round(fix.float_share, 6), fix.near_float),
        "strategy": fix.strategy, "no_answer": fix.no_answer,
        "groups": [FixGroupRow(g.name, g.nodes, g.kept_float, g.untried, dict(g.requantised)) for g in fix.groups],
        "steps": [FixStepRow(s.action, s.node, s.float_nodes, dict(s.remedies), dict(s.metrics), s.meets,
                             s.latency_ms, s.partial) for s in fix.steps],
        "runs": fix.runs, "replayed": fix.replayed, "inferences": fix.inferences, "seconds": round(fix.seconds, 3),
        "baseline_latency_ms": fix.baseline_latency_ms, "final_latency_ms": fix.final_latency_ms,
        "exports": fix.exports, "ranges": fix.ranges, "written_model": written, "export_file": export_file,
        "recheck": recheck, "recheck_meets": meets, "labels": str(config.labels) if config.labels else None,
        "label_notes": notes, "accuracy": accuracy, "ranking": ranking if fix.ranked else "none",
        "journal": str(config.journal) if config.journal else None, "budget_note": fix.budget_note,
        "polish": FixPolish(**fix.polish.to_dict()) if fix.polish else None,
        "skipped": {**fix.skipped, **qoperator_kernels(models.b)}, "findings": _findings(fix, config, meets)}


def _binding(config: FixConfig, plan: Any, ids: List[str], samples: List[Any], runtime: Any) -> Tuple[Any, List[str]]:
    """The label binding accuracy targets use (the first of the file's), and the notes of all of them."""
    if config.labels is None:
        return None, []
    from ..core.runner import Session
    from .label_binding import bind_labels
    from .labels import load_labels

    labels = load_labels(config.labels)
    session = Session(models_source(plan.graph_a), runtime, label="A")
    first = session.run(samples[0], sample=ids[0]) if samples else {}
    bindings = bind_labels(labels, ids, first)
    return (bindings[0] if bindings else None), [b.note for b in bindings]


def models_source(graph: Any) -> "bytes | str":
    path = getattr(graph, "path", None)
    return str(path) if path else graph.model.SerializeToString()


def _calibration(config: FixConfig, plan: Any) -> Optional[List[Any]]:
    if not config.calibration:
        return None
    from ..core.inputs import open_samples

    found = open_samples(config.calibration, plan.graph_a.inputs, config.compare.synthetic,
                         config.compare.reader_options)
    return [feeds for _id, feeds in found]


def _write(fix: Any, config: FixConfig, models: Any, ids: List[str], samples: List[Any], targets: List[Any],
           binding: Any) -> Tuple[Optional[str], Dict[str, Optional[float]], Optional[bool], List[AccuracyRow]]:
    """Save the plan's model standing alone, re-check its targets from the file, and its accuracy."""
    from .evaluate import Evaluator

    if config.write_model is None or fix.model is None:
        return None, {}, None, []
    path = save_standalone(fix.model, config.write_model, models.inputs)
    ev = Evaluator(samples, ids, targets, config.compare.runtime, extra=binding)
    ev.set_reference(models.a.SerializeToString())
    result = ev.evaluate(str(path), label=str(path))
    accuracy: List[AccuracyRow] = []
    if binding is not None:
        from .labels import accuracy_report

        written = ev.outputs(str(path), label=str(path))
        scores_a = {s: out[binding.output] for s, out in zip(ids, ev.reference)}
        scores_b = {s: out[binding.output] for s, out in zip(ids, written)}
        labels = {s: {binding.output: v} for s, v in binding.labels.items()}
        accuracy = [accuracy_report(scores_a, scores_b, labels, binding.output, k, judge=binding.judge)
                    for k in binding.ks]
    return str(path), result.summary(targets), result.meets, accuracy


def _write_exports(fix: Any, config: FixConfig) -> Optional[str]:
    documents = []
    if config.export is not None:
        documents.append((config.export, {"targets": fix.targets, "found": fix.found, "metrics": fix.final,
                                          "cost": fix.applied.cost.to_dict(), **fix.exports}))
    if config.exclude_list is not None:
        ort = fix.exports["onnxruntime"]
        documents.append((config.exclude_list, {"nodes_to_exclude": ort["nodes_to_exclude"],
                                                "extra_options": ort["extra_options"], "targets": fix.targets,
                                                "found": fix.found, "metrics": fix.final}))
    for path, document in documents:
        path = Path(path)
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            write_atomic(path, yaml.safe_dump(document, sort_keys=False))
        else:
            write_atomic(path, json.dumps(document, indent=2) + "\n")
    return str(config.export) if config.export else None


def _findings(fix: Any, config: FixConfig, recheck_meets: Optional[bool]) -> List[Finding]:
    findings: List[Finding] = []
    best = ", ".join(f"{k} {metric_text(v)}" for k, v in fix.final.items())
    if fix.no_answer:
        strongest = fix.remedies[-1] if fix.remedies else "float"
        findings.append(Finding("MI869", Severity.ERROR, f"even every candidate given the strongest remedy allowed "
                                f"({strongest}) misses the targets: no plan can meet them ({best})",
                                hint="allow more --remedies (float), relax --target, or check the labels"))
    elif not fix.found:
        findings.append(Finding("MI861", Severity.ERROR, f"no plan meets the targets; best found: {best}",
                                hint="raise --max-runs or --max-nodes, allow more --remedies, or relax --target"))
    if recheck_meets is False:
        findings.append(Finding("MI864", Severity.ERROR, f"{config.write_model}: the written model misses the "
                                                         "targets when re-checked"))
    if fix.found and fix.near_float:
        findings.append(Finding("MI867", Severity.WARNING,
                                f"near-float plan: {fix.float_share:.0%} of the quantised nodes stay in float",
                                hint="the quantisation itself is broken here (see the groups table: what each bought)"))
    if fix.budget_note:
        findings.append(Finding("MI868", Severity.WARNING, fix.budget_note, hint="raise --max-runs"))
    return findings
