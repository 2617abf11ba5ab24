"""The samples a candidate's sensitivity is measured on: those where the quantised model errs most.

Measuring each candidate alone (fallback.sensitivity_order) only orders the candidates the greedy search adds;
every trial that decides something still runs on every sample. A candidate's gain shows on the samples the
quantised model gets wrong (a changed top-1, a wrong label) or nearly wrong, so the ranking runs there: on
NNCF's catastrophic EfficientNet, 36 single-candidate runs on all 100 samples were a third of the search's
inferences. NNCF's accuracy control ranks the same way (its `ranking_subset_size`: the items with the largest
error first); here the subset is smaller, the verdicts stay on every sample.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Sequence

from ..diff.values import all_finite, reduce_values
from .early_stop import AGREEMENT, sample_miss

RANKING_SAMPLES = 32
"""Samples the single-candidate runs use, when there are at least twice as many (fewer: every sample)."""


def worst_samples(evaluator: Any, outputs: Sequence[Mapping[str, Any]], size: int) -> List[int]:
    """Indices (in sample order) of the `size` samples on which `outputs` err most against the evaluator's
    reference: first by how much they miss the countable targets (top-1/top-5 agreement, labels), then by the
    relative L2 error of the outputs the targets read."""
    countable = [t for t in evaluator.targets if t.metric in AGREEMENT or t.on_labels]
    read = {t.output for t in evaluator.targets}
    scores = []
    for k, (sample, reference, candidate) in enumerate(zip(evaluator.sample_ids, evaluator.reference, outputs)):
        missed = sum(sample_miss(t, evaluator, evaluator.extra, k, sample, candidate) for t in countable)
        error = max((_relative_error(value, candidate.get(name)) for name, value in reference.items()
                     if None in read or name in read), default=0.0)
        scores.append((-missed, -error, k))
    return sorted(k for _m, _e, k in sorted(scores)[:size])


def _relative_error(reference: Any, candidate: Any) -> float:
    """||candidate - reference|| / ||reference||, from the diff engine's SQNR (infinite for a non-finite candidate;
    0 where there is no SQNR: strings, maps, structures that differ)."""
    if not all_finite(candidate):
        return float("inf")
    pair = reduce_values(reference, candidate)
    sqnr = pair.metrics().get("sqnr") if pair is not None else None
    return 0.0 if sqnr is None else 10.0 ** (-float(sqnr) / 20.0)

def ranking_samples(evaluator: Any, quantised: bytes) -> "List[int] | None":
    """The samples to measure single candidates on: the quantised model's `RANKING_SAMPLES` worst (one run of
    it), or None to use every sample (fewer than twice as many)."""
    if len(evaluator.samples) < 2 * RANKING_SAMPLES:
        return None
    return worst_samples(evaluator, evaluator.outputs(quantised, label="quantised"), RANKING_SAMPLES)
