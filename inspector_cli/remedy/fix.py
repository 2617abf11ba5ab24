"""`plan_fix`: the engine of `mi fix` on a QDQ model (remedy/search.py says how it searches).

The plan is a list of choices (a candidate and its remedy), the model they build (`RemedyBuilder`), its cost,
the steps measured, and the exports for each quantiser (`export.exports`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import onnx

from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..executor.base import ExecutorSpec
from .evaluate import Evaluator, Target
from .export import exports
from .fallback import _greedy, _rank, _static_rank, _units, sensitivity_candidates, sensitivity_order
from .naming import fp32_node_names
from .polish import PolishResult, at_ideal, polish
from .qdq_patch import quantised_nodes
from .remedies import A16, A16_PER_CHANNEL, CALIBRATION, COST_ORDER, FLOAT, Applied, Choice, RemedyBuilder
from .search import (BUDGET_GROWTH, GroupRow, RemedySearch, RemedyStep, downgrade, near_float, prune_float,
                     top_down)
from .subset import ranking_samples
from .trials import Journal, Trials, identity_of


@dataclass
class FixPlan:
    """The remedies of a QDQ model meeting its targets (or the best found), with their evidence and cost."""

    choices: List[Choice]
    found: bool
    targets: List[str]
    baseline: Dict[str, Optional[float]]
    baseline_meets: bool
    final: Dict[str, Optional[float]]
    applied: Applied
    fp32_names: Dict[str, str]
    steps: List[RemedyStep]
    strategy: str
    """'none' (the baseline meets), 'candidates' (bottom up), 'groups' (top down)."""
    groups: List[GroupRow]
    float_share: float
    near_float: bool
    no_answer: bool
    budget_note: Optional[str]
    sensitivity: Dict[str, Dict[str, Optional[float]]]
    """candidate -> its metrics measured alone: on the quantised model's worst samples when there were at least
    64 (subset.py), so not comparable with `final`; they only order the greedy search."""
    skipped: Dict[str, str]
    remedies: List[str]
    ranges: Dict[str, List[Any]]
    """pair -> [method, rmin, rmax] of the re-calibrations measured (the `calibration` remedy's ranges)."""
    runs: int
    replayed: int
    inferences: int
    seconds: float
    baseline_latency_ms: float
    final_latency_ms: float
    exports: Dict[str, Any] = field(default_factory=dict)
    model: Optional[onnx.ModelProto] = field(default=None, repr=False)
    polish: Optional[PolishResult] = None
    """What `--polish` added past the targets (None: not asked for, or no plan met them)."""
    ranked: bool = True
    """The candidates were ranked (False: the quantised model met the targets and nothing was to be done)."""


def plan_fix(fp32: onnx.ModelProto, qdq: onnx.ModelProto, samples: Sequence[TensorMap], targets: Sequence[Target], *,
             sample_ids: Optional[Sequence[str]] = None,
             own_errors: "Optional[Mapping[str, float] | Callable[[], Optional[Mapping[str, float]]]]" = None,
             remedies: Sequence[str] = COST_ORDER, calibration: Optional[Sequence[TensorMap]] = None,
             labels: Any = None, max_nodes: int = 10, max_runs: int = 50, sensitivity_top: Optional[int] = None,
             runtime: RuntimeConfig = RuntimeConfig(), executor: ExecutorSpec = ExecutorSpec(),
             journal: Optional[Any] = None, resume: bool = False, polish_runs: int = 0) -> FixPlan:
    """The cheapest remedies of `qdq` against `fp32` on `samples` meeting `targets` (see remedy/search.py).

    `remedies` limits the choice (cost order kept); `calibration` holds the samples another calibration is
    measured on (default: `samples`); `labels` a `label_binding.LabelBinding` for accuracy targets;
    `journal` a path where every trial is recorded (`resume`: read back first); `executor` the workers;
    `polish_runs` the evaluations `--polish` may spend raising the metrics of a plan that meets (polish.py);
    `own_errors` node -> isolated error score, or a callable giving them, called only when there is something to
    rank (the quantised model misses the targets, or `polish_runs`)."""
    start = time.perf_counter()
    ids = list(sample_ids) if sample_ids is not None else [f"sample{i}" for i in range(len(samples))]
    remedies = [r for r in COST_ORDER if r in remedies]
    strong = remedies[-1]
    ev = Evaluator(samples, ids, targets, runtime, extra=labels)
    fp32_bytes, qdq_bytes = fp32.SerializeToString(), qdq.SerializeToString()
    ev.set_reference(fp32_bytes)
    book = None
    if journal is not None:
        book = Journal(journal, identity_of([fp32_bytes, qdq_bytes], ids, targets,
                                            {"remedies": remedies, "max_nodes": max_nodes}), resume)
    trials = Trials(ev, executor, book)
    nodes = quantised_nodes(qdq)
    fp32_names = fp32_node_names(fp32, qdq, nodes)
    builder = RemedyBuilder(qdq, fp32, fp32_names)
    ranges: Dict[str, List[Any]] = {}
    wide = calibration is not None and any(r in (A16, A16_PER_CHANNEL) for r in remedies)
    if nodes and (CALIBRATION in remedies or wide):
        ranges, builder.wide_ranges = _measure_ranges(builder, nodes, calibration or samples, runtime, wide)
        builder.ranges = {p: (r[1], r[2]) for p, r in ranges.items()} if CALIBRATION in remedies else {}
    search = RemedySearch(fp32, qdq, trials, builder, strong)
    search.fp32_names = fp32_names
    baseline = search.evaluate_choices([], full=True)
    # nothing to rank when the quantised model meets the targets, and polish has nothing to raise past fp32's own
    must_rank = bool(nodes) and (not baseline.meets or (polish_runs > 0 and not at_ideal(baseline, targets)))
    if callable(own_errors):  # measured only when something is to be ranked
        own_errors = own_errors() if must_rank else None
    ranked = (_rank(nodes, own_errors) if own_errors else _static_rank(qdq, fp32, fp32_names)) if must_rank else []
    sensitivity: Dict[str, Dict[str, Optional[float]]] = {}
    skipped: Dict[str, str] = {}
    cap = max_runs * BUDGET_GROWTH
    strategy, plan, groups, no_answer, untried = "none", [], [], False, 0
    if not baseline.meets and nodes:
        spread = _spread(search, ranked, baseline, max_nodes, sensitivity_top=sensitivity_top, max_runs=max_runs)
        search.early_stop = False  # the sensitivity of a candidate is a gain: every sample it runs on counts
        search.ranking_samples = None if spread else ranking_samples(ev, qdq_bytes)
        order = [] if spread else sensitivity_order(search, ranked, baseline, sensitivity, skipped,
                                                    max_nodes=max_nodes, sensitivity_top=sensitivity_top,
                                                    max_runs=max_runs)
        search.early_stop = True
        plan = search.quantisers.close(_greedy(search, order, max_runs)) if order else []
        strategy = "candidates"
        if spread or not search.evaluate(plan).meets:
            units = _units(search.quantisers, nodes, len(nodes))
            outcome = top_down(search, units, own_errors, cap)
            strategy, groups, no_answer, untried = outcome.strategy, outcome.groups, outcome.no_answer, outcome.untried
            plan = outcome.nodes if not no_answer else plan
        if search.evaluate(plan).meets:
            plan = prune_float(search, plan, cap - _downgrade_reserve(search, cap, remedies, plan))
    choices = [Choice(tuple(plan), strong)] if plan else []
    if plan and search.evaluate(plan).meets and len(remedies) > 1:
        choices, more = downgrade(search, plan, remedies, own_errors, cap)
        untried += more
    final = search.evaluate_choices(choices, full=True)
    polished = None
    if final.meets and polish_runs:
        choices, polished = polish(search, choices, ranked, remedies, polish_runs)
        final = search.evaluate_choices(choices, full=True)
    if not final.meets and choices and not search.evaluate(plan).meets and baseline.shortfall <= final.shortfall:
        choices, final = [], baseline  # nothing measured was better than the quantised model itself
    model, applied = builder.build(choices)
    share, near = near_float(applied, len(nodes))
    for key, reason in trials.failed.items():
        skipped.setdefault(key, reason)
    note = None
    if untried or (not final.meets and ev.runs >= cap):
        note = (f"the search stopped at {ev.runs} runs (--max-runs {max_runs} x {BUDGET_GROWTH}) with {untried} "
                "candidate(s) or group(s) not tried: raise --max-runs to look further")
    return FixPlan(
        choices=choices, found=final.meets, targets=[t.describe() for t in targets],
        baseline=baseline.summary(targets), baseline_meets=baseline.meets, final=final.summary(targets),
        applied=applied, fp32_names=fp32_names, steps=list(search.rsteps), strategy=strategy, groups=groups,
        float_share=share, near_float=near, no_answer=no_answer, budget_note=note, sensitivity=sensitivity,
        skipped=skipped, remedies=list(remedies), ranges=ranges, runs=ev.runs, replayed=trials.replayed,
        inferences=ev.inferences, seconds=time.perf_counter() - start, baseline_latency_ms=baseline.latency_ms,
        final_latency_ms=final.latency_ms, exports=exports(applied, qdq, fp32, fp32_names, builder.quantisers),
        model=model, polish=polished, ranked=must_rank)


DOWNGRADE_SHARE = 0.5
"""The share of the runs left after the top-down search that the prune leaves to the downgrade (when a
cheaper remedy than the strongest is allowed): a prune takes one run per float node, and on NNCF's int8
MobileNetV2 it spent the whole budget, so the plan kept 65 float nodes no cheaper remedy was offered to."""


def _downgrade_reserve(search: RemedySearch, cap: int, remedies: Sequence[str], plan: Sequence[str]) -> int:
    """Runs the prune must leave to the downgrade: none when no node of the plan can take a remedy cheaper
    than the strongest (one remedy allowed, or none that applies: every pair already at 16 bits...)."""
    cheaper = [r for r in remedies if r != search.strong]
    if not any(search.builder.applicable((node,), r) for node in plan for r in cheaper):
        return 0
    return int(max(0, cap - search.ev.runs) * DOWNGRADE_SHARE)


SPREAD_SHARE = 0.5
"""The top `max_nodes` candidates together recovering less than this share of the baseline's shortfall: the
error is spread (or the quantisation catastrophic), and the search goes top down at once."""


def _spread(search: RemedySearch, ranked: Sequence[str], baseline: Any, max_nodes: int, *,
            sensitivity_top: Optional[int], max_runs: int) -> bool:
    """Whether the candidates measured one by one cannot hold a handful that meets the targets, so the search
    goes top down at once. One run: the top `max_nodes` ranked candidates in float together; when even they
    recover less than `SPREAD_SHARE` of the shortfall, the error is spread (issue 44: the byte-CNN's
    catastrophic int8 spent 50 runs there and ended without a plan). When they recover more but miss, a
    second run puts in float every candidate the sensitivity phase would measure or order: when even all of
    them together miss, no prefix the greedy search builds from them meets (NNCF's EfficientNet, 0.0 int8:
    36 single-candidate runs on all 100 samples, a third of the search, before going top down)."""
    top = _units(search.quantisers, ranked, max_nodes)
    if not top or not baseline.shortfall or baseline.shortfall == float("inf"):
        return False
    search.early_stop = False  # the probe's gain is measured
    probe = search.evaluate(list(dict.fromkeys(n for u in top for n in u)), "probe", f"top {len(top)} candidates")
    search.early_stop = True
    if probe.meets:
        return False
    if baseline.shortfall - probe.shortfall < SPREAD_SHARE * baseline.shortfall:
        return True
    _, wide = sensitivity_candidates(search, ranked, max_nodes=max_nodes, sensitivity_top=sensitivity_top,
                                     max_runs=max_runs)
    if len(wide) <= len(top):
        return True  # the probe held them all
    every = search.evaluate(list(dict.fromkeys(n for u in wide for n in u)), "probe", f"top {len(wide)} candidates")
    return not every.meets


def _measure_ranges(builder: RemedyBuilder, nodes: List[str], samples: Sequence[TensorMap], runtime: RuntimeConfig,
                    wide: bool) -> Tuple[Dict[str, List[Any]], Dict[str, Tuple[float, float]]]:
    """pair -> [method, rmin, rmax] for every activation pair another calibration quantises better, and (with
    `wide`: `samples` are the model's own calibration samples) pair -> the range its 16-bit version is
    calibrated to; measured on the float model (every quantised node excluded) run on `samples`."""
    from .calibrate import minmax_16bit_ranges, recalibrated_ranges, tensor_values
    from .requant import PairEditor

    quantisers = builder.quantisers
    float_model, _ = builder.build([Choice(tuple(nodes), FLOAT)])
    editor = PairEditor(builder.qdq, quantisers.index)
    produced = {o for n in float_model.graph.node for o in n.output}
    pairs = {}
    for pair in quantisers.order:
        params = editor.current(pair)
        if params is not None:
            tensor = quantisers.index.producer[pair].input[0]
            # a Relu/Clip the quantiser folded into the pair is restored in the float model under this name
            restored = f"{tensor}__float"
            pairs[pair] = (restored if restored in produced else tensor, params)
    values = tensor_values(float_model, sorted({t for t, _ in pairs.values()}), samples, runtime)
    found = recalibrated_ranges(values, pairs)
    return ({pair: [method, rmin, rmax] for pair, (method, rmin, rmax) in found.items()},
            minmax_16bit_ranges(values, pairs) if wide else {})
