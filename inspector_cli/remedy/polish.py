"""`mi fix --polish RUNS`: past the targets, the metric a quantiser's accuracy control would reach.

The search stops at the cheapest plan that meets the targets, so its metric sits at the threshold (issue 44:
top-1 agreement 0.99 on MobileNetV2 where NNCF's accuracy control, reverting whole quantiser groups, ended
near float at 1.00). A user who wants headroom on data the samples do not hold can spend more runs for a
better metric, paying float only for what 16 bits cannot buy: polish offers the quantised nodes the plan left
alone, most harmful first, the costliest remedy allowed short of float that applies to each (a16+per-channel,
a16, ...), keeps the smallest such set that reads the best metric it measured, then does the same with float
when that is allowed and the metrics are still short of fp32's, and never gives up the targets.

1. Prefixes of the ranked nodes, 1, 2, 4, 8, ... (a run each), until one reaches the reference's own value
   (every target at its ideal: agreement or cosine 1, a drop or an error of 0) or the list ends.
2. The best prefix pruned, latest first: a node whose remedy can go while the metric stays as good goes.
3. When the metrics are still short of ideal and `--remedies` allows float: steps 1 and 2 again with float on the
   nodes still quantised or at 16 bits (what 16 bits cannot buy: an 8-bit weight's error, a node no cheaper
   remedy fits), a node taking float losing its cheaper remedy.
Both within RUNS evaluations (the trials are cached with the search's, so a variant seen before is free).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .remedies import COST_ORDER, FLOAT, Choice

BOUNDED_AT_ONE = frozenset({"cosine", "top1", "top5", "acc1", "acc5"})
"""Metrics bounded above by 1 (reached when a candidate agrees with the reference everywhere)."""


@dataclass(frozen=True)
class PolishResult:
    """What polish did: the remedy it offered, the nodes given it, the targets' metrics before and after,
    the runs it used, and whether the metrics reached their ideal."""

    remedy: str
    nodes: List[str]
    before: Dict[str, Optional[float]]
    after: Dict[str, Optional[float]]
    runs: int
    ideal: bool
    candidates: int
    """Quantised nodes the plan left alone that the remedy applies to (what polish could offer it to)."""
    note: str = ""
    remedies: Optional[Dict[str, int]] = None
    """remedy -> nodes given it (each node takes the costliest remedy short of float that applies to it)."""

    def to_dict(self) -> Dict[str, Any]:
        return {"remedy": self.remedy, "nodes": list(self.nodes), "before": dict(self.before),
                "after": dict(self.after), "runs": self.runs, "ideal": self.ideal, "candidates": self.candidates,
                "note": self.note, "remedies": dict(self.remedies or {})}


def polish_ladder(remedies: Sequence[str]) -> List[str]:
    """The remedies polish may give, costliest first: those allowed short of float (float alone when nothing
    else is allowed). A node takes the first that applies to it (a16+per-channel needs a per-tensor weight:
    NNCF's int8 weights are per channel, so its nodes take a16)."""
    below = [r for r in reversed(COST_ORDER) if r in remedies and r != FLOAT]
    return below or [FLOAT]


def merit(result: Any, targets: Sequence[Any]) -> float:
    """One number that grows as the targets' metrics improve: the sum of their values, signed so that higher
    is better (-inf when the targets do not hold, a trial stopped early, or a value is NaN)."""
    if not result.meets or result.partial:
        return -math.inf
    total = 0.0
    for target in targets:
        value = result.value(target)
        if value is None:
            continue
        if value != value:
            return -math.inf
        total += value if target.op == ">=" else -value
    return total


def at_ideal(result: Any, targets: Sequence[Any]) -> bool:
    """Every target's metric at the best value it can take (1 for agreement and cosine, 0 for a drop or an
    error); a metric without such a bound (SQNR, accuracy against labels can exceed the reference's) never is."""
    for target in targets:
        value = result.value(target)
        if value is None:
            continue
        if target.op == ">=":
            if target.metric not in BOUNDED_AT_ONE or value < 1.0 - 1e-12:
                return False
        elif value > 0.0:
            return False
    return True


def polish(search: Any, choices: List[Choice], ranked: Sequence[str], remedies: Sequence[str],
           runs: int) -> Tuple[List[Choice], Optional[PolishResult]]:
    """The plan's `choices` with the polish of the module docstring added (`ranked`: the quantised nodes,
    most harmful first). Returns them unchanged (and None) when `runs` is 0."""
    if runs <= 0:
        return choices, None
    targets = search.ev.targets
    ladder = polish_ladder(remedies)
    start_runs = search.ev.runs
    cap = start_runs + runs
    start = search.evaluate_choices(choices, full=True)
    pool = _offers(search, choices, ranked, ladder)
    added, best = _climb(search, choices, pool, start, cap, "polish")
    offered = len(pool)
    if FLOAT in remedies and ladder != [FLOAT] and not at_ideal(best, targets) and search.ev.runs < cap:
        # what 16 bits could not buy (an 8-bit weight's error, a node no cheaper remedy applies to): float,
        # on the nodes still quantised, most harmful first, kept only where it raises the metrics further
        # (a node the plan or the first step gave 16 bits is offered float too: its activations at 16 bits may be
        # what still costs a sample, EfficientNet's on NNCF's int8)
        plan = choices + added
        floats = _offers(search, [c for c in plan if c.remedy == FLOAT], ranked, [FLOAT])
        more, best = _climb(search, plan, floats, best, cap, "polish float")
        added, offered = _combine(added, more), offered + len(floats)
    final = _combine(choices, added)
    counts: Dict[str, int] = {}
    for choice in added:
        counts[choice.remedy] = counts.get(choice.remedy, 0) + 1
    note = "" if added or not offered else "no node given a remedy improved the targets' metrics"
    if not offered:
        note = f"no quantised node left that {' or '.join(ladder)} applies to"
    if at_ideal(start, targets):
        note = "the plan already reads fp32's own value: nothing to raise"
    summary = PolishResult(ladder[0], [c.nodes[0] for c in added], start.summary(targets), best.summary(targets),
                           search.ev.runs - start_runs, at_ideal(best, targets), offered, note, counts)
    return final, summary


def _combine(base: Sequence[Choice], offers: Sequence[Choice]) -> List[Choice]:
    """`base` with `offers` added, a node offered float losing the cheaper remedy `base` gave it."""
    upgraded = {n for c in offers if c.remedy == FLOAT for n in c.nodes}
    return [c for c in base if c.remedy == FLOAT or not set(c.nodes) <= upgraded] + list(offers)


def _offers(search: Any, choices: Sequence[Choice], ranked: Sequence[str], ladder: Sequence[str]) -> List[Choice]:
    """Each ranked node the plan leaves alone with the first remedy of `ladder` that applies to it."""
    taken = {n for c in choices for n in (search.quantisers.close(c.nodes) if c.remedy == FLOAT else c.nodes)}
    offers: List[Choice] = []
    for node in dict.fromkeys(ranked):
        fitting = [r for r in ladder if search.builder.applicable((node,), r)] if node not in taken else []
        if fitting:
            offers.append(Choice((node,), fitting[0]))
    return offers


def _climb(search: Any, choices: List[Choice], pool: List[Choice], best: Any, cap: int,
           action: str) -> Tuple[List[Choice], Any]:
    """Steps 1 and 2 of the module docstring over `pool` (offers, most harmful first) on top of `choices`,
    whose evaluation is `best`: the offers kept and the evaluation they give."""
    targets = search.ev.targets
    best_size, size = 0, 1
    while pool and search.ev.runs < cap and not at_ideal(best, targets):
        size = min(size, len(pool))
        # judged against the targets raised to the best so far: one below stops at the sample that shows it
        result = search.evaluate_at_least(_combine(choices, pool[:size]), best, action, f"{size} most harmful")
        if merit(result, targets) > merit(best, targets):
            best, best_size = result, size
        if size == len(pool):
            break
        size *= 2
    kept = list(pool[:best_size])
    for offer in reversed(kept if len(kept) > 1 else []):
        if search.ev.runs >= cap:
            break
        fewer = [c for c in kept if c is not offer]
        result = search.evaluate_at_least(_combine(choices, fewer), best, action, f"without {offer.nodes[0]}")
        if merit(result, targets) >= merit(best, targets):
            best, kept = result, fewer
    return kept, best

