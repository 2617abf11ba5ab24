"""Fallback plan for a QDQ model: the fewest nodes to keep in float so that every target holds.

Every float set is measured as the quantiser builds it from an exclude list (`exclusion.exclude_qdq`:
the excluded nodes' weights in float, a tensor's Q/DQ pair removed only when every node asking for
it is excluded), so the plan's figures are what `quantize_static(nodes_to_exclude=...)` gives.

1. Rank nodes: by a given own-error list (the isolation results of `compare --layers --isolate`;
   without one, by the deployed weight SQNR, lowest first). Each ranked node becomes a candidate: the
   node with the nodes that share its tensors' quantisers (`Quantisers.unit`: excluded together, the
   node reads and writes float). Measure, for the top `sensitivity_top`, the output metrics with that
   candidate excluded; order by measured gain (drop of the targets' shortfall).
2. Greedy, verified: add candidates in that order and re-run the patched model after each step while
   the run budget allows it, else gallop (1, 2, 4, ... candidates) and bisect the prefix; stop when
   all targets hold or at `max_nodes` candidates.
3. Prune: try the plan without each node (latest first); a node whose removal keeps the targets goes.
Every step is recorded (node, metrics, latency), so the trade-off curve comes with the plan.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import onnx

from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..errors import InferenceError
from .evaluate import Evaluation, Evaluator, Target
from .exclusion import Quantisers, exclude_qdq
from .naming import fp32_node_names
from .qdq_patch import producer_through_qdq, quantised_nodes


@dataclass(frozen=True)
class FallbackStep:
    """One evaluated float set: the node added (or removed, when pruning) and what it gave."""

    action: str
    node: str
    float_nodes: List[str]
    metrics: Dict[str, Optional[float]]
    meets: bool
    latency_ms: float

    def to_dict(self) -> Dict[str, Any]:
        return {"action": self.action, "node": self.node, "float_nodes": list(self.float_nodes),
                "metrics": dict(self.metrics), "meets": self.meets, "latency_ms": self.latency_ms}


@dataclass
class FallbackPlan:
    """The plan: nodes to keep in float (names as the quantiser knows them), its evidence and cost."""

    nodes: List[str]
    """Node names in the QDQ model."""
    fp32_nodes: List[str]
    """The same nodes named as in the fp32 model (what `nodes_to_exclude` needs; equal for onnxruntime's
    quantize_static, paired structurally for models from other tools)."""
    found: bool
    targets: List[str]
    baseline: Dict[str, Optional[float]]
    final: Dict[str, Optional[float]]
    sensitivity: Dict[str, Dict[str, Optional[float]]]
    skipped: Dict[str, str]
    """Candidates whose patched model onnxruntime could not load or run, with the reason."""
    steps: List[FallbackStep]
    runs: int
    inferences: int
    seconds: float
    baseline_latency_ms: float
    final_latency_ms: float
    model: Optional[onnx.ModelProto] = field(default=None, repr=False)
    baseline_meets: bool = False
    """Whether the quantised model itself meets the targets (then the plan is empty and found)."""

    def exclude_list(self) -> Dict[str, Any]:
        """The document of `--exclude-list`: feed `nodes_to_exclude` to quantize_static."""
        return {"nodes_to_exclude": list(self.fp32_nodes), "qdq_nodes": list(self.nodes),
                "targets": list(self.targets), "found": self.found,
                "metrics": dict(self.final)}

    def write_exclude_list(self, path: "str | Path") -> Path:
        """JSON, or YAML when the name ends in .yaml/.yml."""
        import json

        from ..serialize import write_atomic

        path = Path(path)
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            write_atomic(path, yaml.safe_dump(self.exclude_list(), sort_keys=False))
        else:
            write_atomic(path, json.dumps(self.exclude_list(), indent=2) + "\n")
        return path

    def to_dict(self) -> Dict[str, Any]:
        return {"nodes": list(self.nodes), "fp32_nodes": list(self.fp32_nodes), "found": self.found,
                "targets": list(self.targets), "baseline": dict(self.baseline), "final": dict(self.final),
                "sensitivity": dict(self.sensitivity), "skipped": dict(self.skipped),
                "steps": [s.to_dict() for s in self.steps], "runs": self.runs, "inferences": self.inferences,
                "seconds": self.seconds, "baseline_latency_ms": self.baseline_latency_ms,
                "final_latency_ms": self.final_latency_ms}


class _Search:
    def __init__(self, fp32: onnx.ModelProto, qdq: onnx.ModelProto, evaluator: Evaluator,
                 quantisers: Optional[Quantisers] = None) -> None:
        self.fp32, self.qdq, self.ev = fp32, qdq, evaluator
        self.quantisers = quantisers or Quantisers(qdq)
        self.fp32_names: Dict[str, str] = {}
        self.cache: Dict[frozenset, Evaluation] = {}
        self.steps: List[FallbackStep] = []
        self.failed: Dict[frozenset, str] = {}

    def evaluate(self, nodes: Sequence[str], action: str = "", node: str = "", strict: bool = False) -> Evaluation:
        """The float set's evaluation (cached); `strict`: raise when it cannot be patched or run, else
        it counts as missing every target."""
        nodes = self.quantisers.close(nodes)
        key = frozenset(nodes)
        if key not in self.cache:
            try:
                model = self.model(nodes)
                self.cache[key] = self.ev.evaluate(model.SerializeToString(), label=f"float {len(nodes)} nodes")
            except (InferenceError, ValueError, KeyError) as exc:
                if strict:  # a sensitivity run: the caller records the candidate as skipped
                    raise
                # a float set onnxruntime refuses (or that cannot be patched) never meets the targets;
                # the search goes on without it rather than ending the whole command (issue 29)
                self.failed[key] = str(exc).splitlines()[0][:300]
                self.cache[key] = Evaluation({}, [], 0.0, shortfall=float("inf"), meets=False)
        result = self.cache[key]
        if action:
            self.steps.append(FallbackStep(action, node, list(nodes), result.summary(self.ev.targets),
                                           result.meets, result.latency_ms))
        return result

    def prefetch(self, units: Sequence[Sequence[str]]) -> None:
        """Evaluate these float sets ahead (a search with workers runs them together); here: nothing."""

    def measure_alone(self, units: Sequence[Sequence[str]]) -> List[Tuple[Optional[Evaluation], Optional[str]]]:
        """Each float set's evaluation (the sensitivity phase), or None and why it could not be built or run."""
        self.prefetch(units)
        measured: List[Tuple[Optional[Evaluation], Optional[str]]] = []
        for unit in units:
            try:
                measured.append((self.evaluate(unit, strict=True), None))
            except (InferenceError, ValueError) as exc:
                measured.append((None, str(exc).splitlines()[0][:300]))
        return measured

    def model(self, nodes: Sequence[str]) -> onnx.ModelProto:
        """The QDQ model with `nodes` excluded, as the quantiser would build it."""
        return exclude_qdq(self.qdq, nodes, self.fp32, self.fp32_names, self.quantisers)


