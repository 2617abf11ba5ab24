"""The step loop: models A and B (or A alone) through a sequence, each fed back its own state.

Per step: every output pair reduced to metrics (diff/metrics), the state drift (A's vs B's state
outputs), the decision (argmax of one output), gates, non-finite values. At the first divergence
(a failed gate, else a differing decision) B's step is replayed with A's state: if B then agrees
with A, the difference was carried in by the state ("born in the state"), otherwise B's own step
computation produces it ("born in the step"). Only the current states and running summaries are
held; each step's record goes to the optional JSONL journal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..diff.gates import Gate, check_gate_targets
from ..diff.metrics import PairStats, _accumulate_elements, compare_arrays, metric_value_ok, shapes_compatible
from ..errors import UsageError
from ..results.base import ModelRef
from ..results.sequence import Divergence, NonFiniteStep, SequenceResult, WiringRow
from .bundle import nonfinite_names, write_step_bundle
from .journal import StepJournal
from .model import SteppedModel, open_stepped
from .source import StepSource, open_steps
from .stats import SequenceStats
from .wiring import StateWiring, check_same_wiring, initial_state

Progress = Callable[[int, Optional[int]], None]
KEEP = ("cosine", "max_abs", "mean_abs", "rmse", "max_rel", "sqnr", "top1", "top5", "kl")
DISTRIBUTION = ("kl", "top1", "top5")


@dataclass(frozen=True)
class SequenceConfig:
    """How to step the models. Every field has a CLI flag in phase 2 (`--state`, `--init-state`, ...)."""

    state: Tuple[Tuple[str, str], ...] = ()
    init_state: Optional[Path] = None
    steps: Optional[int] = None
    chunk: Optional[int] = None
    gates: Tuple[Gate, ...] = ()
    decision_output: Optional[str] = None
    """Output whose argmax (last axis; > 0.5 for one value) is the step's decision; default: the first
    floating step output."""
    journal: Optional[Path] = None
    resume: bool = False
    checkpoint_every: int = 100
    bundle_dir: Optional[Path] = None
    """Where the non-finite step's inputs + state are written (nan-bisect hand-off)."""
    stop_on_nonfinite: bool = True
    attribute: bool = True
    runtime: RuntimeConfig = RuntimeConfig()
    timeline_points: int = 512

    def to_dict(self) -> Dict[str, Any]:
        return {"state": [f"{a}={b}" for a, b in self.state], "init_state": str(self.init_state) if self.init_state else None,
                "steps": self.steps, "chunk": self.chunk, "gates": [g.describe() for g in self.gates],
                "decision_output": self.decision_output, "journal": str(self.journal) if self.journal else None,
                "resume": self.resume, "checkpoint_every": self.checkpoint_every,
                "bundle_dir": str(self.bundle_dir) if self.bundle_dir else None,
                "stop_on_nonfinite": self.stop_on_nonfinite, "runtime": self.runtime.to_dict()}


def step_metrics(a: np.ndarray, b: np.ndarray, distribution: bool = False) -> Dict[str, Any]:
    """The kept metrics of one pair at one step (None values dropped), with non-finite counts.

    Element metrics only by default: top-1 agreement is the step's decision, and KL/top-k on the
    last axis cost more than a small streaming model's inference."""
    if not shapes_compatible(a.shape, b.shape):
        return {"shape_mismatch": 1}
    stats = None if distribution else _finite_element_stats(a, b)
    if stats is None:
        stats = compare_arrays(a, b, distribution=distribution)
    values = stats.metrics()
    out: Dict[str, Any] = {k: values[k] for k in KEEP if values.get(k) is not None}
    if stats.nonfinite_mismatch:
        out["nonfinite_mismatch"] = stats.nonfinite_mismatch
    if stats.nan_a or stats.inf_a:
        out["nonfinite_a"] = stats.nan_a + stats.inf_a
    if stats.nan_b or stats.inf_b:
        out["nonfinite_b"] = stats.nan_b + stats.inf_b
    return out


def _finite_element_stats(a: np.ndarray, b: np.ndarray) -> Optional[PairStats]:
    """compare_arrays' element sums without its NaN/Inf bookkeeping, or None when a value is not finite.

    The same arithmetic (diff/metrics._accumulate_elements), minus the isfinite masks: a NaN or Inf
    anywhere makes a sum non-finite, and then the exact path runs. Saves half the per-step cost on
    small streaming models."""
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        return None
    stats = PairStats(samples=1)
    _accumulate_elements(stats, a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1))
    if not (math.isfinite(stats.sum_sq_err) and math.isfinite(stats.sum_a2) and math.isfinite(stats.sum_b2)
            and math.isfinite(stats.sum_rel)):
        return None
    return stats


