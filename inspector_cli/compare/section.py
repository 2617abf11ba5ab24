"""Turning a `LayerRun` into the result's layer section: rows, first divergence, worst layers,
observer checks, pairing report and the structural summary."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..core.structure import structure_diff
from ..diff.engine import TensorTracker
from ..diff.fast_stats import fast_pair_stats
from ..diff.metrics import METRICS
from ..diff.values import is_numeric_tensor, reduce_values
from ..results.base import GateOutcome
from ..results.layers import (CaptureInfo, LayerDiff, LayerSection, LayerThreshold, ObserverCheck, StructureSummary,
                              UnpairedTensor)
from .capture import Side
from .isolate import error_source, own_share
from .layers import LayerRun

WORST_METRICS = ("cosine", "sqnr", "max_abs", "mean_abs", "max_rel_sig")  # not max_rel: ~0 references dominate it
SCALE_FREE = ("cosine", "sqnr", "max_rel_sig")
"""Metrics that mean nothing on a negligible layer (noise against noise): such a layer is nobody's worst by them."""


def _failed(tracker: TensorTracker) -> List[str]:
    return [t.gate.metric for t in tracker.tallies if t.failed]


def _excused(tracker: TensorTracker) -> List[str]:
    return [t.gate.metric for t in tracker.tallies if t.excused]


def layer_rows(run: LayerRun) -> List[LayerDiff]:
    rows = []
    iso_trackers = run.isolation.trackers if run.isolation else {}
    noise_trackers = run.isolation.noise_trackers if run.isolation else {}
    for index, (pair, tracker) in enumerate(zip(run.plan.pairs, run.measured.trackers)):
        iso = iso_trackers.get(pair.a)
        share = own_share(tracker, iso) if iso is not None else None
        noise = noise_trackers.get(pair.a)
        rows.append(LayerDiff(
            index=index, name=pair.a, name_b=pair.view_b.tensor, op_a=pair.op_a, op_b=pair.op_b,
            shape_a=tracker.shape_a, shape_b=tracker.shape_b, dtype_a=tracker.dtype_a, dtype_b=tracker.dtype_b,
            method=pair.method, confidence=pair.confidence, located_by=pair.located_by, evidence=pair.evidence,
            capture_a=_capture(run.plan.side_a, pair.view_a.expose),
            capture_b=_capture(run.plan.side_b, pair.view_b.expose),
            recomputed="; ".join(s.recomputed[v.expose] for s, v in ((run.plan.side_a, pair.view_a),
                                 (run.plan.side_b, pair.view_b)) if v.expose in s.recomputed) or None,
            samples=tracker.samples,
            dataset=tracker.dataset_metrics(), worst=tracker.worst_metrics(), mean=tracker.mean_metrics(),
            nonfinite={k: v for k, v in tracker.total.nonfinite().items() if v}, failed_gates=_failed(tracker),
            isolated=iso.dataset_metrics() if iso is not None and iso.samples else None,
            own_share=share, error_source=error_source(share) if iso is not None else None,
            qdq_noise=noise.dataset_metrics() if noise is not None else None, negligible=tracker.negligible,
            excused_gates=_excused(tracker)))
    return rows


def _capture(side: Side, expose: str) -> str:
    """How one model's tensor of a row was read: the side's mode, or 'recomputed' (fused_side.py)."""
    return "recomputed" if expose in side.recomputed else side.mode


def worst_layers(rows: List[LayerDiff], count: int) -> Dict[str, List[str]]:
    worst: Dict[str, List[str]] = {}
    for metric in WORST_METRICS:
        scored = [(r.dataset.get(metric), r.name) for r in rows
                  if r.dataset.get(metric) is not None and not (r.negligible and metric in SCALE_FREE)]
        scored = [(v, n) for v, n in scored if not (isinstance(v, float) and math.isinf(v))]
        better_high = METRICS[metric].higher_is_better
        scored.sort(key=lambda item: item[0] if better_high else -item[0])  # type: ignore[operator]
        worst[metric] = [n for _, n in scored[:count]]
    return worst


def layer_gate_outcomes(run: LayerRun) -> List[GateOutcome]:
    """Failing layer gates (passing ones are summarised by the section, not listed)."""
    outcomes = []
    for tracker in run.measured.trackers:
        for tally in tracker.tallies:
            if tally.failed:
                gate = tally.gate
                outcomes.append(GateOutcome(
                    gate=gate.describe(), metric=gate.metric, op=gate.op, threshold=gate.threshold,
                    tensor=tracker.name, passed=False, worst=tally.worst, failed_samples=tally.failed,
                    total_samples=tally.evaluated, examples=list(tally.examples), scope="layer"))
    return outcomes


