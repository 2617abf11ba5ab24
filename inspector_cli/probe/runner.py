"""Driving the capture for `mi probe`: every chunk over the samples, triggers that stop the run.

Chunks run one after another (`core.capture.run_capture`, chunk-major). A trigger stops the
chunk at the first matching sample; later chunks then only run the samples up to it. When a
later chunk meets a trigger on an *earlier* sample than the chunks before it stopped at, those
chunks have seen samples past the trigger, so every statistic is rebuilt from scratch over the
samples up to the trigger (rare: it needs both a chunked plan and such a trigger).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.capture import CaptureTarget, run_capture
from ..core.graph import ModelGraph
from ..core.inputs import SampleSet
from ..core.masks import MaskAnalysis
from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..plugins import NodeView, Plugin, call_plugin
from .quant import QuantTracker
from .tracker import SampleStats, ProbeTracker, Workspace
from .triggers import Trigger, first_match

Progress = Callable[[int, Optional[int], str], None]


@dataclass(frozen=True)
class Hit:
    """A trigger met: which one, on which sample (index in the data set) and tensor."""

    trigger: Trigger
    stats: SampleStats
    sample_index: int


@dataclass
class Lane:
    """A second statistics thread and its buffers (tracker.py `Workspace`): a sample's tensors are split
    between it and the thread that computes the others (probe/batch.py `HeldProbeRunner`)."""

    pool: ThreadPoolExecutor
    workspace: Workspace


def halves_by_size(names: Sequence[str], tensors: TensorMap) -> Tuple[List[str], List[str]]:
    """`names` split in two with about the same number of values each (largest first, each to the lighter
    half), in `names` order within a half."""
    sizes = {name: int(getattr(tensors.get(name), "size", 0) or 0) for name in names}
    halves: Tuple[List[str], List[str]] = ([], [])
    loads = [0, 0]
    for name in sorted(names, key=lambda n: -sizes[n]):
        lighter = 0 if loads[0] <= loads[1] else 1
        halves[lighter].append(name)
        loads[lighter] += sizes[name]
    order = {name: i for i, name in enumerate(names)}
    return sorted(halves[0], key=order.__getitem__), sorted(halves[1], key=order.__getitem__)


class _Stop(Exception):
    """Raised from the capture callback to end a chunk's pass at a trigger."""


@dataclass
class Consumers:
    """Everything fed with captured tensors; rebuilt by `factory` when statistics must restart."""

    trackers: Dict[str, ProbeTracker]
    quant: Dict[str, List[QuantTracker]]
    plugins: List[Tuple[Plugin, frozenset]]
    """(plugin, names of the tensors it accepted)."""


