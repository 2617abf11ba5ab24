"""`mi fix`'s search: the cheapest remedies that make a QDQ model meet its targets.

1. Candidates in float, bottom up (`fallback`: rank, measure each candidate alone, add them greedily,
   within `max_runs`), with the strongest remedy the user allows (`float`, else the costliest in `--remedies`).
2. When no handful of candidates meets the targets (spread or catastrophic error): top down by groups
   (`groups`: every candidate in float, then groups re-quantised by bisection, then the candidates inside
   the groups left), so that an answer exists whenever one does; near-float answers are said to be so.
3. Prune node by node (`fallback._prune`).
4. Downgrade: each candidate of the plan is given the cheapest remedy that still meets the targets, the
   passes going from the remedy closest to float down to the cheapest (`remedies.COST_ORDER` reversed:
   a16+per-channel, a16, per-channel, calibration) by bisection over the candidates; the prune before it
   leaves it half the runs left (`fix.DOWNGRADE_SHARE`).
5. With `--polish RUNS`: the metrics raised past the targets, 16 bits first, float only for what they
   cannot buy (remedy/polish.py).
The run budget is `max_runs` for step 1; the later steps may use up to `BUDGET_GROWTH` times it while they
still have something to gain, and the plan names `--max-runs` when that stopped them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import onnx

from .evaluate import Evaluation, Target
from .fallback import _prune, _Search
from .groups import Group, bisect_accept, harm_order, make_groups
from .remedies import COST_ORDER, FLOAT, Applied, Choice, RemedyBuilder
from .trials import Trials

BUDGET_GROWTH = 4
NEAR_FLOAT_SHARE = 0.5
"""A plan keeping at least this share of the quantised nodes in float is reported as near-float."""


@dataclass(frozen=True)
class RemedyStep:
    """One evaluated variant: what the step did, to which candidate or group, what it gave."""

    action: str
    node: str
    float_nodes: int
    remedies: Dict[str, int]
    """remedy -> candidates given it in this variant (float included)."""
    metrics: Dict[str, Optional[float]]
    meets: bool
    latency_ms: float
    partial: int = 0
    """Stopped early after this many samples (a target out of reach); 0: every sample."""

    def to_dict(self) -> Dict[str, Any]:
        return {"action": self.action, "node": self.node, "float_nodes": self.float_nodes,
                "remedies": dict(self.remedies), "metrics": dict(self.metrics), "meets": self.meets,
                "latency_ms": self.latency_ms, "partial": self.partial}


@dataclass(frozen=True)
class GroupRow:
    """A group the top-down search tried to re-quantise: kept in float (it was needed) or not, and the
    targets' metrics read when it was re-quantised with the groups before it (what keeping it bought)."""

    name: str
    nodes: int
    kept_float: bool
    untried: bool
    requantised: Dict[str, Optional[float]]


