"""The parts of a probe result built after the run: findings, quantisation rows, history, lists."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core.graph import ModelGraph
from ..core.inputs import SampleSet
from ..core.masks import Mask, MaskAnalysis
from ..core.select import selectable_tensors
from ..errors import UsageError
from ..results.base import Finding, ModelRef, Severity
from ..results.probe import (HistoryEntry, HistoryInfo, HistoryListResult, QuantRange, TensorEntry, TensorListResult,
                             TensorStats, TriggerHit)
from .config import ProbeConfig
from .history import HistoryStore, changes_since, history_key, make_summary, new_run_id
from .quant import QuantTracker

LOW_RANGE_USE = 0.1


def quant_results(trackers: Sequence[QuantTracker], reference: Dict[Tuple[str, str], dict],
                  max_saturation: float) -> List[QuantRange]:
    rows = []
    for tracker in trackers:
        spec, seen = tracker.spec, tracker.finish()
        ref = reference.get((spec.node, spec.tensor))
        if ref is not None:
            ref = dict(ref, flagged=ref["saturated_share"] > max_saturation)
        rows.append(QuantRange(
            node=spec.node, op_type=spec.op_type, tensor=spec.tensor, source=spec.source, qtype=spec.qtype,
            scale=float(spec.scale.min()), zero_point=int(spec.zero_point.reshape(-1)[0]), axis=spec.axis,
            representable=tracker.representable(), observed=seen["observed"], count=seen["count"],
            saturated=seen["saturated"], saturated_share=seen["saturated_share"], used_share=seen["used_share"],
            flagged=seen["saturated_share"] > max_saturation or bool(ref and ref["flagged"]), reference=ref,
            clipped_low=seen["clipped_low"]))
    return rows


def build_findings(tensors: Sequence[TensorStats], trigger: Optional[TriggerHit], quant: Sequence[QuantRange],
                   config: ProbeConfig, analysis: Optional[MaskAnalysis] = None) -> List[Finding]:
    """Defects (errors: exit 1) and observations (warnings, info) from the statistics; `analysis`:
    the model's intended infinities (core/masks.py), each reported as what it is."""
    findings: List[Finding] = mask_findings(analysis.masks if analysis else (), tensors)
    findings += identity_findings(tensors, analysis)
    if trigger is not None:
        values = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in trigger.values.items())
        findings.append(Finding(rule="MI824", severity=Severity.ERROR, tensor=trigger.tensor,
                                message=f"--break-on '{trigger.condition}' met on sample {trigger.sample} "
                                        f"(#{trigger.sample_index}) by tensor '{trigger.tensor}' ({values})",
                                data={"sample": trigger.sample, "sample_index": trigger.sample_index}))
    for t in tensors:
        if t.masked_rows and not t.inf:
            findings.append(masked_rows_finding(t, analysis))
        elif t.nan or t.inf:
            findings.append(Finding(rule="MI821", severity=Severity.ERROR, tensor=t.name, node=t.node or None,
                                    message=f"tensor '{t.name}' holds {t.nan} NaN and {t.inf} Inf value(s)",
                                    hint="run 'mi nan-bisect' to find the node that produces them first"))
        if t.channels and t.channels.dead:
            dead = t.channels.dead
            shown = ", ".join(map(str, dead[:8])) + (" ..." if len(dead) > 8 else "")
            findings.append(Finding(rule="MI822", severity=Severity.WARNING, tensor=t.name, node=t.node or None,
                                    message=f"tensor '{t.name}': {len(dead)} of {t.channels.channels} channels "
                                            f"(axis {t.channels.axis}) are zero on every sample: {shown}",
                                    data={"dead": dead}))
        if t.zero_samples:
            findings.append(Finding(rule="MI823", severity=Severity.WARNING, tensor=t.name, node=t.node or None,
                                    message=f"tensor '{t.name}' is all-zero on {t.zero_samples} of {t.samples} "
                                            f"sample(s) ({t.zero_samples / t.samples:.0%})",
                                    data={"samples": t.zero_sample_ids}))
    for q in quant:
        if q.flagged:
            where = [f"{q.saturated_share:.2%} of its input values saturate"]
            if q.reference and q.reference.get("flagged"):
                where.append(f"{q.reference['saturated_share']:.2%} of the reference model's values would")
            findings.append(Finding(
                rule="MI825", severity=Severity.ERROR, node=q.node, tensor=q.tensor,
                message=f"{q.op_type} '{q.node}': {'; '.join(where)} (representable "
                        f"[{q.representable[0]:.6g}, {q.representable[1]:.6g}], observed "
                        f"[{q.observed[0]:.6g}, {q.observed[1]:.6g}]; limit {config.max_saturation:.2%})",
                hint="recalibrate this quantiser's scale/zero point on representative data"))
        elif q.count and q.used_share < LOW_RANGE_USE and q.source != "qlinear-output":
            findings.append(Finding(rule="MI826", severity=Severity.INFO, node=q.node, tensor=q.tensor,
                                    message=f"{q.op_type} '{q.node}' uses {q.used_share:.1%} of its integer range"))
    return findings


