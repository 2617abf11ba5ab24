"""The state of one A/B sequence run: block reduction, folding, attribution, non-finite hand-off.

At the first divergence (a failed gate, else a differing decision) B's step is replayed with A's
state: if B then agrees with A, the difference was carried in by the state ("born in the state"),
otherwise B's own step computation produces it ("born in the step").
"""
from __future__ import annotations

from dataclasses import dataclass
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
from .journal import StepJournal
from .metrics import DISTRIBUTION, KEEP, decision_of, step_metrics
from .model import SteppedModel
from .stats import SequenceStats

if TYPE_CHECKING:
    from .config import SequenceConfig


@dataclass(slots=True)
class Pending:
    """One step run but not yet reduced: references to its feeds, the states fed in and the outputs."""

    step: int
    feeds_a: TensorMap
    feeds_b: TensorMap
    state_a: TensorMap
    state_b: TensorMap
    out_a: TensorMap
    out_b: TensorMap


class RunState:
    """The mutable state of one run (kept out of the public function to keep it readable)."""

    def __init__(self, a: SteppedModel, b: Optional[SteppedModel], config: "SequenceConfig") -> None:
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

    def columns(self, block: Sequence["Pending"]) -> Tuple[Dict[str, BlockColumns], Dict[str, BlockColumns]]:
        """Each step output's and each state's metrics over the block, one column per metric."""
        one = partial(step_metrics, distribution=self.distribution)
        outputs = {}
        for name in self.a.wiring.step_outputs:
            pairs = [(p.out_a[name], p.out_b[name]) for p in block]
            outputs[name] = columns_from_rows([one(a, b) for a, b in pairs]) if self.distribution \
                else block_columns(pairs, one)
        states = {pair.output: block_columns([(p.out_a[pair.output], p.out_b[pair.output]) for p in block], step_metrics)
                  for pair in self.a.wiring.pairs}
        return outputs, states

    def flush(self, block: Sequence["Pending"], journal: Optional[StepJournal]) -> int:
        """Reduce, fold and journal a block; returns how many of its steps count (fewer when a step
        turned non-finite and the run stops there)."""
        assert self.b is not None
        outputs, states = self.columns(block)
        decisions: List[Optional[List[List[int]]]] = [None] * len(block)
        if self.decision is not None:
            chosen_a = batch_decisions([p.out_a[self.decision] for p in block])
            chosen_b = batch_decisions([p.out_b[self.decision] for p in block])
            decisions = [[x, y] for x, y in zip(chosen_a, chosen_b)]
        keep = self._check_block(block, list(outputs.values()) + list(states.values()))
        if keep < len(block):
            outputs = {k: v.head(keep) for k, v in outputs.items()}
            states = {k: v.head(keep) for k, v in states.items()}
        steps = [p.step for p in block[:keep]]
        events = self.stats.fold_columns(steps, outputs, states, decisions[:keep])
        if self.divergence is None:
            for (failed, differs), p in zip(events, block):
                # The gates define divergence when there are any; without gates, the decision does.
                if failed if self.config.gates else differs:
                    self.attribute(p.step, p.feeds_b, p.state_a, p.state_b, p.out_a, failed, differs)
                    break
        if journal is not None:
            journal.append_many(self._records(steps, outputs, states, decisions))
            if any(journal.due(step) for step in steps):
                last = block[keep - 1]
                extra = {"divergence": self.divergence.__dict__} if self.divergence else {}
                journal.checkpoint(last.step, self.a.wiring.feed_back(last.out_a), self.b.wiring.feed_back(last.out_b), extra)
        return keep

    def _check_block(self, block: Sequence["Pending"], columns: List[BlockColumns]) -> int:
        """Look closer at the steps whose metrics counted NaN/Inf; how many steps of the block count."""
        assert self.b is not None
        if self.nonfinite is not None or not any(c.counts for c in columns):
            return len(block)
        flagged_a = [any(f) for f in zip(*(c.flagged("nonfinite_a") for c in columns))]
        flagged_b = [any(f) for f in zip(*(c.flagged("nonfinite_b") for c in columns))]
        for i, p in enumerate(block):
            if (flagged_a[i] and self.check_nonfinite(p.step, self.a, p.feeds_a, p.state_a, p.out_a)) \
                    or (flagged_b[i] and self.check_nonfinite(p.step, self.b, p.feeds_b, p.state_b, p.out_b)):
                return i + 1 if self.config.stop_on_nonfinite else len(block)
        return len(block)

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
