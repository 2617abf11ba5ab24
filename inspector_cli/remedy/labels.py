"""Task accuracy against labels: top-k accuracy of two models, the drop with a bootstrap interval,
the samples that flipped, and the accuracy gates. Pure numpy apart from reading the label file.

Label files (`--labels FILE`):
- CSV: `sample,label` per line (a header line whose label column is not a number is skipped); or
  `sample,output,label` for per-output targets;
- JSON: `{"sample": 3, ...}` or `{"sample": {"logits": 3, "aux": 1}, ...}`.
A sample is named by its id in the sample set (the file name) or by that name without extension.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..errors import InputDataError, UsageError
from ..results.remedy import AccuracyRow

ANY_OUTPUT = "*"
"""Output key of a label that applies to the model's (single or first compared) output."""
BOOTSTRAP_SEED = 20240518
BOOTSTRAP_ROUNDS = 2000


def _class_index(value: object, where: str) -> int:
    try:
        number = float(str(value).strip())
    except ValueError as exc:
        raise InputDataError(f"{where}: label '{value}' is not a class index") from exc
    if number != int(number) or number < 0:
        raise InputDataError(f"{where}: label '{value}' is not a non-negative integer class index")
    return int(number)


def load_labels(path: "str | Path") -> Dict[str, Dict[str, int]]:
    """sample -> {output name or '*': class index} from a CSV or JSON label file."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--labels {path}: file not found")
    labels: Dict[str, Dict[str, int]] = {}
    if path.suffix.lower() == ".json":
        try:
            document = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputDataError(f"{path}: not valid JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise InputDataError(f"{path}: expected an object mapping sample names to labels")
        for sample, value in document.items():
            if isinstance(value, dict):
                labels[str(sample)] = {str(k): _class_index(v, f"{path}: {sample}.{k}") for k, v in value.items()}
            else:
                labels[str(sample)] = {ANY_OUTPUT: _class_index(value, f"{path}: {sample}")}
        return labels
    with path.open(newline="") as handle:
        for number, row in enumerate(csv.reader(handle), start=1):
            row = [c.strip() for c in row]
            if not row or not row[0] or row[0].startswith("#"):
                continue
            if len(row) not in (2, 3):
                raise InputDataError(f"{path}:{number}: expected 'sample,label' or 'sample,output,label'")
            if number == 1 and not row[-1].lstrip("-").isdigit():
                continue  # header
            output = row[1] if len(row) == 3 else ANY_OUTPUT
            labels.setdefault(row[0], {})[output] = _class_index(row[-1], f"{path}:{number}")
    return labels


def label_of(labels: Mapping[str, Mapping[str, int]], sample: str, output: str) -> Optional[int]:
    """The label of `sample` for `output` (exact name, then without extension; '*' applies to any)."""
    entry = labels.get(sample)
    if entry is None:
        entry = labels.get(Path(sample).stem) or labels.get(sample.rsplit(".", 1)[0])
    if entry is None:
        return None
    return entry.get(output, entry.get(ANY_OUTPUT))


def topk_correct(scores: np.ndarray, label: int, k: int) -> bool:
    """Whether `label` is among the k largest scores (last axis, batch of one flattened)."""
    row = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not 0 <= label < row.size:
        raise InputDataError(f"label {label} is outside the {row.size} classes of the output")
    if not np.isfinite(row).all():
        return False  # a NaN/Inf score is never a right answer
    k = min(k, row.size)
    # ties count against the label: it must beat the k-th largest strictly or equal it among the first k
    order = np.argsort(-row, kind="stable")[:k]
    return bool(label in order)


def bootstrap_drop_ci(right_a: np.ndarray, right_b: np.ndarray, rounds: int = BOOTSTRAP_ROUNDS,
                      seed: int = BOOTSTRAP_SEED) -> List[float]:
    """95% percentile interval of accuracy(A) - accuracy(B), resampling samples in pairs."""
    n = right_a.size
    if n == 0:
        return [0.0, 0.0]
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, size=(rounds, n))
    diff = right_a.astype(np.float64) - right_b.astype(np.float64)
    drops = diff[index].mean(axis=1)
    low, high = np.percentile(drops, [2.5, 97.5])
    return [float(low), float(high)]


def accuracy_report(scores_a: Mapping[str, np.ndarray], scores_b: Mapping[str, np.ndarray],
                    labels: Mapping[str, Mapping[str, int]], output: str, k: int = 1,
                    min_accuracy: Optional[float] = None, max_accuracy_drop: Optional[float] = None,
                    seed: int = BOOTSTRAP_SEED, judge: Optional[Callable[[Any, int, int], bool]] = None) -> AccuracyRow:
    """Accuracy of A and B on `output` over the samples of `scores_a` (sample -> scores).

    Gates: `min_accuracy` on B's accuracy, `max_accuracy_drop` on A - B (fractions, 0.015 = 1.5 points).
    Samples without a label are listed, not counted. `judge(value, label, k)` reads one output (default:
    `topk_correct` of a score tensor; label_binding.LabelBinding.judge reads ZipMap and label outputs).
    """
    judge = judge or topk_correct
    names: List[str] = []
    right_a: List[bool] = []
    right_b: List[bool] = []
    unlabelled: List[str] = []
    for sample in scores_a:
        label = label_of(labels, sample, output)
        if label is None:
            unlabelled.append(sample)
            continue
        if sample not in scores_b:
            raise InputDataError(f"sample {sample}: no output '{output}' from model B")
        names.append(sample)
        right_a.append(judge(scores_a[sample], label, k))
        right_b.append(judge(scores_b[sample], label, k))
    a = np.array(right_a, dtype=bool)
    b = np.array(right_b, dtype=bool)
    acc_a = float(a.mean()) if a.size else 0.0
    acc_b = float(b.mean()) if b.size else 0.0
    drop = acc_a - acc_b
    failed: List[str] = []
    if not names:
        failed.append(f"no sample has a label for output '{output}'")
    if min_accuracy is not None and acc_b < min_accuracy:
        failed.append(f"top-{k} accuracy of B {acc_b:.4f} < --min-accuracy {min_accuracy:g}")
    if max_accuracy_drop is not None and drop > max_accuracy_drop:
        failed.append(f"top-{k} accuracy drop {drop:.4f} > --max-accuracy-drop {max_accuracy_drop:g}")
    return AccuracyRow(
        output=output, k=k, samples=len(names), accuracy_a=acc_a, accuracy_b=acc_b, drop=drop,
        drop_ci95=bootstrap_drop_ci(a, b, seed=seed),
        a_right_b_wrong=[n for n, x, y in zip(names, right_a, right_b) if x and not y],
        a_wrong_b_right=[n for n, x, y in zip(names, right_a, right_b) if y and not x],
        unlabelled=unlabelled, failed_gates=failed)


def accuracy_reports(scores_a: Mapping[str, np.ndarray], scores_b: Mapping[str, np.ndarray],
                     labels: Mapping[str, Mapping[str, int]], output: str, ks: Sequence[int] = (1, 5),
                     judge: Optional[Callable[[Any, int, int], bool]] = None,
                     **gates: Optional[float]) -> List[AccuracyRow]:
    """`accuracy_report` for each k; gates apply to top-1 only (the figure products state)."""
    return [accuracy_report(scores_a, scores_b, labels, output, k, judge=judge, **(gates if k == ks[0] else {}))
            for k in ks]
