"""`--isolate`: each chosen layer's own error, next to the error it accumulated from upstream.

A second pass over the samples: the reference runs once more (capturing the layers to isolate and
the tensors their candidate subgraphs read), then one isolation model (core/isolate.py) runs the
candidate's producing subgraph of every chosen layer on those reference values. For a quantised
candidate, the pure noise of each layer's Q/DQ pair is measured too: the reference tensor against
DQ(Q(reference tensor)) with the candidate's scale and zero point, in numpy.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..core.binding import BoundRunner
from ..core.runner import Session, open_session
from ..core.types import TensorMap
from ..diff.engine import TensorTracker
from ..diff.fast_stats import Scratch, fast_pair_stats
from ..diff.values import is_numeric_tensor
from ..errors import UsageError
from .capture import LayerPlan, Reader
from .config import CompareConfig, LayerConfig
from .isoshapes import ShapeProbe, runtime_types
from .pairing.match import TensorPair
from .plan import ComparePlan
from .subgraph import build_isolation, fake_quantize, feed_value, qdq_noise_affine


NON_TENSOR_SKIP = "a sequence or map value (e.g. ZipMap's): isolation feeds and measures tensors only"


@dataclass(frozen=True)
class IsolationOutcome:
    """What `--isolate` measured: each isolated layer's own error, and its Q/DQ noise floor."""

    info: Dict[str, object]
    """requested, isolated and skipped layers (the result's `isolation` field)."""
    trackers: Dict[str, TensorTracker] = field(default_factory=dict)
    noise_trackers: Dict[str, TensorTracker] = field(default_factory=dict)
    runs: int = 0


def run_isolation(layers: LayerPlan, trackers: Sequence[TensorTracker], plan: ComparePlan,
                  config: CompareConfig, adapt_b: Optional[Callable[[TensorMap], TensorMap]] = None
                  ) -> IsolationOutcome:
    """Run the candidate's producing subgraph of each `--isolate` layer on the reference's values.
    `adapt_b` turns the reference's feeds into the candidate's (to probe its symbolic shapes)."""
    lc = config.layers or LayerConfig()
    chosen = [layers.pairs[i] for i in select_isolated(lc.isolate, layers.pairs, trackers)]
    input_sources = {p.b: p.a for p in plan.inputs.pairs}
    iso = build_isolation(layers.sem_b, layers.pairs, chosen, input_sources)
    if iso.untyped:  # shape inference could not type some cut tensors: a run of the candidate does
        _, first = next(iter(plan.samples))
        types = runtime_types(plan.graph_b, config.runtime_of_b, iso.untyped,
                              adapt_b(first) if adapt_b is not None else first)
        iso = build_isolation(layers.sem_b, layers.pairs, chosen, input_sources, types)
    info: Dict[str, object] = {"requested": list(lc.isolate), "isolated": list(iso.outputs),
                               "skipped": dict(iso.skipped)}
    if not iso.outputs:
        return IsolationOutcome(info)
    by_a = {p.a: p for p in layers.pairs}
    a_inputs = set(plan.graph_a.input_names)
    needed = [t for t in dict.fromkeys([*iso.sources, *iso.outputs]) if t not in a_inputs]
    readers = {t: layers.side_a.readers[by_a[t].view_a.expose] for t in needed}
    session_a = open_session(layers.side_a.target_graph, layers.side_a.target_runtime,  # type: ignore[arg-type]
                             extra_outputs=[r.expose for r in readers.values()], keep_outputs=False,
                             label=f"A {plan.graph_a.display_name}")
    runner_a = BoundRunner(session_a, [r.expose for r in readers.values()])
    folder = plan.graph_b.folder.resolve() if plan.graph_b.folder is not None and plan.graph_b.uses_external_data else None
    session_iso = Session(iso.model.SerializeToString(), config.runtime_of_b, label="isolation model",
                          external_dir=folder)
    out_names = list(iso.outputs.values())
    runner_iso = BoundRunner(session_iso, out_names)
    iso_trackers = {a: TensorTracker(a, out, distribution=False, keep_per_sample=False) for a, out in iso.outputs.items()}
    noise_trackers: Dict[str, TensorTracker] = {}
    noise_specs = {}
    for a in iso.outputs:
        spec = by_a[a].view_b.quant
        affine = qdq_noise_affine(layers.sem_b, spec) if spec is not None else None
        if affine is not None:
            noise_specs[a] = affine
            noise_trackers[a] = TensorTracker(a, a, distribution=False, keep_per_sample=False)
    probe = ShapeProbe(plan.graph_b, config.runtime_of_b, iso.feeds)
    scratch, runs = Scratch(), 0
    non_tensor: Set[str] = set()
    for sample, feeds in plan.samples:
        captured = runner_a.run(feeds, sample)
        values: Dict[str, np.ndarray] = {}
        shapes: Dict[str, Tuple[int, ...]] = {}
        for tensor, reader in readers.items():
            raw = captured[reader.expose]
            if not is_numeric_tensor(raw):  # a sequence or map (ZipMap's output): no tensor to feed or measure
                non_tensor.add(tensor)
                continue
            values[tensor] = reader.value(raw, layers.side_a.resolver)
            # the reference layout's shape: binds the candidate's symbolic dims (dynamic exports)
            shapes[tensor] = tuple(raw.shape) if reader.perm is None else \
                tuple(raw.shape[i] for i in np.argsort(reader.perm))
        for name in a_inputs:
            values[name] = np.asarray(feeds[name]).reshape(-1)  # integer ids and masks keep their values
            shapes[name] = tuple(np.shape(feeds[name]))
        iso_feeds = {}
        for f in iso.feeds:
            try:
                iso_feeds[f.name] = feed_value(values[f.source], f, layers.sem_b, shapes.get(f.source))
            except ValueError:  # a reshaped view of the paired tensor: its shape comes from the candidate
                bound = probe.shapes(adapt_b(feeds) if adapt_b is not None else feeds).get(f.name)
                iso_feeds[f.name] = feed_value(values[f.source], f, layers.sem_b, bound, exact=True)
        outputs = runner_iso.run(iso_feeds, sample)
        runs += 2
        for a, out in iso.outputs.items():
            if a in non_tensor:
                continue
            _add(iso_trackers[a], sample, values[a], Reader(out, by_a[a].view_b.quant).flat(outputs[out], layers.sem_b),
                 scratch)
            if a in noise_specs:
                noisy = fake_quantize(values[a], noise_specs[a], np.empty_like(values[a]))
                _add(noise_trackers[a], sample, values[a], (noisy, None), scratch)
    for a in non_tensor & set(iso.outputs):
        info["skipped"][a] = NON_TENSOR_SKIP  # type: ignore[index]
        info["isolated"].remove(a)  # type: ignore[attr-defined]
        iso_trackers.pop(a)
        noise_trackers.pop(a, None)
    return IsolationOutcome(info, iso_trackers, noise_trackers, runs)


