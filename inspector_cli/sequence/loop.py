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
from typing import Any, Callable, List, Optional, Tuple

from ..core.types import TensorMap
from ..results.base import ModelRef
from ..results.sequence import Divergence, SequenceResult
from .config import BLOCK_BYTES, JOURNAL_BLOCK, SequenceConfig
from .journal import StepJournal
from .metrics import KEEP, step_metrics  # noqa: F401  (re-exported for decode and callers)
from .model import SteppedModel, open_stepped
from .run import Block, RunState
from .bundle import nonfinite_free
from .source import StepSource, open_steps
from .wiring import check_same_wiring

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
    size = max(1, min(config.block, JOURNAL_BLOCK, config.checkpoint_every) if journal is not None else config.block)
    try:
        if b is None:
            last, init_notes = _scan(run, a, source, start, state_a, progress)
        else:
            last, init_notes = _compare(run, a, b, source, start, state_a, state_b, size, journal, progress, last)
    finally:
        if journal is not None:
            journal.close()
    return _result(run, a, b, source, config, last + 1, resumed, init_notes)


def _compare(run: RunState, a: SteppedModel, b: SteppedModel, source: StepSource, start: int,
             state_a: Optional[TensorMap], state_b: Optional[TensorMap], size: int, journal: Optional[StepJournal],
             progress: Optional[Progress], last: int) -> Tuple[int, List[str]]:
    """Step A and B, reducing every `size` steps; returns (the last step that counts, initial-state notes).

    The hot loop: per step one dict of feeds per model, the two runs (the output lists onnxruntime
    returns, kept by reference until the block is reduced: no copies) and the state dicts for the
    next step. Everything else happens once per block (run.RunState.flush)."""
    config = run.config
    notes: List[str] = []
    back_a, back_b = run.back_a, run.back_b
    names_a, names_b = a.output_names, b.output_names
    run_a, run_b = a.session.ort_session.run, b.session.ort_session.run  # onnxruntime's public run
    # Feeds that A accepted have A's dtypes: B needs them cast only when its dtypes differ (fp16 I/O).
    cast = b.cast if any(a.dtypes.get(n) != b.dtypes.get(n) for n in a.wiring.step_inputs) else None
    single = (*back_a[0], *back_b[0]) if len(back_a) == len(back_b) == 1 else None
    rows: List[Tuple[int, TensorMap, TensorMap, List[Any], List[Any]]] = []
    carry: Tuple[TensorMap, TensorMap] = ({}, {})
    for step, feeds in source.steps(start, config.steps):
        if state_a is None or state_b is None:
            state_a, notes = a.initial_state(feeds, config.init_state)
            state_b = b.cast(state_a)
        if not rows:
            carry = (state_a, state_b)
        try:
            out_a = run_a(names_a, {**feeds, **state_a})
        except Exception as exc:
            found = _pending_nonfinite(run, carry, rows, journal)
            if found is not None:  # a step already run went non-finite: that is the finding
                return found, notes
            raise a.failure(step, exc) from exc
        if progress:
            progress(step, source.length)
        feeds_b = cast(feeds) if cast else feeds
        try:
            out_b = run_b(names_b, {**feeds_b, **state_b})
        except Exception as exc:
            found = _pending_nonfinite(run, carry, rows, journal)
            if found is not None:
                return found, notes
            raise b.failure(step, exc) from exc
        rows.append((step, feeds, feeds_b, out_a, out_b))
        if single:  # one state tensor (most streaming models): dict displays, no comprehension frames
            state_a, state_b = {single[0]: out_a[single[1]]}, {single[2]: out_b[single[3]]}
        else:
            state_a = {name: out_a[j] for name, j in back_a}
            state_b = {name: out_b[j] for name, j in back_b}
        if len(rows) == 1 and step == start:  # the first step tells how much a step's outputs hold
            size = _block_size(size, out_a, out_b)
        if len(rows) == size:
            block = Block(*carry, *map(list, zip(*rows)))
            rows = []
            kept = run.flush(block, journal)
            last = block.steps[kept - 1]
            if kept < size or (run.nonfinite is not None and config.stop_on_nonfinite):
                return last, notes
    if rows:
        block = Block(*carry, *map(list, zip(*rows)))
        kept = run.flush(block, journal)
        last = block.steps[kept - 1]
    return last, notes