def plan_fallback(fp32: onnx.ModelProto, qdq: onnx.ModelProto, samples: Sequence[TensorMap],
                  targets: Sequence[Target], *, sample_ids: Optional[Sequence[str]] = None,
                  own_errors: Optional[Mapping[str, float]] = None, max_nodes: int = 10,
                  sensitivity_top: Optional[int] = None, max_runs: int = 50, prune: bool = True,
                  runtime: RuntimeConfig = RuntimeConfig()) -> FallbackPlan:
    """The fallback plan of `qdq` against the outputs of `fp32` on `samples` (see module docstring).

    `own_errors`: node -> own (isolated) error, larger = worse; nodes missing from it rank last.
    `max_runs` bounds the evaluations (the reference and baseline runs included); the plan found
    within it is returned, with `found` False when the targets were not reached. `sensitivity_top`
    caps the candidates measured one by one; None measures as many as `max_runs` leaves beside the
    greedy search (`greedy_runs`), at least `SENSITIVITY_MIN`.
    """
    ids = list(sample_ids) if sample_ids is not None else [f"sample{i}" for i in range(len(samples))]
    ev = Evaluator(samples, ids, targets, runtime)
    ev.set_reference(fp32.SerializeToString())
    search = _Search(fp32, qdq, ev)
    baseline = ev.evaluate(qdq.SerializeToString(), label="quantised")
    search.cache[frozenset()] = baseline
    search.fp32_names = fp32_node_names(fp32, qdq, quantised_nodes(qdq))
    ranked = _rank(quantised_nodes(qdq), own_errors) if own_errors else _static_rank(qdq, fp32, search.fp32_names)
    sensitivity: Dict[str, Dict[str, Optional[float]]] = {}
    skipped: Dict[str, str] = {}
    order: List[Tuple[str, ...]] = []
    if not baseline.meets:
        order = sensitivity_order(search, ranked, baseline, sensitivity, skipped, max_nodes=max_nodes,
                                  sensitivity_top=sensitivity_top, max_runs=max_runs)
    plan = search.quantisers.close(_greedy(search, order, max_runs)) if order else []
    if prune and search.evaluate(plan).meets:
        plan = _prune(search, plan, max_runs)
    final = search.evaluate(plan)
    if frozenset(plan) in search.failed:
        plan = []  # the best set could not be run: report the quantised model itself
        final = baseline
    for failed, reason in search.failed.items():
        skipped.setdefault(", ".join(sorted(failed)) or "(none)", reason)
    model = search.model(plan)
    return FallbackPlan(
        nodes=plan, fp32_nodes=[search.fp32_names.get(n, n) for n in plan], found=final.meets,
        targets=[t.describe() for t in targets],
        baseline=baseline.summary(targets), final=final.summary(targets), sensitivity=sensitivity, skipped=skipped,
        steps=search.steps, runs=ev.runs, inferences=ev.inferences, seconds=ev.seconds,
        baseline_latency_ms=baseline.latency_ms, final_latency_ms=final.latency_ms, model=model,
        baseline_meets=baseline.meets)