class RemedySearch(_Search):
    """The fallback search over variants built by `RemedyBuilder` and evaluated by `trials.Trials`: a float
    set under test (`evaluate(nodes)`) is given the search's `strong` remedy, beside the `base` choices."""

    def __init__(self, fp32: onnx.ModelProto, qdq: onnx.ModelProto, trials: Any, builder: RemedyBuilder,
                 strong: str = FLOAT) -> None:
        super().__init__(fp32, qdq, trials.evaluator, builder.quantisers)
        self.trials, self.builder, self.strong = trials, builder, strong
        self.base: List[Choice] = []
        self.early_stop = True
        """Trials may stop once a countable target is out of reach (off where a gain is measured)."""
        self.results: Dict[str, Evaluation] = {}
        self.rsteps: List[RemedyStep] = []
        self.ranking_samples: Optional[List[int]] = None
        """The samples `measure_alone` runs on (subset.py; None: every sample)."""

    def choices(self, nodes: Sequence[str]) -> List[Choice]:
        return self.base + ([Choice(tuple(nodes), self.strong)] if nodes else [])

    def key(self, choices: Sequence[Choice]) -> str:
        floats = sorted(self.quantisers.close([n for c in choices if c.remedy == FLOAT for n in c.nodes]))
        others = sorted([c.remedy, sorted(c.nodes)] for c in choices if c.remedy != FLOAT)
        return json.dumps([floats, others], separators=(",", ":"))

    def run_many(self, variants: Sequence[Sequence[Choice]], full: bool = False) -> List[Evaluation]:
        """Evaluations of these variants (cached; the new ones together, on the workers when there are).
        `full`: every sample, even where the search lets trials stop early (a result shown or compared)."""
        early = self.early_stop and not full
        todo: List[Tuple[str, Optional[bytes], str]] = []
        keys = [self.key(v) for v in variants]
        for key, choices in zip(keys, variants):
            cached = self.results.get(key)
            if (cached is not None and not (cached.partial and not early)) or any(key == k for k, _m, _l in todo):
                continue
            model = self._built(key, choices)
            todo.append((key, model, f"variant of {sum(len(c.nodes) for c in choices)} nodes"))
        for (key, _m, _l), result in zip(todo, self.trials.run(todo, early_stop=early)):
            self.results[key] = result
        return [self.results[k] for k in keys]

    def _built(self, key: str, choices: Sequence[Choice]) -> Optional[bytes]:
        """The serialised model of a variant, or None (its reason in `trials.failed`) when it cannot be patched:
        such a variant never meets the targets."""
        try:
            return self.builder.build(choices)[0].SerializeToString()
        except (ValueError, KeyError) as exc:
            self.trials.failed[key] = str(exc).splitlines()[0][:300]
            return None

    def evaluate_choices(self, choices: Sequence[Choice], action: str = "", node: str = "",
                         full: bool = False) -> Evaluation:
        result = self.run_many([choices], full=full)[0]
        if action:
            self._record(choices, result, action, node)
        return result

    def evaluate_at_least(self, choices: Sequence[Choice], floor: Evaluation, action: str = "",
                          node: str = "") -> Evaluation:
        """`choices` judged against the targets raised to `floor`'s values (polish: is this variant at least as
        good as the best so far?). A variant that cannot read as well stops at the sample that shows it (a
        countable target, early_stop.py) instead of running every sample; its `meets` is then False, as it is
        for any variant below the floor. Kept in the cache only when it ran every sample and held (its values
        then hold the original targets too); not journalled."""
        key = self.key(choices)
        cached = self.results.get(key)
        if cached is not None and not cached.partial:
            result = cached
        else:
            raised = []
            for target in self.ev.targets:
                value = floor.value(target)
                if value is not None and value == value:
                    value = max(target.threshold, value) if target.op == ">=" else min(target.threshold, value)
                    target = Target(target.metric, target.op, value, target.output)
                raised.append(target)
            model = self._built(key, choices)
            if model is None:
                return Evaluation({}, [], 0.0, shortfall=float("inf"), meets=False)
            bar = self._beside(targets=raised)
            result = bar.evaluate(model, label=f"variant of {sum(len(c.nodes) for c in choices)} nodes", early_stop=True)
            self._count(bar)
            if result.meets and not result.partial:
                self.results[key] = result
        if action:
            self._record(choices, result, action, node)
        return result

    def _beside(self, **changes: Any) -> Any:
        """An evaluator like the search's with `changes` (raised targets, a subset of samples) and its own cost
        counters, which `_count` adds to the search's."""
        return replace(self.ev, runs=0, inferences=0, session_builds=0, seconds=0.0, **changes)

    def _count(self, other: Any) -> None:
        """Add the cost of an evaluator run beside the search's own (`_beside`)."""
        self.ev.runs += other.runs
        self.ev.inferences += other.inferences
        self.ev.session_builds += other.session_builds
        self.ev.seconds += other.seconds

    def _record(self, choices: Sequence[Choice], result: Evaluation, action: str, node: str) -> None:
        counts: Dict[str, int] = {}
        for c in choices:
            counts[c.remedy] = counts.get(c.remedy, 0) + 1
        floats = self.quantisers.close([n for c in choices if c.remedy == FLOAT for n in c.nodes])
        self.rsteps.append(RemedyStep(action, node, len(floats), counts, result.summary(self.ev.targets),
                                      result.meets, result.latency_ms, result.partial))

    # the fallback search's interface (fallback.sensitivity_order, _greedy, _prune)
    def evaluate(self, nodes: Sequence[str], action: str = "", node: str = "", strict: bool = False,
                 full: bool = False) -> Evaluation:
        choices = self.choices(self.quantisers.close(nodes) if self.strong == FLOAT else list(nodes))
        result = self.evaluate_choices(choices, action, node, full=full)
        failed = self.trials.failed.get(self.key(choices))
        if strict and failed:
            raise ValueError(failed)
        return result

    def prefetch(self, units: Sequence[Sequence[str]]) -> None:
        self.run_many([self._variant(u) for u in units])

    def _variant(self, nodes: Sequence[str]) -> List[Choice]:
        return self.choices(self.quantisers.close(nodes) if self.strong == FLOAT else list(nodes))

    def measure_alone(self, units: Sequence[Sequence[str]]) -> List[Tuple[Optional[Evaluation], Optional[str]]]:
        """The sensitivity phase's runs: on `ranking_samples` when set (every one of them, on the workers when
        there are; kept apart from the verdicts on every sample and not journalled: a resumed search runs them
        again, as deterministic as the first time)."""
        if self.ranking_samples is None:
            return super().measure_alone(units)
        ev, picked = self.ev, self.ranking_samples
        part = self._beside(samples=[ev.samples[k] for k in picked], sample_ids=[ev.sample_ids[k] for k in picked],
                            reference=[ev.reference[k] for k in picked])
        trials = Trials(part, self.trials.executor, failed=self.trials.failed)  # why a variant could not run
        keys = [self.key(self._variant(u)) for u in units]
        todo: Dict[str, Tuple[str, Optional[bytes], str]] = {}
        for key, unit in zip(keys, units):
            if key not in todo:
                todo[key] = (key, self._built(key, self._variant(unit)), f"candidate {unit[0]}")
        results = dict(zip(todo, trials.run(list(todo.values()), early_stop=False)))
        self._count(part)
        return [(None, self.trials.failed[k]) if k in self.trials.failed else (results[k], None) for k in keys]

    def model(self, nodes: Sequence[str]) -> onnx.ModelProto:
        return self.builder.build(self.choices(nodes))[0]