def _add(tracker: TensorTracker, sample: str, reference: np.ndarray, candidate: tuple, scratch: Scratch) -> None:
    flat, affine = candidate
    if flat.size != reference.size:
        tracker.add(sample, reference, flat)
        return
    tracker.samples += 1
    tracker.add_stats(sample, fast_pair_stats(reference, flat, scratch, affine_b=affine))


def own_share(accumulated: TensorTracker, isolated: TensorTracker) -> "float | None":
    """Share of the accumulated squared error that the layer produces on its own."""
    total = accumulated.total.sum_sq_err
    if total <= 0.0:
        return None
    return min(1.0, isolated.total.sum_sq_err / total)


def error_source(share: "float | None") -> "str | None":
    if share is None:
        return None
    return "own" if share >= 0.5 else "inherited" if share < 0.1 else "mixed"


__all__: List[str] = ["run_isolation", "own_share", "error_source"]


def select_isolated(spec: Sequence[str], pairs: Sequence[TensorPair], trackers: Sequence[TensorTracker]) -> List[int]:
    """Indices of the layers `--isolate` names: all, worst:N (lowest cosine), or names/globs."""
    chosen: List[int] = []
    for item in spec:
        if item == "all":
            chosen.extend(range(len(pairs)))
        elif item.startswith("worst:"):
            count = int(item.split(":", 1)[1])
            ranked = sorted(range(len(pairs)), key=lambda i: (trackers[i].dataset_metrics().get("cosine") or 0.0,
                                                               trackers[i].dataset_metrics().get("sqnr") or 0.0))
            chosen.extend(ranked[:count])
        else:
            found = [i for i, p in enumerate(pairs) if p.a == item or fnmatch.fnmatchcase(p.a, item)]
            if not found:
                raise UsageError(f"--isolate {item}: no compared layer is named like that",
                                 hint="name a tensor of the layer table, a glob, 'all' or 'worst:N'")
            chosen.extend(found)
    return sorted(set(chosen))