def observer_checks(run: LayerRun) -> List[ObserverCheck]:
    checks = []
    for side in (run.plan.side_a, run.plan.side_b):
        if side.plain is None:
            continue
        captured = run.measured.captured_first.get(side.label, {})
        for name, plain in side.plain.items():
            if name not in captured:
                continue
            got = captured[name]
            if not (is_numeric_tensor(plain) and is_numeric_tensor(got)):  # strings, sequences, maps
                checks.append(_value_check(side, name, plain, got, run.measured.first_sample))
                continue
            same = plain.shape == got.shape and bool(np.array_equal(plain, got))
            if plain.shape != got.shape or not np.issubdtype(plain.dtype, np.number):
                checks.append(ObserverCheck(side.label, name, side.mode, same, math.nan, math.nan,
                                            run.measured.first_sample))
                continue
            metrics = fast_pair_stats(plain, got).metrics()
            checks.append(ObserverCheck(side.label, name, side.mode, same, float(metrics["max_abs"] or 0.0),
                                        float(metrics["cosine"] or 0.0), run.measured.first_sample))
    return checks


def _value_check(side: Any, name: str, plain: Any, got: Any, sample: str) -> ObserverCheck:
    """The observer check of a non-tensor output: equal strings and keys, and the numbers inside measured."""
    stats = reduce_values(plain, got, distribution=False)
    metrics = stats.metrics() if stats is not None else {}
    same = stats is not None and not stats.items_unequal and not stats.nonfinite_mismatch and \
        (stats.count == 0 or stats.max_abs == 0.0)
    max_abs, cosine = metrics.get("max_abs"), metrics.get("cosine")
    if same and cosine is None:  # equal strings: nothing measured, nothing differs
        max_abs, cosine = 0.0, 1.0
    return ObserverCheck(side.label, name, side.mode, same, math.nan if max_abs is None else float(max_abs),
                         math.nan if cosine is None else float(cosine), sample)


NEGLIGIBLE_COSINE = 1 - 1e-9
"""Observer differences at float rounding level (a fused kernel sums in another order) are not warned."""


def observer_warnings(checks: List[ObserverCheck]) -> List[str]:
    notes = []
    for check in checks:
        if check.identical or (not math.isnan(check.cosine) and check.cosine >= NEGLIGIBLE_COSINE):
            continue
        hint = "; --capture deployed avoids this for quantised and fp16 models" if check.capture == "instrumented" else ""
        notes.append(f"observer effect: with its tensors exposed, model {check.model}'s output '{check.output}' "
                     f"differs from a plain run on sample {check.sample} (max |diff| {check.max_abs:.4g}, cosine "
                     f"{check.cosine:.6f}): onnxruntime fused differently, so model {check.model}'s layer values "
                     f"describe the instrumented graph{hint}")
    return notes


def structure_summary(run: LayerRun) -> StructureSummary:
    diff = structure_diff(run.plan.sem_a.graph, run.plan.sem_b.graph)
    return StructureSummary(
        op_counts=diff.op_counts, only_a=diff.only_a, only_b=diff.only_b,
        signature=[{"kind": s.kind, "name": s.name, "a": s.a, "b": s.b} for s in diff.signature],
        nodes=diff.nodes, qdq_pairs=diff.qdq_pairs, quantized_ops=diff.quantized_ops,
        initializer_bytes=diff.initializer_bytes)


def build_section(run: LayerRun, *, gate_layers: bool, worst_count: int,
                  atol: float = 0.0) -> Tuple[LayerSection, List[str]]:
    rows = layer_rows(run)
    first: Optional[LayerDiff] = next((r for r in rows if r.failed_gates), None)
    unpaired_a = [UnpairedTensor("a", u.tensor, u.op, u.reason) for u in run.plan.matching.unpaired_a]
    unpaired_a += [UnpairedTensor("a", p.a, p.op_a, reason) for p, reason in run.plan.unavailable]
    unpaired_b = [UnpairedTensor("b", u.tensor, u.op, u.reason) for u in run.plan.matching.unpaired_b]
    checks = observer_checks(run)
    notes = run.plan.side_a.notes + run.plan.side_b.notes
    measured, layers = run.measured, run.plan
    capture = CaptureInfo(strategy=measured.strategy, chunks=measured.chunks, runs=measured.runs,
                          estimated_bytes=measured.estimated_bytes, budget_bytes=measured.budget_bytes,
                          capture_a=layers.side_a.mode, capture_b=layers.side_b.mode,
                          isolation_runs=run.isolation.runs if run.isolation else 0, notes=notes)
    thresholds = [LayerThreshold(g.metric, g.op, g.threshold, g.target, "default" if layers.default_gates else "user",
                                 g.flag) for g in layers.gates]
    pairing: Dict[str, int] = {}
    for row in rows:
        pairing[row.method] = pairing.get(row.method, 0) + 1
    section = LayerSection(
        layers=rows, pairing=pairing, unpaired_a=unpaired_a, unpaired_b=unpaired_b, skipped=dict(run.plan.skipped),
        thresholds=thresholds, gates_affect_exit=gate_layers, first_divergence=first.name if first else None,
        first_divergence_metrics=first.failed_gates if first else [], worst=worst_layers(rows, worst_count),
        capture=capture, observer=checks, structure=structure_summary(run),
        isolation=run.isolation.info if run.isolation else None, atol=atol)
    return section, notes + observer_warnings(checks)
