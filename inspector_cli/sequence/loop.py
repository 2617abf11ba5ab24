"""The step loop: models A and B (or A alone) through a sequence, each fed back its own state.

Per step: every output pair reduced to metrics (diff/metrics), the state drift (A's vs B's state
outputs), the decision (argmax of one output), gates, non-finite values, and at the first
divergence the replay that says where it was born (run.py). Steps are reduced in blocks of
`block` steps (batch.py); only the current states, one block of outputs and the running summaries
are held, so memory is flat in the number of steps. Each step's record goes to the optional JSONL
journal.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Optional

from ..results.base import ModelRef
from ..results.sequence import Divergence, SequenceResult
from .config import SequenceConfig
from .journal import StepJournal
from .metrics import KEEP, step_metrics  # noqa: F401  (re-exported for decode and callers)
from .model import SteppedModel, open_stepped
from .run import Pending, RunState
from .source import StepSource, open_steps
from .wiring import check_same_wiring, initial_state

Progress = Callable[[int, Optional[int]], None]


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
    run = RunState(a, b, config)
    journal = StepJournal(config.journal, config.checkpoint_every) if config.journal else None
    start, state_a, state_b, resumed = 0, None, None, 0
    if journal is not None and config.resume:
        checkpoint, records = journal.resume()
        if checkpoint is not None:
            run.stats.fold_many(records)
            start, resumed = checkpoint.step + 1, len(records)
            state_a, state_b = checkpoint.state_a, checkpoint.state_b
            if checkpoint.extra.get("divergence"):
                run.divergence = Divergence(**checkpoint.extra["divergence"])
    if journal is not None:
        journal.start(fresh=start == 0)
    init_notes: List[str] = []
    last = start - 1
    size = max(1, min(config.block, config.checkpoint_every))
    block: List[Pending] = []
    if b is not None:
        # A block holds `size` steps' outputs (and the state each step was fed) by reference until it
        # is reduced: fresh output arrays per run. Bound arrays rotating over size + 2 sets were
        # slower (+12 us per step on the benchmark's model, against +6 for fresh arrays).
        a.hold(0)
        b.hold(0)
    try:
        for step, feeds in source.steps(start, config.steps):
            if state_a is None:
                state_a, init_notes = initial_state(a.wiring, a.inputs, feeds, config.init_state)
                state_b = b.cast(state_a) if b is not None else {}
            out_a = a.run(feeds, state_a, step)
            if progress:
                progress(step, source.length)
            if b is None:
                last = step
                if run.check_nonfinite(step, a, feeds, state_a, out_a) and config.stop_on_nonfinite:
                    break
                state_a = a.wiring.feed_back(out_a)
                continue
            feeds_b = b.cast(feeds)
            out_b = b.run(feeds_b, state_b, step)
            block.append(Pending(step, feeds, feeds_b, state_a, state_b, out_a, out_b))
            state_a, state_b = a.wiring.feed_back(out_a), b.wiring.feed_back(out_b)
            if len(block) == size:
                kept = run.flush(block, journal)
                last = block[kept - 1].step
                stopped = kept < len(block) or (run.nonfinite is not None and config.stop_on_nonfinite)
                block = []
                if stopped:
                    break
        if block:
            kept = run.flush(block, journal)
            last = block[kept - 1].step
    finally:
        if journal is not None:
            journal.close()
        a.hold(2)
        if b is not None:
            b.hold(2)
    return _result(run, a, b, source, config, last + 1, resumed, init_notes)


def _result(run: RunState, a: SteppedModel, b: Optional[SteppedModel], source: StepSource, config: SequenceConfig,
            steps: int, resumed: int, init_notes: List[str]) -> SequenceResult:
    models = [ModelRef.of(a.graph, role="A")] + ([ModelRef.of(b.graph, role="B")] if b is not None else [])
    stats = run.stats
    notes = list(a.wiring.notes) + init_notes + list(source.notes) + run.notes
    return SequenceResult(
        models=models, mode="compare" if b is not None else "scan", wiring=list(a.wiring.pairs), steps=steps,
        resumed_steps=resumed, outputs=stats.output_summaries(), states=stats.state_summaries(),
        gates=stats.gate_outcomes(), first_gate_failure=stats.first_gate_failure,
        decision_output=run.decision, first_decision_difference=stats.first_decision_difference,
        decision_agreement=stats.agreement(), divergence=run.divergence, nonfinite=run.nonfinite,
        timeline=stats.timeline_result(), source=source.describe(),
        journal=str(config.journal) if config.journal else None, config=config.to_dict(), notes=notes)
