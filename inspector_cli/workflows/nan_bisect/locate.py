"""Finding the origin of a sample's NaN/Inf outputs with bounded memory.

1. **Scan** (one run of the whole model): the outputs plus the frontiers at K checkpoints spread
   along the topological order (or, when every tensor fits the budget and the run is a single
   sample, every tensor: then this one run is enough).
2. **Narrow**: the first checkpoint whose bad tensors lead on to the bad outputs ends the span
   to search; the clean checkpoint before it starts it. Only that span is replayed, as a
   standalone subgraph fed the captured clean frontier, with every tensor of the span exposed
   when they fit the budget, else with checkpoints of its own (and so on, recursively).
3. **Explain**: in the fully exposed span, the first origin (computed inputs good, an output bad)
   whose bad values reach the bad targets.

When the outputs hold NaN but the origin made only Inf, the same search with "holds NaN" as the
property finds where the Inf became NaN.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ...core.capture import BYTES_PER_EXPOSED
from ...core.runner import Session
from ...results.nan_bisect import SampleRecord
from .analyse import find_origins
from .describe import ValueLookup, describe_origin, describe_transition
from .model import PreparedModel
from .regions import CheckpointPlan, Region, first_relevant_dirty, layout, make_region, plan_checkpoints, root_region
from .values import Predicate, is_bad, nonfinite_counts

Values = Dict[str, np.ndarray]


class SessionCache:
    """The few most recent sessions (a batch tends to fail in the same spans)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._items: "OrderedDict[object, Session]" = OrderedDict()

    def get(self, key: object, factory) -> Session:  # type: ignore[no-untyped-def]
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        while len(self._items) >= self.size:
            self._items.popitem(last=False)
        session = factory()
        self._items[key] = session
        return session


@dataclass(frozen=True)
class RootPlan:
    strategy: str
    """'expose-all' (one run exposes every tensor) or 'layered' (checkpoints, then span replays)."""
    plan: Optional[CheckpointPlan]
    exposed: Tuple[str, ...]
    all_bytes: int


@dataclass
class Next:
    region: Region
    feed_values: Values
    force_all: bool = False


@dataclass
class Done:
    position: int
    lookup: ValueLookup


@dataclass
class Counter:
    runs: int = 0
    spans: List[int] = field(default_factory=list)


