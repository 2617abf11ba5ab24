"""The state of one A/B sequence run: block reduction, folding, attribution, non-finite hand-off.

At the first divergence (a failed gate, else a differing decision) B's step is replayed with A's
state: if B then agrees with A, the difference was carried in by the state ("born in the state"),
otherwise B's own step computation produces it ("born in the step").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ..core.types import TensorMap
from ..diff.gates import check_gate_targets
from ..diff.metrics import metric_value_ok
from ..errors import UsageError
from ..results.sequence import Divergence, NonFiniteStep
from .batch import BlockColumns, batch_decisions, block_columns, columns_from_rows
from .bundle import nonfinite_names, write_step_bundle
from .fused import FusedBlock, fuse
from .journal import StepJournal
from .metrics import DISTRIBUTION, KEEP, decision_of, decision_view, step_metrics, unmatched
from .model import SteppedModel
from .stats import SequenceStats

if TYPE_CHECKING:
    from .config import SequenceConfig


@dataclass(slots=True)
class Block:
    """Steps run but not yet reduced: each step's inputs and outputs by reference (the output lists
    onnxruntime returned, in each model's `output_names` order), plus the state carried into the
    block's first step; the state fed into a later step is its predecessor's state outputs."""

    carry_a: TensorMap
    carry_b: TensorMap
    steps: List[int] = field(default_factory=list)
    feeds_a: List[TensorMap] = field(default_factory=list)
    feeds_b: List[TensorMap] = field(default_factory=list)
    outs_a: List[List[Any]] = field(default_factory=list)
    outs_b: List[List[Any]] = field(default_factory=list)


class RunState:
    """The mutable state of one run (kept out of the public function to keep it readable)."""

    def __init__(self, a: SteppedModel, b: Optional[SteppedModel], config: "SequenceConfig") -> None:
        self.a, self.b, self.config = a, b, config
        outputs = list(a.wiring.step_outputs) if b is not None else []
        self.decision = self._decision_output(outputs)
        self.last_position = self._decoder_logits(self.decision)
        check_gate_targets(config.gates, outputs)
        states = [p.output for p in a.wiring.pairs] if b is not None else []
        self.stats = SequenceStats(outputs, states, config.gates, self.decision or (outputs[0] if outputs else None),
                                   config.timeline_points, config.allow_nonfinite)
        # KL / top-k on the last axis only when a gate asks for them (they cost more than a small step).
        self.distribution = any(g.metric in DISTRIBUTION for g in config.gates)
        self.divergence: Optional[Divergence] = None
        self.nonfinite: Optional[NonFiniteStep] = None
        self.notes: List[str] = []
        # Where each compared tensor (step outputs, then state outputs) sits in each model's output list,
        # and which output list entry feeds which state input.
        self.compared = outputs + states
        self.index_a = {name: i for i, name in enumerate(a.output_names)}
        self.back_a = [(p.input, self.index_a[p.output]) for p in a.wiring.pairs]
        self.index_b: Dict[str, int] = {}
        self.back_b: List[Tuple[str, int]] = []
        if b is not None:
            self.index_b = {name: i for i, name in enumerate(b.output_names)}
            self.back_b = [(p.input, self.index_b[p.output]) for p in b.wiring.pairs]

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

    def _decoder_logits(self, decision: Optional[str]) -> bool:
        """Whether the decision output is a decoder's logits, whose decision is the last position's
        argmax (the generated token), not every prompt position's: the output has rank 3 ([batch,
        seq, vocab]) and the model carries a KV cache (a wired state whose name says past/cache)."""
        if decision is None or not any(p.kv_cache for p in self.a.wiring.pairs):
            return False
        info = next((t for t in self.a.graph.outputs if t.name == decision), None)
        return info is not None and info.shape is not None and len(info.shape) == 3

    # ---- a block's steps, as the per-step code needs them ------------------------------------------
    def state_in(self, block: Block, i: int, role: str) -> TensorMap:
        """The state fed into the block's step `i` of model `role` ('A' or 'B')."""
        if i == 0:
            return block.carry_a if role == "A" else block.carry_b
        outs, back = (block.outs_a, self.back_a) if role == "A" else (block.outs_b, self.back_b)
        return {name: outs[i - 1][j] for name, j in back}

    def outputs_of(self, block: Block, i: int, role: str) -> TensorMap:
        """Every output of the block's step `i` of model `role`, by name."""
        model, outs = (self.a, block.outs_a) if role == "A" else (self.b, block.outs_b)
        assert model is not None
        return dict(zip(model.output_names, outs[i]))

    def columns(self, block: Block) -> Tuple[Dict[str, BlockColumns], Dict[str, BlockColumns]]:
        """Each step output's and each state's metrics over the block, one column per metric."""
        one = partial(step_metrics, distribution=self.distribution, allow_nonfinite=self.config.allow_nonfinite)
        plain = partial(step_metrics, allow_nonfinite=self.config.allow_nonfinite)
        outputs, states = {}, {}
        for name in self.compared:
            ja, jb = self.index_a[name], self.index_b[name]
            pairs = [(x[ja], y[jb]) for x, y in zip(block.outs_a, block.outs_b)]
            if name in self.stats.outputs:
                outputs[name] = columns_from_rows([one(a, b) for a, b in pairs]) if self.distribution \
                    else block_columns(pairs, one)
            else:
                states[name] = block_columns(pairs, plain)
        return outputs, states

    def flush(self, block: Block, journal: Optional[StepJournal]) -> int:
        """Reduce, fold and journal a block; returns how many of its steps count (fewer when a step
        turned non-finite and the run stops there)."""
        assert self.b is not None
        fused = None if self.distribution else fuse(
            block.outs_a, block.outs_b, self.compared, [self.index_a[n] for n in self.compared],
            [self.index_b[n] for n in self.compared], self.decision, self.last_position)
        if fused is not None:  # the common case: every value finite, one vectorised pass (fused.py)
            keep = len(block.steps)
            events = self.stats.fold_fused(block.steps, fused)
        else:
            keep, events, records = self._fold_columns(block, journal is not None)
        if self.divergence is None:
            for i, (failed, differs) in enumerate(events):
                # The gates define divergence when there are any; without gates, the decision does.
                if failed if self.config.gates else differs:
                    self.attribute(block.steps[i], block.feeds_b[i], self.state_in(block, i, "A"),
                                   self.state_in(block, i, "B"), self.outputs_of(block, i, "A"), failed, differs)
                    break
        if journal is not None:
            journal.append_many(self._fused_records(block.steps, fused) if fused is not None else records)
            if any(journal.due(step) for step in block.steps[:keep]):
                extra = {"divergence": self.divergence.__dict__} if self.divergence else {}
                journal.checkpoint(block.steps[keep - 1], self.state_in(block, keep, "A"),
                                   self.state_in(block, keep, "B"), extra)
        return keep

    def _fold_columns(self, block: Block, records: bool) -> Tuple[int, List[Tuple[List[str], bool]], List[Dict[str, Any]]]:
        """The per-tensor path (batch.py): NaN/Inf, shapes that change, non-float outputs, KL/top-k gates."""
        assert self.b is not None
        outputs, states = self.columns(block)
        decisions: List[Optional[List[List[int]]]] = [None] * len(block.steps)
        if self.decision is not None:
            ja, jb = self.index_a[self.decision], self.index_b[self.decision]
            chosen_a = batch_decisions([decision_view(x[ja], self.last_position) for x in block.outs_a])
            chosen_b = batch_decisions([decision_view(y[jb], self.last_position) for y in block.outs_b])
            decisions = [[x, y] for x, y in zip(chosen_a, chosen_b)]
        keep = self._check_block(block, list(outputs.values()) + list(states.values()))
        if keep < len(block.steps):
            outputs = {k: v.head(keep) for k, v in outputs.items()}
            states = {k: v.head(keep) for k, v in states.items()}
        steps = block.steps[:keep]
        events = self.stats.fold_columns(steps, outputs, states, decisions[:keep])
        return keep, events, self._records(steps, outputs, states, decisions) if records else []

    def _check_block(self, block: Block, columns: List[BlockColumns]) -> int:
        """Look closer at the steps whose metrics counted NaN/Inf; how many steps of the block count."""
        assert self.b is not None
        if self.nonfinite is not None or not any(c.counts for c in columns):
            return len(block.steps)
        names = list(self.stats.outputs) + list(self.stats.states)
        for i, step in enumerate(block.steps):
            rows = {n: c.row(i) for n, c in zip(names, columns) if c.has(i)}
            # A step output is at fault with a NaN, or an Inf the other model lacks at that place (the
            # same Inf in both is a mask: equal). A fed-back state with any NaN/Inf is (an overflow
            # carried into the next step is never a mask, even when both models overflow alike).
            bad_a = [n for n, row in rows.items() if self._at_fault(n, row, "a")]
            bad_b = [n for n, row in rows.items() if self._at_fault(n, row, "b")]
            if (bad_a and self.check_nonfinite(step, self.a, block.feeds_a[i], self.state_in(block, i, "A"),
                                               self.outputs_of(block, i, "A"), bad_a)) \
                    or (bad_b and self.check_nonfinite(step, self.b, block.feeds_b[i], self.state_in(block, i, "B"),
                                                       self.outputs_of(block, i, "B"), bad_b)):
                stop = self.config.stop_on_nonfinite and not self.config.allow_nonfinite
                return i + 1 if stop else len(block.steps)
        return len(block.steps)

    def _at_fault(self, name: str, row: Dict[str, Any], side: str) -> bool:
        if name in self.stats.states:
            return bool(row.get(f"nonfinite_{side}"))
        return unmatched(row, side) > 0

    def _fused_records(self, steps: Sequence[int], fused: FusedBlock) -> List[Dict[str, Any]]:
        """The JSONL records of a fused block (the same lines as `_records` gives for its columns)."""
        rows, decisions = fused.rows(), fused.decisions()
        count = len(self.stats.outputs)
        outputs, states = self.compared[:count], self.compared[count:]
        records = []
        for i, step in enumerate(steps):
            cells = rows[i]
            record: Dict[str, Any] = {"step": step, "outputs": dict(zip(outputs, cells[:count])),
                                      "states": dict(zip(states, cells[count:]))}
            if self.decision is not None:
                record["decision"] = decisions[i]
            records.append(record)
        return records

    def _records(self, steps: Sequence[int], outputs: Dict[str, BlockColumns], states: Dict[str, BlockColumns],
                 decisions: Sequence[Any]) -> List[Dict[str, Any]]:
        """The JSONL records of the block's steps (built only for the journal)."""
        records = []
        for i, step in enumerate(steps):
            record: Dict[str, Any] = {"step": step, "outputs": {n: c.row(i) for n, c in outputs.items()},
                                      "states": {n: c.row(i) for n, c in states.items()}}
            if self.decision is not None:
                record["decision"] = decisions[i]
            records.append(record)
        return records

    def attribute(self, step: int, feeds_b: TensorMap, state_a: TensorMap, state_b: TensorMap,
                  out_a: TensorMap, failed: List[str], differs: bool) -> None:
        """Replay B's step with A's state; decide where the divergence was born."""
        assert self.b is not None
        trigger = "gate" if failed else "decision"
        detail = failed[0] if failed else f"decision of '{self.decision}' differs"
        tensor = failed[0].rsplit(" on ", 1)[1] if failed else self.decision
        drift = [step_metrics(state_a[k], state_b[k], distribution=False,
                              allow_nonfinite=self.config.allow_nonfinite).get("cosine") for k in state_a]
        drift_value = min((d for d in drift if d is not None), default=None)
        if not self.config.attribute:
            self.divergence = Divergence(step, trigger, detail, "unknown", state_cosine=drift_value)
            return
        replay = self.b.run(feeds_b, self.b.cast(state_a), step)
        metrics = step_metrics(out_a[tensor], replay[tensor], self.distribution, self.config.allow_nonfinite)
        if failed:
            gates = [g for g in self.config.gates if f"{g.describe()} on {tensor}" in failed]
            agrees = all(metric_value_ok(g.metric, metrics.get(g.metric), g.threshold) for g in gates)
        else:
            last = self.last_position and tensor == self.decision
            agrees = decision_of(decision_view(out_a[tensor], last)) == decision_of(decision_view(replay[tensor], last))
        # a replay that still differs in its NaN/Inf does not agree, whatever its argmax says
        agrees = agrees and (self.config.allow_nonfinite or not metrics.get("nonfinite_mismatch"))
        self.divergence = Divergence(step, trigger, detail, "state" if agrees else "step",
                                     replay={k: v for k, v in metrics.items() if k in KEEP},
                                     replay_agrees=agrees, state_cosine=drift_value)

    def check_nonfinite(self, step: int, model: SteppedModel, feeds: TensorMap, state: TensorMap,
                        outputs: TensorMap, names: Optional[List[str]] = None) -> bool:
        """Record the first non-finite step of `model` (`names`: its tensors at fault; default: every
        output holding NaN/Inf, as the one-model scan has it); False when there is none."""
        bad = names if names is not None else nonfinite_names(outputs)
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