def sensitivity_order(search: "_Search", ranked: Sequence[str], baseline: Evaluation,
                      sensitivity: Dict[str, Dict[str, Optional[float]]], skipped: Dict[str, str], *,
                      max_nodes: int, sensitivity_top: Optional[int], max_runs: int) -> List[Tuple[str, ...]]:
    """The candidates in the order the greedy search adds them (at most `max_nodes`): each of the top ranked
    ones measured alone (its gain: the drop of the targets' shortfall), as many as the budget leaves beside the
    greedy search; measured gain first, unmeasured ones after in rank order. Fills `sensitivity` and `skipped`."""
    ev = search.ev
    budget, candidates = sensitivity_candidates(search, ranked, max_nodes=max_nodes, sensitivity_top=sensitivity_top,
                                                max_runs=max_runs)
    gains: Dict[Tuple[str, ...], float] = {}
    for unit, (result, failure) in zip(candidates[:budget], search.measure_alone(candidates[:budget])):
        if result is None:  # a patch onnxruntime refuses: not a candidate
            skipped[unit[0]] = failure or "could not be run"
            continue
        sensitivity[unit[0]] = result.summary(ev.targets)
        gains[unit] = baseline.shortfall - result.shortfall
    # measured gain first; unmeasured candidates keep their own-error order behind them
    order = sorted(gains, key=lambda u: -gains[u]) + [u for u in candidates if u not in gains
                                                      and u[0] not in skipped]
    return order[:max_nodes]


def sensitivity_candidates(search: "_Search", ranked: Sequence[str], *, max_nodes: int,
                           sensitivity_top: Optional[int], max_runs: int) -> Tuple[int, List[Tuple[str, ...]]]:
    """(how many candidates `sensitivity_order` measures alone, the candidates it may order: those measured
    and up to `max_nodes` behind them)."""
    # measure as many single-candidate gains as the budget allows beside what the greedy search needs:
    # the own-error ranking misses nodes whose error grows downstream (ResNet's classifier Gemm,
    # 13th by isolation, is the one whose float copy reaches the zoo's halfway target: issue 29)
    runs = search.ev.runs
    wanted = sensitivity_top if sensitivity_top is not None else max(
        SENSITIVITY_MIN, max_runs - runs - greedy_runs(max_nodes))
    budget = max(1, min(wanted, max_runs - runs - 2))
    # only the candidates the search can reach are built (a unit costs a pass over the pairs)
    return budget, _units(search.quantisers, ranked, budget + max_nodes)


SENSITIVITY_MIN = 12
"""Single-node measurements the sensitivity phase makes at least (budget permitting)."""


def greedy_runs(max_nodes: int) -> int:
    """Runs the greedy search needs at most without one run per step: galloping prefixes 1, 2, 4, ...
    up to `max_nodes`, the bisection of the last interval, and one pruning trial."""
    gallop = max(1, math.ceil(math.log2(max(max_nodes, 1)))) + 1
    return 2 * gallop + 1


def own_errors_from_layers(qdq: onnx.ModelProto, rows: Iterable[Tuple[str, Optional[float]]]) -> Dict[str, float]:
    """node -> own error from (tensor of the QDQ model, isolated cosine) pairs, e.g. the layer rows
    of `compare --layers --isolate` (`name_b`, `isolated["cosine"]`): the tensor's producer, looked
    through Q/DQ pairs, gets 1 - cosine (the worst of its tensors when it has several)."""
    producer = {o: n for n in qdq.graph.node for o in n.output if o}
    errors: Dict[str, float] = {}
    for tensor, cosine in rows:
        node = producer_through_qdq(producer, tensor)
        if node is None or cosine is None or not node.name:
            continue
        errors[node.name] = max(errors.get(node.name, 0.0), 1.0 - float(cosine))
    return errors