def masked_rows_finding(t: TensorStats, analysis: Optional[MaskAnalysis]) -> Finding:
    """MI828: the NaN a Softmax makes of rows masked at every position; an error, unless the model
    replaces those rows itself (the ONNX Attention function's guard): then information."""
    softmax = (analysis.rows_of.get(t.name) if analysis else None) or t.node
    guard = analysis.guards.get(softmax) if analysis else None
    text = (f"tensor '{t.name}' holds {t.nan} NaN: {t.masked_rows} row(s) of Softmax '{softmax}' had every input "
            f"masked (-Inf), and Softmax of a row with no position left is 0/0 = NaN")
    if guard is not None:
        return Finding(rule="MI828", severity=Severity.INFO, tensor=t.name, node=softmax,
                       message=f"{text}; Where '{guard}' replaces those rows (the model's guard for a query with "
                               f"nothing to attend to): intended", data={"rows": t.masked_rows, "guard": guard})
    return Finding(rule="MI828", severity=Severity.ERROR, tensor=t.name, node=t.node or None, message=text,
                   hint="a query that may attend to nothing (an all-zero attention_mask row, or padding on the "
                        "wrong side): fill with the dtype's lowest value instead of -Inf, or fix the mask",
                   data={"rows": t.masked_rows})


def identity_findings(tensors: Sequence[TensorStats], analysis: Optional[MaskAnalysis]) -> List[Finding]:
    """MI830 (info): infinities that are a reduction's documented identity over an empty set."""
    if not analysis or not analysis.empty:
        return []
    findings = []
    for t in tensors:
        entry = analysis.empty.get(t.name)
        if entry is None or not t.masked or analysis.on_path(t.name):  # a mask's tensor: its masked values are the mask's
            continue
        value = "-inf" if entry.sign < 0 else "+inf"
        answer = "the log of an empty sum" if entry.op_type == "ReduceSum" else f"{entry.op_type} of no element"
        findings.append(Finding(
            rule="MI830", severity=Severity.INFO, tensor=t.name, node=entry.node,
            message=f"tensor '{t.name}': its {t.masked} {value} value(s) are {answer} ('{entry.node}' reduces "
                    f"'{entry.data}', which holds no element): the documented answer, not counted as Inf",
            data={"node": entry.node, "data": entry.data, "count": t.masked}))
    return findings


def mask_findings(masks: Sequence[Mask], tensors: Sequence[TensorStats]) -> List[Finding]:
    """MI829 (info): one per mask recognised, with the masked values it accounts for."""
    stats = {t.name: t for t in tensors}
    findings = []
    for mask in masks:
        masked = sum(stats[n].masked for n in mask.tensors if n in stats)
        where = [n for n in mask.tensors if n in stats and stats[n].masked]
        counted = (f": {masked} masked value(s) in {len(where)} tensor(s), not counted as Inf" if masked
                   else "")
        findings.append(Finding(rule="MI829", severity=Severity.INFO, node=mask.nodes[0] if mask.nodes else None,
                                tensor=(*mask.constants, *mask.inputs)[0], message=f"{mask.describe()}{counted}",
                                data={"constants": list(mask.constants), "inputs": list(mask.inputs),
                                      "nodes": list(mask.nodes),
                                      "ends": list(mask.ends), "masked": masked}))
    return findings


def _selection(config: ProbeConfig) -> List[str]:
    return list(config.select or ("all",)) + (["+quant-ranges"] if config.quant_ranges else [])


