"""The steps of a sequence as a sample set, for `mi probe --sequence`: one pass, nothing on disk.

Sample `step_NNNNNN` is step N's inputs plus the state carried into it. The state is not computed
here: the probe's own run of step N hands its outputs back (`observe`), and the state outputs are
among them (`follow` names them, so the probe's capture session keeps them). One inference per
step, statistics folded as the steps go, memory flat in the number of steps.

The probe runs its capture chunk by chunk (several chunks when the tensors exceed the capture
budget) and may rerun a block of samples after a trigger: an iteration that starts again at an
earlier step restores the state saved when that step was first reached and re-reads the inputs
from there, so every pass sees the same trajectory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from ..core.inputs import SampleRef, SampleSet
from ..core.types import TensorMap
from ..errors import UsageError
from .model import SteppedModel
from .source import StepSource

MARKS = 4
"""States kept for iterations that start again at an earlier step (block starts; a few suffice)."""


class _Cursor:
    """Where the walk through the steps is: shared by a sample set and its subsets."""

    def __init__(self, model: SteppedModel, source: StepSource, limit: int, init_state: Optional[Path]) -> None:
        self.model, self.source, self.limit, self.init_state = model, source, limit, init_state
        self.next = 0
        self.state: Optional[TensorMap] = None
        self.steps: Optional[Iterator[Tuple[int, TensorMap]]] = None
        self.marks: Dict[int, Optional[TensorMap]] = {}
        self.last: Optional[Tuple[int, TensorMap]] = None
        self.notes: List[str] = []

    def mark(self, step: int) -> None:
        """An iteration starts at `step`: remember the state going into it (to start there again)."""
        if step == self.next and step not in self.marks:
            self.marks[step] = self.state
            for old in sorted(self.marks)[:-MARKS]:
                del self.marks[old]

    def feeds(self, step: int) -> TensorMap:
        """Step `step`'s inputs merged with the state carried into it."""
        if self.last is not None and self.last[0] == step:
            return self.last[1]  # asked again (the probe's first look at the shapes, a dump of the hit step)
        if step != self.next or self.steps is None:
            if step not in self.marks and step != 0:
                raise UsageError(f"sequence probe: step {step} requested out of order (at step {self.next})")
            self.state = self.marks.get(step)
            self.steps = self.source.steps(step, self.limit)
            self.next = step
        index, feeds = next(self.steps)
        if self.state is None:
            self.state, notes = self.model.initial_state(feeds, self.init_state)
            self.notes = notes
        merged = {**feeds, **self.state}
        self.last, self.next = (index, merged), index + 1
        return merged

    def observe(self, outputs: TensorMap) -> None:
        self.state = self.model.wiring.feed_back(outputs)


class SteppedSamples(SampleSet):
    """Samples step_000000, step_000001, ... of `source` with the state fed back by `observe`."""

    def __init__(self, refs: Sequence[SampleRef], cursor: _Cursor) -> None:
        super().__init__(list(refs), list(cursor.model.inputs), f"sequence {cursor.source.path}")
        self.cursor = cursor
        self.follow = [p.output for p in cursor.model.wiring.pairs]
        """Model outputs the probe's capture must return (and hand to `observe`): the state."""

    def __iter__(self) -> Iterator[Tuple[str, TensorMap]]:
        if self.refs:
            self.cursor.mark(self.refs[0].index)
        for ref in self.refs:
            yield ref.id, self.cursor.feeds(ref.index)

    def load(self, ref: SampleRef) -> TensorMap:
        return self.cursor.feeds(ref.index)

    def observe(self, outputs: TensorMap) -> None:
        """The outputs of the step just yielded: its state outputs go into the next step."""
        self.cursor.observe(outputs)

    def subset(self, refs: Sequence[SampleRef]) -> "SteppedSamples":
        return SteppedSamples(refs, self.cursor)

    @property
    def notes(self) -> List[str]:  # type: ignore[override]
        return list(self.source_notes) + self.cursor.notes

    @notes.setter
    def notes(self, value: List[str]) -> None:
        self.source_notes = list(value)


def stepped_samples(model: SteppedModel, source: StepSource, steps: Optional[int],
                    init_state: Optional[Path] = None) -> SteppedSamples:
    """The steps of `source` (at most `steps`) as samples for one pass of the probe."""
    count = source.length if steps is None else min(steps, source.length if source.length is not None else steps)
    if not count:
        raise UsageError(f"{source.path}: holds no step")
    cursor = _Cursor(model, source, count, init_state)
    samples = SteppedSamples([SampleRef(f"step_{k:06d}", "step", index=k) for k in range(count)], cursor)
    samples.notes = list(source.notes)
    return samples