def _pending_nonfinite(run: RunState, carry: Tuple[TensorMap, TensorMap], rows: List[Any],
                       journal: Optional[StepJournal]) -> Optional[int]:
    """When a run fails: reduce the steps already run; the last step that counts if one of them
    turned non-finite (the run stops there, as it would have at the block's end), else None."""
    if not rows:
        return None
    block = Block(*carry, *map(list, zip(*rows)))
    kept = run.flush(block, journal)
    return block.steps[kept - 1] if run.nonfinite is not None and run.config.stop_on_nonfinite else None


def _block_size(size: int, out_a: List[Any], out_b: List[Any]) -> int:
    """`size` steps, or fewer when that many steps' outputs of both models would pass BLOCK_BYTES."""
    held = sum(int(getattr(v, "nbytes", 0)) for v in list(out_a) + list(out_b))
    return max(1, min(size, BLOCK_BYTES // max(1, held)))


def _scan(run: RunState, a: SteppedModel, source: StepSource, start: int, state: Optional[TensorMap],
          progress: Optional[Progress]) -> Tuple[int, List[str]]:
    """One model alone until its first non-finite step (nan-bisect --sequence); returns (the last
    step that counts, initial-state notes).

    Steps run in blocks (their outputs held by reference) and a block's outputs are checked for
    NaN/Inf at once; only a block holding some is walked step by step (RunState.check_nonfinite, in
    step order, as one step at a time would). The steps run after the first non-finite one inside
    its block change nothing in the result; a run that fails after it reports the NaN/Inf."""
    config = run.config
    notes: List[str] = []
    names, back = a.output_names, run.back_a
    infer = a.session.ort_session.run
    single = back[0] if len(back) == 1 else None  # one state tensor: a dict display per step
    size = config.block
    rows: List[Tuple[int, TensorMap, TensorMap, List[Any]]] = []
    last = start - 1
    for step, feeds in source.steps(start, config.steps):
        if state is None:
            state, notes = a.initial_state(feeds, config.init_state)
        try:
            out = infer(names, {**feeds, **state})
        except Exception as exc:
            found = _scan_block(run, a, rows)
            if found is not None and config.stop_on_nonfinite:
                return found, notes
            raise a.failure(step, exc) from exc
        if progress:
            progress(step, source.length)
        rows.append((step, feeds, state, out))
        state = {single[0]: out[single[1]]} if single else {name: out[j] for name, j in back}
        if len(rows) == 1 and step == start:
            size = _block_size(size, out, [])
        if len(rows) == size:
            found = _scan_block(run, a, rows)
            last = rows[-1][0]
            rows = []
            if found is not None and config.stop_on_nonfinite:
                return found, notes
    if rows:
        found = _scan_block(run, a, rows)
        last = rows[-1][0]
        if found is not None and config.stop_on_nonfinite:
            return found, notes
    return last, notes


def _scan_block(run: RunState, a: SteppedModel, rows: List[Tuple[int, TensorMap, TensorMap, List[Any]]]) -> Optional[int]:
    """The first step of `rows` with non-finite outputs (recorded by run.check_nonfinite), else None.
    Without stop_on_nonfinite every such step is recorded in turn, as one step at a time did."""
    if not rows or nonfinite_free([row[3] for row in rows]):
        return None
    first = None
    for step, feeds, state, out in rows:
        if run.check_nonfinite(step, a, feeds, state, dict(zip(a.output_names, out))):
            if run.config.stop_on_nonfinite:
                return step
            first = step if first is None else first
    return first


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
        journal=str(config.journal) if config.journal else None, config=config.to_dict(), notes=notes,
        nonfinite_allowed=config.allow_nonfinite and b is not None)
