"""Every tensor of every sample: all origins (`--all`), masked values (`--deep`), fp16 ranges.

Every computed tensor is exposed, in as many runs per sample as the memory budget needs
(`core.capture.plan_capture`); each run's tensors are reduced to statistics at once, so memory
stays bounded by one chunk. When everything fits, the one session is kept across samples and the
values stay available for the root-cause rules.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Mapping, Optional, Set

import numpy as np

from ...core.capture import CapturePlan, plan_capture
from ...core.runner import Session
from ...results.nan_bisect import Origin, RangeEvent, SampleRecord, TensorStats
from .analyse import find_origins, first_nan_birth
from .describe import ValueLookup, describe_origin, describe_transition
from .model import PreparedModel
from .values import FP16_MAX, FP16_TINY, Predicate, fp16_range, is_bad, nonfinite_counts, tensor_stats

SENSITIVE_INPUTS = {"Div": 1, "Reciprocal": 0, "Log": 0, "Pow": 0}
"""(op, input index) where a value flushed to zero becomes Inf or NaN."""


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
        self._plans: Dict[object, CapturePlan] = {}
        self._session: Optional[Session] = None
        self._fetch_sessions: Dict[tuple, Session] = {}

    def plan(self, feeds: Mapping[str, np.ndarray]) -> CapturePlan:
        key = tuple(sorted((k, v.shape) for k, v in feeds.items()))
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
        stats: Dict[str, TensorStats] = {}
        ranges: Dict[str, Dict[str, float]] = {}
        bad: Set[str] = set()
        nan: Set[str] = set()
        values: Dict[str, np.ndarray] = {}
        for chunk in plan.chunks:
            names = [self.names[i] for i in chunk]
            if len(plan.chunks) == 1:
                if self._session is None:
                    self._session = self.prepared.open_full(names)
                session = self._session
            else:
                session = self.prepared.open_full(names)
            out = session.run(feeds, list(dict.fromkeys([*self.topo.outputs, *names])), sample=sample)
            for name in names:
                value = out[name]
                if is_bad(value):
                    bad.add(name)
                    if is_bad(value, Predicate.NAN):
                        nan.add(name)
                if self.fp16:
                    r = fp16_range(value)
                    if r is not None:
                        ranges[name] = r
                if len(plan.chunks) == 1:
                    values[name] = value
                else:
                    stats[name] = tensor_stats(name, value)
            del out
        lookup = ValueLookup(self.prepared, feeds, values, stats,
                             fetch=None if len(plan.chunks) == 1 else (lambda n: self._fetch(feeds, n)))
        return self._record(sample, feeds, plan, bad, nan, ranges, lookup)

    def _record(self, sample: str, feeds: Mapping[str, np.ndarray], plan: CapturePlan, bad: Set[str],
                nan: Set[str], ranges: Dict[str, Dict[str, float]], lookup: ValueLookup) -> SampleRecord:
        positions = list(range(len(self.topo.nodes)))
        dirty = [o for o in self.topo.outputs if o in bad]
        counts = {o: self._counts(o, lookup) for o in dirty}
        scan = find_origins(self.topo, positions, bad, dirty)
        wanted = scan.reaching if self.all_origins else scan.reaching[:1]
        origins: List[Origin] = [describe_origin(self.prepared, p, lookup) for p in wanted]
        nan_targets = [o for o in dirty if o in nan]
        if origins and nan_targets and not any(o.nan for o in origins[0].outputs):
            birth = first_nan_birth(self.topo, positions, nan, nan_targets)
            if birth >= 0:
                origins[0] = replace(origins[0], nan_birth=describe_transition(self.prepared, birth, lookup))
        masked = [describe_origin(self.prepared, p, lookup, reaches=False) for p in scan.masked] if self.deep else []
        events = self._fp16_events(ranges) if self.fp16 else []
        status = "nonfinite" if dirty else "masked" if masked else "fp16" if events else "clean"
        strategy = "full-scan" if len(plan.chunks) == 1 else f"full-scan ({len(plan.chunks)} chunks)"
        return SampleRecord(sample=sample, status=status, outputs=counts, origin=origins[0] if origins else None,
                            origins=origins, masked=masked, fp16=events, strategy=strategy,
                            runs=len(plan.chunks), inputs_nonfinite={k: nonfinite_counts(v) for k, v in feeds.items()
                                                                     if is_bad(v)})

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