def _flags(record: Dict[str, Any], key: str) -> bool:
    """Whether any compared tensor of the record has `key` (a non-finite count, a shape mismatch)."""
    return any(key in m or "shape_mismatch" in m for part in ("outputs", "states") for m in record[part].values())


def decision_of(value: np.ndarray) -> List[int]:
    """Argmax on the last axis (flattened over the rest); a single value per row is thresholded at 0.5."""
    rows = value.reshape(-1, value.shape[-1] if value.ndim else 1)
    if rows.shape[1] == 1:
        return [int(v) for v in (rows[:, 0] > 0.5)]
    return [int(v) for v in rows.argmax(axis=1)]


def wiring_rows(wiring: StateWiring) -> List[WiringRow]:
    return [WiringRow(p.input, p.output, p.dtype, p.shape, p.kv_cache, p.source) for p in wiring.pairs]


class _Run:
    """The mutable state of one run (kept out of the public function to keep it readable)."""

    def __init__(self, a: SteppedModel, b: Optional[SteppedModel], config: SequenceConfig) -> None:
        self.a, self.b, self.config = a, b, config
        outputs = list(a.wiring.step_outputs) if b is not None else []
        self.decision = self._decision_output(outputs)
        check_gate_targets(config.gates, outputs)
        states = [p.output for p in a.wiring.pairs] if b is not None else []
        self.stats = SequenceStats(outputs, states, config.gates, self.decision or (outputs[0] if outputs else None),
                                   config.timeline_points)
        # KL / top-k on the last axis only when a gate asks for them (they cost more than a small step).
        self.distribution = any(g.metric in DISTRIBUTION for g in config.gates)
        self.divergence: Optional[Divergence] = None
        self.nonfinite: Optional[NonFiniteStep] = None
        self.notes: List[str] = []

    def _decision_output(self, outputs: List[str]) -> Optional[str]:
        if self.b is None:
            return None
        wanted = self.config.decision_output
        if wanted is not None:
            if wanted not in outputs:
                raise UsageError(f"--decision-output '{wanted}': not a step output", hint=f"outputs: {', '.join(outputs)}")
            return wanted
        floats = {t.name for t in self.a.graph.outputs if t.numpy_dtype is not None and t.numpy_dtype.kind == "f"}
        return next((o for o in outputs if o in floats), None)

    def record(self, step: int, out_a: TensorMap, out_b: TensorMap) -> Dict[str, Any]:
        record: Dict[str, Any] = {"step": step}
        record["outputs"] = {n: step_metrics(out_a[n], out_b[n], self.distribution) for n in self.a.wiring.step_outputs}
        record["states"] = {p.output: step_metrics(out_a[p.output], out_b[p.output], distribution=False)
                            for p in self.a.wiring.pairs}
        if self.decision is not None:
            record["decision"] = [decision_of(out_a[self.decision]), decision_of(out_b[self.decision])]
        return record

    def attribute(self, step: int, feeds_b: TensorMap, state_a: TensorMap, state_b: TensorMap,
                  out_a: TensorMap, failed: List[str], differs: bool) -> None:
        """Replay B's step with A's state; decide where the divergence was born."""
        assert self.b is not None
        trigger = "gate" if failed else "decision"
        detail = failed[0] if failed else f"decision of '{self.decision}' differs"
        tensor = failed[0].rsplit(" on ", 1)[1] if failed else self.decision
        drift = [step_metrics(state_a[k], state_b[k], distribution=False).get("cosine") for k in state_a]
        drift_value = min((d for d in drift if d is not None), default=None)
        if not self.config.attribute:
            self.divergence = Divergence(step, trigger, detail, "unknown", state_cosine=drift_value)
            return
        replay = self.b.run(feeds_b, self.b.cast(state_a), step)
        metrics = step_metrics(out_a[tensor], replay[tensor], self.distribution)
        if failed:
            gates = [g for g in self.config.gates if f"{g.describe()} on {tensor}" in failed]
            agrees = all(metric_value_ok(g.metric, metrics.get(g.metric), g.threshold) for g in gates)
        else:
            agrees = decision_of(out_a[tensor]) == decision_of(replay[tensor])
        self.divergence = Divergence(step, trigger, detail, "state" if agrees else "step",
                                     replay={k: v for k, v in metrics.items() if k in KEEP},
                                     replay_agrees=agrees, state_cosine=drift_value)

    def check_nonfinite(self, step: int, model: SteppedModel, feeds: TensorMap, state: TensorMap,
                        outputs: TensorMap) -> bool:
        bad = nonfinite_names(outputs)
        if not bad:
            return False
        state_outputs = {p.output for p in model.wiring.pairs}
        merged = {**feeds, **state}
        handoff = None
        if self.config.bundle_dir is not None:
            handoff = str(write_step_bundle(self.config.bundle_dir, str(model.graph.path or model.graph.display_name),
                                            model.role, step, merged, model.wiring, bad))
        self.nonfinite = NonFiniteStep(step, model.role, bad, any(b in state_outputs for b in bad),
                                       inputs_finite=not nonfinite_names(merged), handoff=handoff,
                                       repro=str(Path(handoff).parent) if handoff else None)
        return True