@dataclass
class Outcome:
    """What the search settled on before the downgrade: the float set, how it was found, the groups."""

    nodes: List[str]
    strategy: str
    groups: List[GroupRow] = field(default_factory=list)
    no_answer: bool = False
    """Even every candidate given the strongest remedy misses the targets."""
    untried: int = 0


def top_down(search: RemedySearch, units: Sequence[Tuple[str, ...]], scores: Optional[Mapping[str, float]],
             cap: int) -> Outcome:
    """Step 2 of the module docstring: every candidate in float, then groups re-quantised by bisection, then
    the candidates inside the groups left."""
    everything = list(dict.fromkeys(n for u in units for n in u))
    if not search.evaluate(everything, "all candidates", f"{len(units)} candidates").meets:
        return Outcome([], "groups", no_answer=True)
    groups = make_groups(units)
    group_scores = [tuple(n for n in g.nodes) for g in groups]
    order = harm_order(group_scores, scores)
    budget = lambda: search.ev.runs < cap  # noqa: E731
    kept = _revert(search, [groups[k] for k in order], budget, "re-quantise group", measure_kept=True)
    rows = [GroupRow(groups[order[k]].name, len(groups[order[k]].nodes), k in kept.rejected or k in kept.untried,
                     k in kept.untried, dict(kept.rejected.get(k, {}))) for k in range(len(order))]
    left = [u for k in sorted(set(kept.rejected) | set(kept.untried)) for u in groups[order[k]].units]
    inner_order = harm_order(left, scores)
    inner = _revert(search, [Group(left[k][0], (left[k],)) for k in inner_order], budget, "re-quantise")
    plan_units = [left[inner_order[k]] for k in sorted(set(inner.rejected) | set(inner.untried))]
    nodes = search.quantisers.close(n for u in plan_units for n in u)
    return Outcome(nodes, "groups", rows, untried=len(kept.untried) + len(inner.untried))


def _revert(search: RemedySearch, items: Sequence[Group], budget: Any, action: str, measure_kept: bool = False) -> Any:
    """bisect_accept over `items` (float to start with): a batch is re-quantised with those accepted so far.
    `measure_kept`: a single item kept in float is measured on every sample (what it bought: the groups table);
    the candidates inside the groups are not reported one by one, and that full run was a sixth of EfficientNet's
    top-down search."""
    accepted: List[int] = []

    def accept(batch: List[int]) -> Tuple[bool, Dict[str, Optional[float]]]:
        gone = set(accepted) | set(batch)
        nodes = [n for k, item in enumerate(items) if k not in gone for n in item.nodes]
        label = items[batch[0]].name if len(batch) == 1 else f"{len(batch)} groups from {items[batch[0]].name}"
        result = search.evaluate(nodes, action, label)
        if result.meets:
            accepted.extend(batch)
        elif measure_kept and len(batch) == 1 and result.partial:  # a group kept: what it bought, on every sample
            result = search.evaluate(nodes, full=True)
        return result.meets, result.summary(search.ev.targets)

    return bisect_accept(len(items), accept, budget)