def check_since(config: ProbeConfig, graph: ModelGraph) -> None:
    """Fail before any inference when `--since` names no stored run or the history folder cannot be
    written (a run must never be thrown away at the end for want of a place to store its summary)."""
    if config.history and graph.path is not None:
        HistoryStore(config.history_dir).check_writable()
    if config.since and graph.path is not None:
        HistoryStore(config.history_dir).find(config.since, history_key(str(graph.path), _selection(config)))


def record_history(config: ProbeConfig, graph: ModelGraph, model: ModelRef, samples: SampleSet, done: int,
                   tensors: Sequence[TensorStats], warnings: Optional[List[str]] = None) -> Optional[HistoryInfo]:
    """Compare with an earlier run (`--since`) and store this one (unless --no-history).

    A failed save (the folder became unwritable or the disk filled during the run) is a line in
    `warnings`, not an error: the finished result is still shown and written (--json)."""
    if graph.path is None or (not config.history and not config.since):
        return None
    selection = _selection(config)
    key = history_key(str(graph.path), selection)
    store = HistoryStore(config.history_dir, config.keep_runs)
    run_id = new_run_id()
    info: Dict[str, Any] = {"run_id": run_id, "key": key}
    if config.since:
        before = store.find(config.since, key)
        changes, only_now, only_before = changes_since(before, tensors)
        info.update(since=before.run_id, since_created=before.data.get("created"), changes=changes,
                    only_now=only_now, only_before=only_before)
    if config.history:
        summary = make_summary(run_id, key, model=str(graph.path), model_sha256=model.sha256, selection=selection,
                               inputs=samples.source, samples=done, tensors=tensors)
        try:
            path, pruned = store.save(key, summary)
        except UsageError as exc:
            if warnings is None:
                raise
            warnings.append(f"{exc.message}: this run was not saved to the history")
        else:
            info.update(saved=str(path), pruned=pruned)
    return HistoryInfo(**info)


def list_tensors(graph: ModelGraph, patterns: Sequence[str] = ()) -> TensorListResult:
    """Every selectable tensor (graph inputs, then node outputs in topological order), without inference;
    only those matching `patterns` when given (to check a selection before running it)."""
    from ..core.select import outputs_outside, select_tensors

    wanted = set(select_tensors(graph, patterns)) if patterns else None
    info = graph.all_tensor_info()
    entries = []
    for name in graph.input_names:
        ti = info.get(name) or graph.tensor_info(name)
        entries.append(TensorEntry(name=name, op_type="(input)", node="", dtype=ti.dtype_name, shape=ti.shape_text()))
    if wanted is not None:
        entries = [e for e in entries if e.name in wanted]
    listed = selectable_tensors(graph)
    inputs = set(graph.input_names)
    extra = [t for t in outputs_outside(graph, listed) if t not in inputs]  # a Constant's or an initializer
    for name in sorted(listed + extra, key=graph.topo_position):
        node = graph.producer.get(name)
        ti = info.get(name) or graph.tensor_info(name)
        if wanted is None or name in wanted:
            entries.append(TensorEntry(name=name, op_type=node.op_type if node else "(initializer)",
                                       node=node.name if node else "", dtype=ti.dtype_name, shape=ti.shape_text()))
    return TensorListResult(models=[ModelRef.of(graph, "model", hash_file=False)], tensors=entries)


def list_history(directory: str, model: Optional[str] = None) -> HistoryListResult:
    """Stored runs, oldest first (only those of `model` when given)."""
    from pathlib import Path

    wanted = str(Path(model).resolve()) if model else None
    runs = []
    for run in HistoryStore(directory).runs():
        data = run.data
        if wanted and data.get("model") != wanted:
            continue
        runs.append(HistoryEntry(run_id=run.run_id, created=str(data.get("created", "")), model=str(data.get("model", "")),
                                 model_sha256=data.get("model_sha256"), selection=list(data.get("selection") or []),
                                 inputs=str(data.get("inputs", "")), samples=int(data.get("samples", 0)),
                                 tensors=len(data.get("tensors") or {}), key=str(data.get("key", ""))))
    return HistoryListResult(directory=directory, runs=runs, config={"history_dir": directory, "model": model})