class ProbeRunner:
    """One probe over one model: `run()` returns the trigger hit, if any."""

    def __init__(self, graph: ModelGraph, runtime: RuntimeConfig, chunks: Sequence[Sequence[str]],
                 samples: SampleSet, factory: Callable[[], Consumers], nodes: Dict[str, Optional[NodeView]],
                 triggers: Sequence[Trigger] = (), *, on_hit: Optional[Callable[[Hit, TensorMap], None]] = None,
                 progress: Optional[Progress] = None, masks: Optional[MaskAnalysis] = None) -> None:
        self.graph, self.runtime = graph, runtime
        self.chunks = [list(c) for c in chunks]
        self.samples = samples
        self.factory = factory
        self.consumers = factory()
        self.nodes = nodes
        self.triggers = list(triggers)
        self.on_hit = on_hit
        self.progress = progress
        self.samples_done = 0
        self.restarted = False
        self.masks = masks
        """The model's masks: their intentional infinities are counted apart (`mask_counts`)."""

    def run(self) -> Optional[Hit]:
        limit = len(self.samples)
        processed: List[int] = []
        hit: Optional[Hit] = None
        for index, names in enumerate(self.chunks):
            found, seen = self._run_chunk(index, names, limit, self.triggers)
            processed.append(seen)
            if found is not None and (hit is None or found.sample_index < hit.sample_index):
                hit, limit = found, found.sample_index + 1
        if hit is not None and any(seen > limit for seen in processed):
            # Earlier chunks ran past the trigger sample: rebuild every statistic on samples[:limit].
            self.restarted = True
            self.consumers = self.factory()
            for index, names in enumerate(self.chunks):
                self._run_chunk(index, names, limit, ())
        self.samples_done = limit if hit is not None else len(self.samples)
        return hit

    def _run_chunk(self, index: int, names: List[str], limit: int,
                   triggers: Sequence[Trigger]) -> Tuple[Optional[Hit], int]:
        subset = self.samples if limit >= len(self.samples) else self.samples.subset(self.samples.refs[:limit])
        target = CaptureTarget(self.graph, self.runtime, [names])
        state = {"position": 0, "hit": None}
        offset = index * len(self.samples)
        total = len(self.chunks) * len(self.samples)

        def on_chunk(sample_id: str, _chunk: int, outputs: List[TensorMap]) -> None:
            position = state["position"]
            state["position"] = position + 1
            found = self._consume(sample_id, position, names, outputs[0], triggers)
            if found is not None:
                state["hit"] = found
                if self.on_hit is not None and len(self.chunks) == 1:
                    self.on_hit(found, outputs[0])
                raise _Stop

        def progress(done: int, _total: Optional[int], item: str) -> None:
            if self.progress is not None:
                self.progress(offset + done, total, item)

        try:
            self._capture(index, target, subset, on_chunk, progress)
        except _Stop:
            pass
        return state["hit"], state["position"]

    def _capture(self, index: int, target: CaptureTarget, samples: SampleSet,
                 on_chunk: Callable[[str, int, List[TensorMap]], None],
                 progress: Callable[[int, Optional[int], str], None]) -> None:
        """Run chunk `index` over `samples` (a subclass may keep its sessions between calls)."""
        run_capture([target], samples, on_chunk, progress=progress)

    def _consume(self, sample_id: str, position: int, names: List[str], tensors: TensorMap,
                 triggers: Sequence[Trigger]) -> Optional[Hit]:
        for tracker in self.consumers.trackers.values():
            tracker.workspace.settle()  # one workspace for all: the first call settles it
            break
        return self._update(sample_id, position, names, tensors, triggers)

    def _update(self, sample_id: str, position: int, names: List[str], tensors: TensorMap,
                triggers: Sequence[Trigger]) -> Optional[Hit]:
        """Every consumer of `names` fed with this sample's tensors; the first trigger met, in `names` order."""
        consumers = self.consumers
        found: Optional[Hit] = None
        cache: Dict[str, Optional[np.ndarray]] = {}
        for name in names:
            array = tensors[name]
            tracker = consumers.trackers.get(name)
            if tracker is not None:
                masked, rows = self._mask_counts(name, array, tensors, cache)
                stats = tracker.update(sample_id, array, masked, rows)
                if found is None and triggers:
                    trigger = first_match(triggers, stats)
                    if trigger is not None:
                        found = Hit(trigger, stats, position)
            for quant in consumers.quant.get(name, ()):
                quant.update(array)
            for plugin, accepted in consumers.plugins:
                if name in accepted and isinstance(array, np.ndarray):  # plugins take tensors, not sequences
                    call_plugin(plugin, "process_tensor", name, np.asarray(array), self.nodes.get(name))
        return found

    def _mask_counts(self, name: str, array: np.ndarray, tensors: TensorMap,
                     cache: Dict[str, Optional[np.ndarray]]) -> Tuple[int, int]:
        """(intended infinities of the tensor: a mask's, a reduction's identity over an empty set;
        fully masked rows behind the NaN of a Softmax's output or of its copies)."""
        masks = self.masks
        if not masks or not isinstance(array, np.ndarray) or array.dtype.kind != "f":
            return 0, 0
        masked = 0
        if masks.on_path(name) and np.isinf(array).any():
            masked, _ = masks.masked_count(name, array, tensors, cache)
        if name in masks.empty:
            masked += masks.identities(name, array, tensors)
        rows = 0
        if name in masks.rows_of and np.isnan(array).any():
            rows, exact = masks.row_nan(name, array, tensors, cache)
            if masks.rows_of[name] in masks.guards and not exact:
                rows = 0  # a guard excuses the masked rows only: any other NaN is found as NaN
        return masked, rows


def capture_chunks(graph: ModelGraph, runtime: RuntimeConfig, chunks: Sequence[Sequence[str]], samples: SampleSet,
                consume: Callable[[TensorMap], None]) -> None:
    """Run `samples` through every chunk in turn, handing each sample's tensors of a chunk to `consume`."""
    for names in chunks:
        target = CaptureTarget(graph, runtime, [list(names)])
        run_capture([target], samples, lambda _sid, _c, outputs: consume(outputs[0]))