def downgrade(search: RemedySearch, plan: Sequence[str], remedies: Sequence[str], scores: Optional[Mapping[str, float]],
              cap: int) -> Tuple[List[Choice], int]:
    """Step 4: each node of the plan's float set given the cheapest remedy in `remedies` that keeps the
    targets (its own tensors at 16 bits or re-calibrated, its own weight per channel), by bisection over the
    nodes, the others keeping theirs. A node is its own candidate here, not its quantiser group: one node of
    a group may need its input's range, another its weight per channel. Returns the choices and the nodes
    left untried when the budget ran out (all of them when it was spent before this step began).

    The passes go from the remedy closest to float down to the cheapest (a16+per-channel, a16, per-channel,
    calibration), each offering its remedy to every node whose remedy is still costlier: the first pass
    takes the most nodes out of float for the fewest runs, so that a budget that ends early leaves the
    plan with the largest saving (the zoo's MobileNetV2 on NNCF's int8 spent its budget in the calibration
    pass, where nearly every node is rejected, and kept 65 nodes in float). The passes repeat while one of
    them moved a node: a node's cheaper remedy can miss while its neighbours are still in float and meet once
    they are not (an Add at 16 bits read 0.9834 beside five float Convs, 0.9875 in the final plan, over a
    target of 0.9851)."""
    units: List[Tuple[str, ...]] = [(node,) for node in dict.fromkeys(plan)]
    remedy_of = {unit: search.strong for unit in units}
    cheaper = [r for r in reversed(COST_ORDER) if r in remedies and COST_ORDER.index(r) < COST_ORDER.index(search.strong)]
    untried, changed, first = 0, True, True
    while cheaper and (first or (changed and search.ev.runs < cap)):
        changed, first, untried = False, False, 0
        for remedy in cheaper:
            accepted, left = _downgrade_pass(search, units, remedy_of, remedy, scores, cap)
            untried = max(untried, left)
            for unit in accepted:
                remedy_of[unit] = remedy
            changed = changed or bool(accepted)
    return [Choice(u, r) for u, r in remedy_of.items()], untried


def _downgrade_pass(search: RemedySearch, units: List[Tuple[str, ...]], remedy_of: Mapping[Tuple[str, ...], str],
                    remedy: str, scores: Optional[Mapping[str, float]], cap: int) -> Tuple[List[Tuple[str, ...]], int]:
    """The units whose remedy is costlier than `remedy` that take it (bisection, the others as `remedy_of`
    has them), and how many were left untried by the budget."""
    rank = COST_ORDER.index
    open_units = [u for u in units if rank(remedy_of[u]) > rank(remedy) and search.builder.applicable(u, remedy)]
    order = [open_units[k] for k in harm_order(open_units, scores)]
    accepted: List[Tuple[str, ...]] = []

    def accept(batch: List[int]) -> Tuple[bool, Dict[str, Optional[float]]]:
        trial = {**remedy_of, **{u: remedy for u in accepted}, **{order[k]: remedy for k in batch}}
        choices = [Choice(u, r) for u, r in trial.items()]
        label = order[batch[0]][0] if len(batch) == 1 else f"{len(batch)} candidates from {order[batch[0]][0]}"
        result = search.evaluate_choices(choices, remedy, label)
        if result.meets:
            accepted.extend(order[k] for k in batch)
        return result.meets, result.summary(search.ev.targets)

    done = bisect_accept(len(order), accept, lambda: search.ev.runs < cap)
    return accepted, len(done.untried)


def near_float(applied: Applied, quantised: int) -> Tuple[float, bool]:
    """(share of the quantised nodes kept in float, whether that makes the plan near-float)."""
    share = len(applied.float_nodes) / quantised if quantised else 0.0
    return share, share >= NEAR_FLOAT_SHARE


def prune_float(search: RemedySearch, nodes: List[str], cap: int) -> List[str]:
    """Step 3 (`fallback._prune` within the grown budget)."""
    return _prune(search, list(nodes), cap)
