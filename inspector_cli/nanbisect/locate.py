"""Finding the origin of a sample's NaN/Inf outputs with bounded memory.

1. **Scan** (one run of the whole model): the outputs plus the frontiers at K checkpoints spread
   along the topological order (or, when every tensor fits the budget and the run is a single
   sample, every tensor: then this one run is enough).
2. **Follow the bad values back**: walking from the end towards the start, each segment between
   checkpoints is replayed as a standalone subgraph fed the captured frontier, computing only the
   ancestors of the bad tensors to explain, every tensor exposed (segments are merged while they
   fit the budget; a segment too big for it gets checkpoints of its own, recursively). A replay
   says which origins in the segment reach those bad tensors along a chain of bad tensors, and
   which bad tensors fed in reach them: those are what the next segment back must explain. The walk
   stops when nothing bad comes in; the earliest segment with a reaching origin holds the answer.
   Values that are masked on the way (Where, Max, -Inf into Softmax...) are never followed, and a
   segment whose bad values pass through untouched costs no replay.
3. **Explain**: the first reaching origin (computed inputs good, an output bad), with its inputs.

When the outputs hold NaN but the origin made only Inf, the same walk with "holds NaN" as the
property finds where the Inf became NaN.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..core.types import tensor_shapes
from ..core.capture import BYTES_PER_EXPOSED
from ..core.masks import find_masks
from ..core.runner import Session
from ..errors import InferenceError
from ..results.nan_bisect import SampleRecord
from .analyse import find_origins
from .describe import ValueLookup, describe_origin, describe_transition, input_origin
from .model import PreparedModel
from .prebuild import Planned, Prebuilder, predict, timed, worth_it
from .regions import CheckpointPlan, Region, RegionLayout, layout, make_region, plan_checkpoints, root_region
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

    def drop(self, key: object) -> None:
        self._items.pop(key, None)


@dataclass(frozen=True)
class RootPlan:
    strategy: str
    """'expose-all' (one run exposes every tensor) or 'layered' (checkpoints, then span replays)."""
    plan: Optional[CheckpointPlan]
    exposed: Tuple[str, ...]
    all_bytes: int


@dataclass
class Explained:
    origins: List[int]
    """Reaching origins found in the earliest segment that has any (positions, ascending)."""
    incoming: Set[str]
    """Bad tensors fed into the region whose values reach its bad targets."""
    lookup: Optional[ValueLookup] = None


class Locator:
    """One process's search engine: sessions are cached across the samples it analyses."""

    def __init__(self, prepared: PreparedModel, budget: int, checkpoints: int, *, expose_all_root: bool,
                 expected_samples: int = 0) -> None:
        self.prepared = prepared
        self.topo = prepared.topo
        self.budget = budget
        self.checkpoints = checkpoints
        self.expose_all_root = expose_all_root
        self.root = root_region(self.topo)
        self.masks = find_masks(prepared.graph)
        """A mask's intended -Inf is no bad value: a tensor holding only those is good (core/masks.py)."""
        self.sessions = SessionCache(2 * checkpoints + 4)
        self._root_plans: Dict[object, RootPlan] = {}
        self._layouts: Dict[object, RegionLayout] = {}
        self.runs = 0
        self.expected_samples = expected_samples
        """Samples this locator will likely analyse: with enough of them the first replay is prebuilt."""
        self.prebuild = Prebuilder()
        self._prebuild_decided = expected_samples < 2
        self._clean_runs = 0
        self._build_seconds: Optional[float] = None
        self.dry = False
        """Set by `prebuild.predict`: the walk stops at its first replay (raising `Planned`)."""

    def close(self) -> None:
        """Wait for a speculative session build still running."""
        self.prebuild.close()

    def adopt_sessions(self) -> None:
        """Take the sessions the workflow opened already (its load check's root session): not twice."""
        while self.prepared.preopened:
            key, session = self.prepared.preopened.popitem()
            self.sessions.get(key, lambda s=session: s)

    # ---- planning ---------------------------------------------------------------------------------
    def root_plan(self, feeds: Mapping[str, np.ndarray]) -> RootPlan:
        sizes = self.prepared.sizes(feeds)
        key = tuple(sorted(tensor_shapes(feeds).items()))
        if key not in self._root_plans:
            produced = tuple(self.topo.position)
            all_bytes = sum(sizes[t] for t in produced) * BYTES_PER_EXPOSED
            if self.expose_all_root and all_bytes <= self.budget:
                self._root_plans[key] = RootPlan("expose-all", None, produced, all_bytes)
            else:
                # half the budget holds the checkpoints, the other half the replays that follow
                plan = plan_checkpoints(self._layout(self.root), sizes, self.checkpoints, self.budget // 2)
                self._root_plans[key] = RootPlan("layered", plan, plan.exposed, all_bytes)
        return self._root_plans[key]

    def _layout(self, region: Region) -> RegionLayout:
        # keyed by the nodes too: the span replayed from the graph inputs to the outputs has the root's
        # feeds and targets but not its nodes when some node feeds no output (a dead branch)
        key = (region.key, region.positions)
        if key not in self._layouts:
            if len(self._layouts) > 64:
                self._layouts.clear()
            self._layouts[key] = layout(self.topo, region)
        return self._layouts[key]

    def _produced(self, region: Region) -> Tuple[str, ...]:
        return tuple(t for p in region.positions for t in self.topo.nodes[p].outputs if t)

    def _region_plan(self, region: Region, sizes: Dict[str, int], budget: int) -> Optional[CheckpointPlan]:
        feed_bytes = sum(sizes.get(t, 0) for t in region.feeds)
        all_bytes = sum(sizes.get(t, 0) for t in self._produced(region)) * BYTES_PER_EXPOSED + feed_bytes
        if all_bytes <= budget or len(region.positions) <= 2:
            return None
        plan = plan_checkpoints(self._layout(region), sizes, self.checkpoints, budget // 2, feed_bytes)
        return plan if plan.cuts else None

    # ---- one sample -------------------------------------------------------------------------------
    def analyse(self, sample: str, feeds: Mapping[str, np.ndarray]) -> SampleRecord:
        """Screen one sample; when its outputs hold NaN/Inf, locate and explain the origin."""
        self.runs = 0
        inputs_bad = {k: nonfinite_counts(v) for k, v in feeds.items() if is_bad(v)}
        rp = self.root_plan(feeds)
        key = ("root", rp.exposed)

        def build_root() -> Session:  # timed: the estimate of a replay build (prebuild.worth_it)
            session, seconds = timed(lambda: self.prebuild.take(key, lambda: self.prepared.open_full(rp.exposed)))
            self._build_seconds = self._build_seconds or seconds
            return session

        session = self.sessions.get(key, build_root)
        names = list(dict.fromkeys([*self.topo.outputs, *rp.exposed]))
        started = time.process_time()
        values = session.run(feeds, names, sample=sample)
        ran = time.process_time() - started
        self.runs += 1
        if self.expose_all_root:
            # a single-sample run never needs the whole model again: free its weights before replays
            self.sessions.drop(("root", rp.exposed))
            del session
        env = {**feeds, **values}
        # an output holding only intended infinities (a mask's, an empty reduction's) is clean
        dirty = [o for o in self.topo.outputs if o in values and self._bad(o, values[o], Predicate.NONFINITE, env)]
        intended = {o: nonfinite_counts(values[o]) for o in self.topo.outputs
                    if o in values and o not in dirty and is_bad(values[o])}
        if not dirty:
            built = self._build_seconds or self.prepared.root_build_seconds
            self._clean_runs += 1
            if not self._prebuild_decided and built is not None and self._clean_runs >= 2:  # a warm run
                self._consider_prebuild(feeds, built, ran)
            return SampleRecord(sample=sample, status="clean", strategy=rp.strategy, runs=self.runs,
                                inputs_nonfinite=inputs_bad, intended=intended)
        counts = {o: nonfinite_counts(values[o]) for o in dirty}
        found = self._explain_run(self.root, rp.plan, values, {}, feeds, Predicate.NONFINITE, self.budget)
        position = found.origins[0] if found.origins else -1
        if position < 0 or found.lookup is None:
            raise InferenceError(f"{sample}: the outputs hold NaN/Inf but no origin was found "
                                 f"(the model may not be deterministic)")
        origin = input_origin(describe_origin(self.prepared, position, found.lookup), sample)
        del found
        if any(counts[o]["nan"] for o in dirty) and not any(o.nan for o in origin.outputs):
            birth = self._explain_run(self.root, rp.plan, values, {}, feeds, Predicate.NAN, self.budget)
            if birth.origins and birth.lookup is not None:
                origin = replace(origin, nan_birth=describe_transition(self.prepared, birth.origins[0], birth.lookup))
        return SampleRecord(sample=sample, status="nonfinite", outputs=counts, origin=origin,
                            strategy=rp.strategy, runs=self.runs, inputs_nonfinite=inputs_bad, intended=intended)

    def _consider_prebuild(self, feeds: Mapping[str, np.ndarray], build_seconds: float, run_seconds: float) -> None:
        """After the second clean scan (a warm run's CPU known): start building the likely first replay's
        session in the background when one build is a small share of the expected scan (`prebuild`)."""
        self._prebuild_decided = True
        if not worth_it(self.expected_samples, build_seconds, run_seconds):
            return
        planned = predict(self, feeds)
        if planned is not None:
            region, exposed = planned.region, planned.exposed
            self.prebuild.start(planned.key, lambda: self.prepared.open_region(region, exposed))

    def _explain(self, region: Region, feed_values: Values, feeds: Mapping[str, np.ndarray],
                 predicate: Predicate, budget: int, force_all: bool) -> Explained:
        """Run `region` (fully exposed when it fits, else at checkpoints) and explain its targets."""
        sizes = self.prepared.sizes(feeds)
        plan = None if force_all else self._region_plan(region, sizes, budget)
        exposed = plan.exposed if plan is not None else self._produced(region)
        key = ("span", region.key, exposed)
        if self.dry:
            raise Planned(key, region, exposed)
        session = self.sessions.get(key, lambda: self.prebuild.take(key, lambda: self.prepared.open_region(region, exposed)))
        env = {**feeds, **feed_values}
        values = session.run({n: env[n] for n in session.input_names},
                             list(dict.fromkeys([*region.targets, *exposed])))
        self.runs += 1
        return self._explain_run(region, plan, values, feed_values, feeds, predicate, budget)

    def _explain_run(self, region: Region, plan: Optional[CheckpointPlan], values: Values, feed_values: Values,
                     feeds: Mapping[str, np.ndarray], predicate: Predicate, budget: int) -> Explained:
        env = {**feeds, **feed_values, **values}
        bad_feeds = [f for f in region.feeds if self._bad(f, feed_values.get(f), predicate, env)]
        targets = [t for t in region.targets if self._bad(t, values.get(t), predicate, env)]
        if plan is None:
            bad = {t for t in self._produced(region) if self._bad(t, values.get(t), predicate, env)} | set(bad_feeds)
            scan = find_origins(self.topo, region.positions, bad, targets, incoming=bad_feeds)
            lookup = ValueLookup(self.prepared, feeds, {**feed_values, **values}) if scan.reaching else None
            return Explained(scan.reaching, scan.incoming, lookup)
        return self._walk_back(region, plan, values, feed_values, feeds, predicate, budget, set(targets))

    def _walk_back(self, region: Region, plan: CheckpointPlan, values: Values, feed_values: Values,
                   feeds: Mapping[str, np.ndarray], predicate: Predicate, budget: int, wanted: Set[str]) -> Explained:
        """Explain `wanted` segment by segment from the end of the region towards its start."""
        sizes = self.prepared.sizes(feeds)
        lay = self._layout(region)
        child_budget = max(0, budget - plan.bytes // BYTES_PER_EXPOSED)
        born_bytes = [0] * lay.size
        for tensor, born in lay.born.items():
            born_bytes[born] += sizes.get(tensor, 0)
        # boundary k is the cut after local index bounds[k]; boundary 0 is the start of the region
        bounds = [-1, *plan.cuts, lay.size - 1]
        frontier = [tuple(region.feeds), *plan.frontiers]
        region_feeds = set(region.feeds)
        found = Explained([], set())
        incoming: Set[str] = set()
        end = len(bounds) - 1
        while wanted and end > 0:
            start = end - 1
            # what enters the segment: the frontier at its start and the region's feeds its nodes read
            # (a feed read after a checkpoint is on no frontier: frontiers hold tensors the region computes)
            entering = [*frontier[start], *self._feeds_read(region, bounds[start] + 1, bounds[end])]
            env = {**feeds, **feed_values, **values}
            bad_before = {t for t in entering
                          if self._bad(t, values[t] if t in values else feed_values.get(t), predicate, env)}
            last = region.positions[bounds[end]]
            if bad_before and all(t in wanted or self.topo.surely_reaches(t, wanted, last) for t in bad_before):
                # every bad value entering the segment surely reaches what we explain: the earliest
                # origin is further back, and this segment needs no replay
                incoming |= bad_before & region_feeds
                wanted = bad_before - region_feeds if start > 0 else set()
                end = start
                continue
            while start > 0 and self._fits(born_bytes, bounds[start - 1], bounds[end], frontier[start - 1],
                                           region.feeds, sizes, child_budget):
                start -= 1
            seg_feeds = list(dict.fromkeys([*region.feeds, *frontier[start]]))
            passing = {t for t in wanted if t in seg_feeds}
            reached: Set[str] = set(passing)
            compute = sorted(wanted - passing, key=lambda t: self.topo.position.get(t, -1))
            if compute:
                sub = make_region(self.topo, seg_feeds, compute)
                sub_values = {t: (values[t] if t in values else feed_values[t]) for t in sub.feeds}
                result = self._explain(sub, sub_values, feeds, predicate, child_budget,
                                       force_all=len(sub.positions) >= len(region.positions))
                if result.origins:
                    found = result
                reached |= result.incoming
            incoming |= reached & region_feeds
            wanted = reached & set(frontier[start]) - region_feeds if start > 0 else set()
            end = start
        return Explained(found.origins, incoming, found.lookup)

    def _bad(self, name: str, value: object, predicate: Predicate, env: Mapping[str, np.ndarray]) -> bool:
        """Does the tensor hold a NaN/Inf that is not a mask's intended -Inf (core/masks.py)?"""
        if not is_bad(value, predicate):
            return False
        return not (self.masks and self.masks.intended(name, value, env))  # type: ignore[arg-type]

    def _feeds_read(self, region: Region, first: int, last: int) -> Set[str]:
        """The region's feeds read by its nodes at local indices `first`..`last`."""
        feeds = set(region.feeds)
        return {t for p in region.positions[first:last + 1] for t in self.topo.nodes[p].all_inputs if t in feeds}

    @staticmethod
    def _fits(born_bytes: List[int], first: int, last: int, feeds_front: Sequence[str], region_feeds: Sequence[str],
              sizes: Dict[str, int], budget: int) -> bool:
        """Does the segment after local index `first` up to `last`, fed at `feeds_front`, fit exposed?"""
        produced = sum(born_bytes[first + 1:last + 1])
        fed = sum(sizes.get(t, 0) for t in dict.fromkeys([*feeds_front, *region_feeds]))
        return produced * BYTES_PER_EXPOSED + fed <= budget
