"""Every tensor of every sample: all origins (`--all`), masked values (`--deep`), fp16 ranges.

Every computed tensor is exposed, in as many runs per sample as the memory budget needs
(`core.capture.plan_capture`); each run's tensors are reduced to statistics at once, so memory
stays bounded by one chunk. When everything fits, the one session is kept across samples and the
values stay available for the root-cause rules.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set

import numpy as np

from ..core.types import tensor_shapes
from ..core.capture import CapturePlan, plan_capture
from ..core.masks import MaskAnalysis, find_masks
from ..core.runner import Session
from ..errors import MiError
from ..results.nan_bisect import Origin, RangeEvent, SampleRecord, TensorStats
from .analyse import find_origins, first_nan_birth
from .describe import ValueLookup, describe_origin, describe_transition, input_origin
from .model import PreparedModel
from .values import FP16_MAX, FP16_TINY, Predicate, fp16_range, is_bad, nonfinite_counts, tensor_stats

SENSITIVE_INPUTS = {"Div": 1, "Reciprocal": 0, "Log": 0, "Pow": 0}
"""(op, input index) where a value flushed to zero becomes Inf or NaN."""


class _Tensors:
    """What one sample's captured tensors reduce to, chunk after chunk."""

    def __init__(self, fp16: bool, keep_values: bool, masks: Optional[MaskAnalysis] = None) -> None:
        self.masks = masks
        self.fp16 = fp16
        self.keep_values = keep_values
        self.values: Dict[str, np.ndarray] = {}
        self.stats: Dict[str, TensorStats] = {}
        self.ranges: Dict[str, Dict[str, float]] = {}
        self.bad: Set[str] = set()
        self.nan: Set[str] = set()

    def add(self, out: Mapping[str, np.ndarray], names: Sequence[str],
            feeds: Optional[Mapping[str, np.ndarray]] = None) -> None:
        env = {**feeds, **out} if feeds and self.masks else out  # a mask's condition may be a graph input
        for name in names:
            value = out[name]
            if is_bad(value) and not (self.masks and self.masks.intended(name, value, env)):  # a mask's -Inf
                self.bad.add(name)
                if is_bad(value, Predicate.NAN):
                    self.nan.add(name)
            if self.fp16:
                r = fp16_range(value)
                if r is not None:
                    self.ranges[name] = r
            if self.keep_values:
                self.values[name] = value
            else:
                self.stats[name] = tensor_stats(name, value)


def _shape_key(feeds: Mapping[str, np.ndarray]) -> tuple:
    return tuple(sorted(tensor_shapes(feeds).items()))


def error_record(sample: str, message: str) -> SampleRecord:
    return SampleRecord(sample=sample, status="error", error=message)