def run_sequence(model_a: Any, model_b: Any, sequence: "str | Path | StepSource",
                 config: SequenceConfig = SequenceConfig(), progress: Optional[Progress] = None) -> SequenceResult:
    """Step A and B (or A alone when `model_b` is None: a non-finite scan) through `sequence`.

    `model_a`/`model_b` are paths, ModelGraphs or `SteppedModel`s; `sequence` a path (folder of
    step samples, .npz with a time axis, .npy/.wav with `config.chunk`) or an open `StepSource`.
    """
    a = model_a if isinstance(model_a, SteppedModel) else open_stepped(model_a, config.state, config.runtime, "A")
    b = None
    if model_b is not None:
        b = model_b if isinstance(model_b, SteppedModel) else open_stepped(model_b, config.state, config.runtime, "B")
        check_same_wiring(a.wiring, b.wiring)
    source = sequence if isinstance(sequence, StepSource) else open_steps(sequence, a.step_specs, config.chunk)
    run = _Run(a, b, config)
    journal = StepJournal(config.journal, config.checkpoint_every) if config.journal else None
    start, state_a, state_b, resumed = 0, None, None, 0
    if journal is not None and config.resume:
        checkpoint, records = journal.resume()
        if checkpoint is not None:
            for record in records:
                run.stats.fold(record)
            start, resumed = checkpoint.step + 1, len(records)
            state_a, state_b = checkpoint.state_a, checkpoint.state_b
            if checkpoint.extra.get("divergence"):
                run.divergence = Divergence(**checkpoint.extra["divergence"])
    if journal is not None:
        journal.start(fresh=start == 0)
    init_notes: List[str] = []
    last = start - 1
    try:
        for step, feeds in source.steps(start, config.steps):
            if state_a is None:
                state_a, init_notes = initial_state(a.wiring, a.inputs, feeds, config.init_state)
                state_b = b.cast(state_a) if b is not None else {}
            out_a = a.run(feeds, state_a, step)
            if b is None:
                last = step
                if run.check_nonfinite(step, a, feeds, state_a, out_a) and config.stop_on_nonfinite:
                    break
                state_a = a.wiring.feed_back(out_a)
                if progress:
                    progress(step, source.length)
                continue
            feeds_b = b.cast(feeds)
            out_b = b.run(feeds_b, state_b, step)
            record = run.record(step, out_a, out_b)
            failed, differs = run.stats.fold(record)
            # The gates define divergence when there are any; without gates, the decision does.
            if run.divergence is None and (failed if config.gates else differs):
                run.attribute(step, feeds_b, state_a, state_b, out_a, failed, differs)
            if journal is not None:
                journal.append(record)
            last = step
            # The metrics already counted NaN/Inf on both sides; look closer only when they did.
            stop = run.nonfinite is None and (
                (_flags(record, "nonfinite_a") and run.check_nonfinite(step, a, feeds, state_a, out_a))
                or (_flags(record, "nonfinite_b") and run.check_nonfinite(step, b, feeds_b, state_b, out_b)))
            state_a, state_b = a.wiring.feed_back(out_a), b.wiring.feed_back(out_b)
            if journal is not None and journal.due(step):
                extra = {"divergence": run.divergence.__dict__} if run.divergence else {}
                journal.checkpoint(step, state_a, state_b, extra)
            if progress:
                progress(step, source.length)
            if stop and config.stop_on_nonfinite:
                break
    finally:
        if journal is not None:
            journal.close()
    return _result(run, a, b, source, config, last + 1, resumed, init_notes)


def _result(run: _Run, a: SteppedModel, b: Optional[SteppedModel], source: StepSource, config: SequenceConfig,
            steps: int, resumed: int, init_notes: List[str]) -> SequenceResult:
    models = [ModelRef.of(a.graph, role="A")] + ([ModelRef.of(b.graph, role="B")] if b is not None else [])
    stats = run.stats
    notes = list(a.wiring.notes) + init_notes + list(source.notes) + run.notes
    return SequenceResult(
        models=models, mode="compare" if b is not None else "scan", wiring=wiring_rows(a.wiring), steps=steps,
        resumed_steps=resumed, outputs=stats.output_summaries(), states=stats.state_summaries(),
        gates=stats.gate_outcomes(), first_gate_failure=stats.first_gate_failure,
        decision_output=run.decision, first_decision_difference=stats.first_decision_difference,
        decision_agreement=stats.agreement(), divergence=run.divergence, nonfinite=run.nonfinite,
        timeline=stats.timeline_result(), source=source.describe(),
        journal=str(config.journal) if config.journal else None, config=config.to_dict(), notes=notes)
