"""From trackers to a result: output diffs, gate outcomes, findings and the `CompareResult`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from ..diff.engine import TensorTracker
from ..results.base import Finding, GateOutcome, ModelRef, Severity, file_sha256
from ..results.compare import CompareResult, Equality, OutputDiff, SampleMetrics
from .config import CompareConfig
from .plan import ComparePlan, FileModel

if TYPE_CHECKING:  # results.layers is imported by the layer pass; an outputs-only run does not need it
    from ..results.layers import LayerSection


def output_diff(tracker: TensorTracker, matched_by: str) -> OutputDiff:
    return OutputDiff(
        name=tracker.name, name_b=tracker.name_b, matched_by=matched_by,
        dtype_a=tracker.dtype_a, dtype_b=tracker.dtype_b, shape_a=tracker.shape_a, shape_b=tracker.shape_b,
        samples=tracker.samples, dataset=tracker.dataset_metrics(), worst=tracker.worst_metrics(),
        mean=tracker.mean_metrics(), nonfinite=tracker.total.nonfinite(), kl_mode=tracker.total.kl_mode,
        shape_mismatch_samples=tracker.shape_mismatch_samples,
        per_sample=[SampleMetrics(**row) for row in tracker.per_sample], equality=equality(tracker),
    )


def equality(tracker: TensorTracker) -> "Equality | None":
    """The equality counts of a tracker whose values hold strings or labels (None for plain tensors)."""
    total = tracker.total
    if not total.items:
        return None
    first = tracker.first_unequal or (None, None, None, None)
    return Equality(items=total.items, unequal=total.items_unequal, unequal_samples=tracker.unequal_samples,
                    first_sample=first[0], first_at=first[1], first_a=first[2], first_b=first[3])


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


def tracker_findings(tracker: TensorTracker, what: str = "output", *, golden: bool = False) -> List[Finding]:
    """The findings of one compared tensor pair. `golden`: A is the saved outputs of `--golden`, whose
    NaN and Inf say what is expected (`nonfinite_findings`)."""
    findings = []
    if tracker.shape_mismatch_samples:
        findings.append(Finding(
            rule="MI801", severity=Severity.ERROR, tensor=tracker.name,
            message=f"{what} '{tracker.name}': shapes differ ({tracker.shape_a} vs {tracker.shape_b}) "
                    f"on {tracker.shape_mismatch_samples} sample(s)" + _structure(tracker)))
    if tracker.total.items_unequal:
        sample, at, a, b = tracker.first_unequal or ("?", "?", "?", "?")
        findings.append(Finding(
            rule="MI805", severity=Severity.ERROR, tensor=tracker.name,
            message=f"{what} '{tracker.name}': {tracker.total.items_unequal} of {tracker.total.items} value(s) differ "
                    f"on {tracker.unequal_samples} sample(s); first on sample {sample} at {at}: {a} vs {b}"))
    findings.extend(nonfinite_findings(tracker, what, golden=golden))
    return findings


def nonfinite_findings(tracker: TensorTracker, what: str = "output", *, golden: bool = False) -> List[Finding]:
    """MI802 for NaN/Inf one side holds where the other does not (an error), MI807 for NaN both hold at
    the same positions: two models that both produce NaN are an error (a NaN is never a value either
    model meant, only the same one), saved outputs that expect the NaN the model produces are
    agreement (info), as ONNX's backend test runner counts them. The metrics stay those of the
    finite positions."""
    total = tracker.total
    nf = total.nonfinite()
    sides = ("saved", "model") if golden else ("A", "B")
    counts = (f"{sides[0]}: {nf['nan_a']} NaN, {nf['inf_a']} Inf; {sides[1]}: {nf['nan_b']} NaN, {nf['inf_b']} Inf")
    shared = [f"{n} {label}" for n, label in ((total.nan_same, "NaN"), (total.inf_same, "Inf")) if n]
    findings = []
    if total.nonfinite_mismatch:
        other = "the saved output" if golden else "the other model"
        also = f"; both hold {' and '.join(shared)} at the same positions" if shared else ""
        findings.append(Finding(
            rule="MI802", severity=Severity.ERROR, tensor=tracker.name,
            message=f"{what} '{tracker.name}': {total.nonfinite_mismatch} NaN/Inf value(s) not matched by {other} "
                    f"({counts}){also}",
            hint="run 'mi nan-bisect' on the model that produces them"))
    if not total.nan_same:
        return findings
    finite = f"metrics over the {total.count} position(s) finite in both"
    if golden:
        findings.append(Finding(
            rule="MI807", severity=Severity.INFO, tensor=tracker.name,
            message=f"{what} '{tracker.name}': the saved output expects {' and '.join(shared)} where the model "
                    f"produces them ({counts}): counted as agreement; {finite}",
            data={"nan_same": total.nan_same, "inf_same": total.inf_same, "finite": total.count}))
    else:
        findings.append(Finding(
            rule="MI807", severity=Severity.ERROR, tensor=tracker.name,
            message=f"{what} '{tracker.name}': both models produce NaN at {total.nan_same} position(s) "
                    f"({counts}); {finite}",
            hint="the reference model produces them too: run 'mi nan-bisect' on it, or compare on inputs "
                 "inside the model's domain",
            data={"nan_same": total.nan_same, "finite": total.count}))
    return findings


def _structure(tracker: TensorTracker) -> str:
    """What else differs when the output is a sequence or a map (its length or key set, an element's shape)."""
    if tracker.dtype_a.startswith(("seq(", "map(")):
        return " (a sequence's length, an element's shape or a map's keys)"
    return ""


def model_ref(graph: Any, role: str) -> ModelRef:
    """`ModelRef.of(graph, role)`, also for a `FileModel` (the same fields, from the file's header)."""
    if not isinstance(graph, FileModel):
        return ModelRef.of(graph, role)
    head = graph.head
    producer = " ".join(p for p in (head.producer_name, head.producer_version) if p)
    return ModelRef(path=str(graph.path), sha256=file_sha256(graph.path), size_bytes=graph.path.stat().st_size,
                    opset=head.opset, ir_version=head.ir_version, producer=producer, role=role,
                    graph_name=head.graph_name)


def build_result(plan: ComparePlan, config: CompareConfig, trackers: Sequence[TensorTracker],
                 notes: Sequence[str], *, layers: Optional["LayerSection"] = None,
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
        models=[model_ref(plan.graph_a, "reference"), model_ref(plan.graph_b, "candidate")],
        config=config.to_dict(), runtime=config.runtime.to_dict(), inputs=plan.samples.describe(),
        outputs=[output_diff(t, methods[t.name]) for t in trackers], gates=gates, findings=findings,
        warnings=warnings, unmatched_a=list(plan.outputs.unmatched_a), unmatched_b=list(plan.outputs.unmatched_b),
        samples=len(plan.samples), layers=layers,
    )