class Locator:
    """One process's search engine: sessions are cached across the samples it analyses."""

    def __init__(self, prepared: PreparedModel, budget: int, checkpoints: int, *, expose_all_root: bool) -> None:
        self.prepared = prepared
        self.topo = prepared.topo
        self.budget = budget
        self.checkpoints = checkpoints
        self.expose_all_root = expose_all_root
        self.root = root_region(self.topo)
        self.sessions = SessionCache()
        self._root_plans: Dict[object, RootPlan] = {}

    # ---- planning ---------------------------------------------------------------------------------
    def root_plan(self, feeds: Mapping[str, np.ndarray]) -> RootPlan:
        sizes = self.prepared.sizes(feeds)
        key = tuple(sorted((k, v.shape) for k, v in feeds.items()))
        if key not in self._root_plans:
            produced = tuple(self.topo.position)
            all_bytes = sum(sizes[t] for t in produced) * BYTES_PER_EXPOSED
            if self.expose_all_root and all_bytes <= self.budget:
                self._root_plans[key] = RootPlan("expose-all", None, produced, all_bytes)
            else:
                plan = plan_checkpoints(layout(self.topo, self.root), sizes, self.checkpoints, self.budget)
                self._root_plans[key] = RootPlan("layered", plan, plan.exposed, all_bytes)
        return self._root_plans[key]

    def _region_plan(self, region: Region, sizes: Dict[str, int], force_all: bool) -> Optional[CheckpointPlan]:
        produced = [t for p in region.positions for t in self.topo.nodes[p].outputs if t]
        feed_bytes = sum(sizes.get(t, 0) for t in region.feeds)
        all_bytes = sum(sizes.get(t, 0) for t in produced) * BYTES_PER_EXPOSED + feed_bytes
        if force_all or all_bytes <= self.budget or len(region.positions) <= 2:
            return None
        plan = plan_checkpoints(layout(self.topo, region), sizes, self.checkpoints, self.budget, feed_bytes)
        return plan if plan.cuts else None

    # ---- one sample -------------------------------------------------------------------------------
    def analyse(self, sample: str, feeds: Mapping[str, np.ndarray]) -> SampleRecord:
        """Screen one sample; when its outputs hold NaN/Inf, locate and explain the origin."""
        counter = Counter()
        inputs_bad = {k: nonfinite_counts(v) for k, v in feeds.items() if is_bad(v)}
        rp = self.root_plan(feeds)
        session = self.sessions.get(("root", rp.exposed), lambda: self.prepared.open_full(rp.exposed))
        names = list(dict.fromkeys([*self.topo.outputs, *rp.exposed]))
        values = session.run(feeds, names, sample=sample)
        counter.runs += 1
        dirty = [o for o in self.topo.outputs if o in values and is_bad(values[o])]
        if not dirty:
            return SampleRecord(sample=sample, status="clean", strategy=rp.strategy, runs=counter.runs,
                                inputs_nonfinite=inputs_bad)
        counts = {o: nonfinite_counts(values[o]) for o in dirty}
        nan_targets = [o for o in dirty if counts[o]["nan"]]
        first = self._step(self.root, rp.plan, values, {}, feeds, Predicate.NONFINITE, dirty)
        nan_first = self._step(self.root, rp.plan, values, {}, feeds, Predicate.NAN, nan_targets) if nan_targets else None
        del values
        found = self._drive(first, feeds, Predicate.NONFINITE, counter, sample)
        origin = describe_origin(self.prepared, found.position, found.lookup)
        if nan_first is not None and not any(o.nan for o in origin.outputs):
            del found
            birth = self._drive(nan_first, feeds, Predicate.NAN, counter, sample)
            if birth.position >= 0:
                origin = replace(origin, nan_birth=describe_transition(self.prepared, birth.position, birth.lookup))
        return SampleRecord(sample=sample, status="nonfinite", outputs=counts, origin=origin, origins=[origin],
                            strategy=rp.strategy, runs=counter.runs, inputs_nonfinite=inputs_bad)

    def _drive(self, step: Union[Next, Done], feeds: Mapping[str, np.ndarray], predicate: Predicate,
               counter: Counter, sample: str) -> Done:
        sizes = self.prepared.sizes(feeds)
        while isinstance(step, Next):
            region = step.region
            plan = self._region_plan(region, sizes, step.force_all)
            exposed = plan.exposed if plan is not None else tuple(
                t for p in region.positions for t in self.topo.nodes[p].outputs if t)
            session = self.sessions.get(("span", region.key, exposed),
                                        lambda: self.prepared.open_region(region, exposed))
            env = {**feeds, **step.feed_values}
            values = session.run({n: env[n] for n in session.input_names},
                                 list(dict.fromkeys([*region.targets, *exposed])), sample=sample)
            counter.runs += 1
            counter.spans.append(len(region.positions))
            following = self._step(region, plan, values, step.feed_values, feeds, predicate, region.targets)
            if isinstance(following, Next) and len(following.region.positions) >= len(region.positions):
                following.force_all = True  # no progress: expose the whole span, whatever it costs
            step = following
        return step

    def _step(self, region: Region, plan: Optional[CheckpointPlan], values: Values, feed_values: Values,
              feeds: Mapping[str, np.ndarray], predicate: Predicate, targets: Sequence[str]) -> Union[Next, Done]:
        """From one run over `region`: the answer when it was fully exposed, else the next span."""
        if plan is None:
            produced = [t for p in region.positions for t in self.topo.nodes[p].outputs if t]
            bad = {t for t in produced if t in values and is_bad(values[t], predicate)}
            scan = find_origins(self.topo, region.positions, bad, targets)
            position = scan.reaching[0] if scan.reaching else (scan.origins[0] if scan.origins else scan.first_bad)
            return Done(position, ValueLookup(self.prepared, feeds, {**feed_values, **values}))
        bad = {t for t in plan.exposed if is_bad(values[t], predicate)}
        index, next_targets = first_relevant_dirty(self.topo, region, plan, frozenset(bad), targets)
        start = (len(plan.cuts) if index is None else index) - 1
        start_frontier = plan.frontiers[start] if start >= 0 else ()
        sub = make_region(self.topo, list(dict.fromkeys([*region.feeds, *start_frontier])), next_targets)
        sub_values = {t: (values[t] if t in values else feed_values[t]) for t in sub.feeds}
        return Next(sub, sub_values)