def _rank(candidates: List[str], own_errors: Optional[Mapping[str, float]]) -> List[str]:
    if not own_errors:
        return candidates
    known = [n for n in candidates if n in own_errors]
    known.sort(key=lambda n: -float(own_errors[n]))
    return known + [n for n in candidates if n not in own_errors]


def _static_rank(qdq: onnx.ModelProto, fp32: onnx.ModelProto, fp32_names: Mapping[str, str]) -> List[str]:
    """Without an own-error list: weights with the lowest deployed SQNR against the fp32 weight first
    (no runs needed; per-tensor and per-channel weights alike), then the other quantised nodes in
    graph order."""
    from .perchannel import sqnr_db
    from .qdq_patch import WEIGHT_AXIS, GraphIndex, dequantize_initializer, fp32_weight, weight_input

    index = GraphIndex(qdq.graph)
    sqnr: Dict[str, float] = {}
    for node in qdq.graph.node:
        found = weight_input(index, node) if node.op_type in WEIGHT_AXIS and node.name else None
        if found is None:
            continue
        position, dq = found
        deployed = dequantize_initializer(index, dq)
        weight = fp32_weight(fp32, fp32_names.get(node.name, node.name), position, deployed.shape)
        if weight is not None:
            sqnr[node.name] = sqnr_db(weight, deployed)
    ranked = sorted(sqnr, key=lambda n: sqnr[n])
    return ranked + [n for n in quantised_nodes(qdq) if n not in sqnr]


def _units(quantisers: Quantisers, ranked: Sequence[str], limit: int) -> List[Tuple[str, ...]]:
    """The first `limit` ranked nodes' candidates (the node and the nodes sharing its quantisers), in rank
    order, a candidate equal to an earlier one dropped."""
    units: List[Tuple[str, ...]] = []
    seen = set()
    for node in ranked:
        if len(units) >= limit:
            break
        unit = tuple(quantisers.unit(node))
        if frozenset(unit) not in seen:
            seen.add(frozenset(unit))
            units.append(unit)
    return units


def _union(units: Sequence[Tuple[str, ...]]) -> List[str]:
    """The nodes of `units`, each once, in the order they were added."""
    return list(dict.fromkeys(n for unit in units for n in unit))


def _greedy(search: _Search, order: List[Tuple[str, ...]], max_runs: int) -> List[str]:
    """The nodes of the shortest prefix of candidates `order` meeting the targets (or of all of them
    when none does)."""
    remaining = max_runs - search.ev.runs
    if remaining >= len(order):  # enough budget: one step at a time, the full trade-off curve
        for k in range(1, len(order) + 1):
            if search.evaluate(_union(order[:k]), "add", order[k - 1][0]).meets:
                return _union(order[:k])
        return _union(order)
    low, high = 0, None  # prefix of `low` candidates fails; of `high` candidates meets
    k = 1
    while k <= len(order) and search.ev.runs < max_runs:
        if search.evaluate(_union(order[:k]), "add", order[k - 1][0]).meets:
            high = k
            break
        low = k
        k = min(2 * k, len(order)) if k < len(order) else k + 1
    if high is None:
        return _union(order[:low] if low else order)
    while high - low > 1 and search.ev.runs < max_runs:
        mid = (low + high) // 2
        if search.evaluate(_union(order[:mid]), "bisect", order[mid - 1][0]).meets:
            high = mid
        else:
            low = mid
    return _union(order[:high])


def _prune(search: _Search, plan: List[str], max_runs: int) -> List[str]:
    """Drop, latest first, each node whose removal keeps the targets (the run budget permitting). The
    last node is tried too: the last candidate was needed, not necessarily each node of it. A node that
    comes back with a shared quantiser (`Quantisers.close`) is tried again after the others."""
    deferred: List[str] = []
    for node in list(reversed(plan) if len(plan) > 1 else []):
        plan = _prune_one(search, plan, node, max_runs, deferred)
    for node in deferred:
        if node in plan:
            plan = _prune_one(search, plan, node, max_runs, [])
    return plan


def _prune_one(search: _Search, plan: List[str], node: str, max_runs: int, deferred: List[str]) -> List[str]:
    if search.ev.runs >= max_runs:
        return plan
    trial = search.quantisers.close([n for n in plan if n != node])
    if set(trial) == set(plan):  # the node comes back with its shared quantiser: nothing to try yet
        deferred.append(node)
        return plan
    return trial if search.evaluate(trial, "remove", node).meets else plan