class FullScanner:
    """Exposes every tensor; finds all origins, masked origins and fp16 range events of a sample."""

    def __init__(self, prepared: PreparedModel, budget: int, *, all_origins: bool, deep: bool, fp16: bool) -> None:
        self.prepared = prepared
        self.topo = prepared.topo
        self.budget = budget
        self.all_origins = all_origins
        self.deep = deep
        self.fp16 = fp16
        self.names = list(self.topo.position)
        self.masks = find_masks(prepared.graph)
        self._plans: Dict[object, CapturePlan] = {}
        self._session: Optional[Session] = None
        self._fetch_sessions: Dict[tuple, Session] = {}

    def plan(self, feeds: Mapping[str, np.ndarray]) -> CapturePlan:
        key = tuple(sorted(tensor_shapes(feeds).items()))
        if key not in self._plans:
            sizes = self.prepared.sizes(feeds)
            self._plans[key] = plan_capture([sizes[n] for n in self.names], self.budget)
        return self._plans[key]

    def _fetch(self, feeds: Mapping[str, np.ndarray], names: List[str]) -> Dict[str, np.ndarray]:
        key = tuple(names)
        if key not in self._fetch_sessions:
            self._fetch_sessions = {key: self.prepared.open_full(names, label="values")}
        return self._fetch_sessions[key].run(feeds, names)

    def analyse(self, sample: str, feeds: Mapping[str, np.ndarray]) -> SampleRecord:
        plan = self.plan(feeds)
        single = len(plan.chunks) == 1
        acc = _Tensors(self.fp16, keep_values=single, masks=self.masks)
        for chunk in plan.chunks:
            names = [self.names[i] for i in chunk]
            if single:
                if self._session is None:
                    self._session = self.prepared.open_full(names)
                session = self._session
            else:
                session = self.prepared.open_full(names)
            acc.add(session.run(feeds, list(dict.fromkeys([*self.topo.outputs, *names])), sample=sample), names, feeds)
        return self._finish(sample, feeds, plan, acc)

    def run_shard(self, keys: Sequence[str], load: Callable[[int], Mapping[str, np.ndarray]],
                  started: Callable[[int], None], finished: Callable[[int, Any, Optional[str]], None]) -> None:
        """A shard of samples, chunk-major when one sample needs several runs: each chunk's session
        is opened once for the whole shard instead of once per sample (samples are re-read)."""
        errors: Dict[int, str] = {}
        accs: Dict[int, _Tensors] = {}
        alone: List[int] = []
        plan: Optional[CapturePlan] = None
        shape: tuple = ()
        for chunk_index in range(1 << 30):
            if plan is not None and chunk_index >= len(plan.chunks):
                break
            session: Optional[Session] = None
            for index, key in enumerate(keys):
                if index in errors or index in alone:
                    continue
                started(index)
                try:
                    feeds = load(index)
                    if plan is None:
                        plan, shape = self.plan(feeds), _shape_key(feeds)
                        if len(plan.chunks) == 1:  # one run per sample: no need to go chunk-major
                            return self._each(keys, load, started, finished, errors)
                    if _shape_key(feeds) != shape:
                        alone.append(index)  # planned for other shapes: analysed on its own below
                        continue
                    names = [self.names[i] for i in plan.chunks[chunk_index]]
                    if session is None:
                        session = self.prepared.open_full(names)
                    accs.setdefault(index, _Tensors(self.fp16, keep_values=False, masks=self.masks)).add(
                        session.run(feeds, list(dict.fromkeys([*self.topo.outputs, *names])), sample=key), names, feeds)
                except MiError as exc:
                    errors[index] = str(exc)
            if plan is None:
                break  # no sample of the shard could be read
        for index, key in enumerate(keys):
            try:
                if index in errors:
                    record = error_record(key, errors[index])
                elif index in alone:
                    started(index)
                    record = self.analyse(key, load(index))
                else:
                    assert plan is not None
                    record = self._finish(key, load(index), plan, accs.pop(index))
            except MiError as exc:
                record = error_record(key, str(exc))
            finished(index, record, None)
        return None

    def _each(self, keys: Sequence[str], load: Callable[[int], Mapping[str, np.ndarray]],
              started: Callable[[int], None], finished: Callable[[int, Any, Optional[str]], None],
              errors: Dict[int, str]) -> None:
        for index, key in enumerate(keys):
            started(index)
            try:
                record = error_record(key, errors[index]) if index in errors else self.analyse(key, load(index))
            except MiError as exc:
                record = error_record(key, str(exc))
            finished(index, record, None)

    def _finish(self, sample: str, feeds: Mapping[str, np.ndarray], plan: CapturePlan, acc: "_Tensors") -> SampleRecord:
        single = len(plan.chunks) == 1
        lookup = ValueLookup(self.prepared, feeds, acc.values, acc.stats,
                             fetch=None if single else (lambda n: self._fetch(feeds, n)))
        return self._record(sample, feeds, plan, acc.bad, acc.nan, acc.ranges, lookup)

    def _record(self, sample: str, feeds: Mapping[str, np.ndarray], plan: CapturePlan, bad: Set[str],
                nan: Set[str], ranges: Dict[str, Dict[str, float]], lookup: ValueLookup) -> SampleRecord:
        positions = list(range(len(self.topo.nodes)))
        dirty = [o for o in self.topo.outputs if o in bad]
        counts = {o: self._counts(o, lookup) for o in dirty}
        scan = find_origins(self.topo, positions, bad, dirty)
        wanted = scan.reaching if self.all_origins else scan.reaching[:1]
        origins: List[Origin] = [input_origin(describe_origin(self.prepared, p, lookup), sample) for p in wanted]
        nan_targets = [o for o in dirty if o in nan]
        if origins and nan_targets and not any(o.nan for o in origins[0].outputs):
            birth = first_nan_birth(self.topo, positions, nan, nan_targets)
            if birth >= 0:
                origins[0] = replace(origins[0], nan_birth=describe_transition(self.prepared, birth, lookup))
        masked = [describe_origin(self.prepared, p, lookup, reaches=False) for p in scan.masked] if self.deep else []
        events = self._fp16_events(ranges) if self.fp16 else []
        status = "nonfinite" if dirty else "masked" if masked else "fp16" if events else "clean"
        intended = {o: c for o in self.topo.outputs if o not in bad  # non-finite, but all intended
                    for c in [self._counts(o, lookup)] if c["nan"] or c["inf"]}
        strategy = "full-scan" if len(plan.chunks) == 1 else f"full-scan ({len(plan.chunks)} chunks)"
        return SampleRecord(sample=sample, status=status, outputs=counts, origin=origins[0] if origins else None,
                            origins=origins if self.all_origins else [], masked=masked, fp16=events, strategy=strategy,
                            runs=len(plan.chunks), inputs_nonfinite={k: nonfinite_counts(v) for k, v in feeds.items()
                                                                     if is_bad(v)}, intended=intended)

    def _counts(self, name: str, lookup: ValueLookup) -> Dict[str, int]:
        s = lookup.stats(name)
        return {"nan": s.nan, "inf": s.inf}

    def _fp16_events(self, ranges: Dict[str, Dict[str, float]]) -> List[RangeEvent]:
        """The first tensor (topological order) that overflows fp16, and the first that underflows."""
        events: List[RangeEvent] = []
        for rule in ("fp16-overflow", "fp16-underflow"):
            for name in self.names:
                r = ranges.get(name)
                if r is None or not self._hits(rule, name, r):
                    continue
                node = self.topo.nodes[self.topo.position[name]]
                count = int(r["overflow"] if rule == "fp16-overflow" else r["underflow"])
                if rule == "fp16-overflow":
                    message = f"'{name}' reaches |x| = {r['max_abs']:.6g} > {FP16_MAX:g} in {count} element(s): Inf in fp16"
                else:
                    message = (f"'{name}': {count} of {int(r['nonzero'])} non-zero value(s) are below {FP16_TINY:.3g} "
                               f"and become 0 in fp16")
                events.append(RangeEvent(tensor=name, node=node.name, op_type=node.op_type, position=node.order,
                                         rule=rule, max_abs=r["max_abs"], count=count, total=int(r["total"]),
                                         message=message))
                break
        return sorted(events, key=lambda e: e.position)

    def _hits(self, rule: str, name: str, r: Dict[str, float]) -> bool:
        if rule == "fp16-overflow":
            return r["overflow"] > 0
        if not r["underflow"]:
            return False
        if r["underflow"] == r["nonzero"]:
            return True  # every non-zero value is lost: the tensor becomes all zeros
        return any(SENSITIVE_INPUTS.get(c.op_type) is not None and
                   len(c.inputs) > SENSITIVE_INPUTS[c.op_type] and c.inputs[SENSITIVE_INPUTS[c.op_type]] == name
                   for c in self.prepared.graph.consumers.get(name, []))

