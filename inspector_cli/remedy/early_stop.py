"""Stopping a trial as soon as a target can no longer hold.

Most trials of a search only need a verdict (does this variant meet the targets?), and most variants of a
catastrophic quantisation miss by many samples: a target counted over samples (top-1/top-5 agreement with the
reference, accuracy against labels and its drop) is out of reach once more samples missed than it allows, and
the remaining samples cannot change that. The evaluator then stops (`Evaluation.partial`). Targets measured
from sums over every value (cosine, SQNR, errors) never stop a trial. Samples count one each (a batch of rows
per sample counts its share of rows that disagree).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ..diff.values import reduce_values

AGREEMENT = ("top1", "top5")


def miss_counter(evaluator: Any) -> Optional[Callable[[int, Any], bool]]:
    """stop(k, outputs) for `Evaluator.outputs`: True once a countable target is out of reach (None when no
    target is countable)."""
    targets = [t for t in evaluator.targets if t.metric in AGREEMENT or t.on_labels]
    if not targets:
        return None
    total = len(evaluator.samples)
    binding = evaluator.extra
    missed: Dict[str, float] = {}
    allowed: Dict[str, float] = {}
    for target in targets:
        key = target.describe()
        missed[key] = 0.0
        if target.metric in AGREEMENT or target.metric in ("acc1", "acc5"):
            allowed[key] = (1.0 - target.threshold) * _labelled(target, binding, evaluator, total)
        else:  # acc1_drop / acc5_drop: at least (reference accuracy - drop) right
            k = 5 if target.metric.startswith("acc5") else 1
            right = sum(bool(binding.correct(out[binding.output], s, k)) for s, out in
                        zip(evaluator.sample_ids, evaluator.reference) if s in binding.labels)
            labelled = _labelled(target, binding, evaluator, total)
            allowed[key] = labelled - (right - target.threshold * labelled)

    def stop(k: int, outputs: Any) -> bool:
        sample = evaluator.sample_ids[k]
        for target in targets:
            key = target.describe()
            missed[key] += sample_miss(target, evaluator, binding, k, sample, outputs)
            if missed[key] > allowed[key] + 1e-9:
                return True
        return False

    return stop


def _labelled(target: Any, binding: Any, evaluator: Any, total: int) -> float:
    if not target.on_labels or binding is None:
        return float(total)
    return float(sum(1 for s in evaluator.sample_ids if s in binding.labels))


def sample_miss(target: Any, evaluator: Any, binding: Any, k: int, sample: str, outputs: Any) -> float:
    """How much of sample k misses the target: 1 for a wrong label; the share of rows whose top-k class differs
    from the reference's on the worst output the target applies to."""
    if target.on_labels:
        if binding is None or sample not in binding.labels:
            return 0.0
        wanted = 5 if target.metric.startswith("acc5") else 1
        return 0.0 if binding.correct(outputs[binding.output], sample, wanted) else 1.0
    worst: List[float] = [0.0]
    for name, value in evaluator.reference[k].items():
        if target.output is not None and target.output != name:
            continue
        pair = reduce_values(value, outputs[name])
        agree = pair.metrics().get(target.metric) if pair is not None else 0.0
        if agree is not None:
            worst.append(1.0 - float(agree))
    return max(worst)
