"""Which output a label file is read for, and how a prediction is read from it.

Classifiers from skl2onnx, tf2onnx and many exporters write a predicted label (int64 or string, one per row)
beside the class probabilities (a float tensor [rows, classes], or ZipMap's list of {class: probability}).
Labels given without an output name ('*') bind to the output that holds class scores: a float tensor with
more than one value per sample (a name with prob/logit/score first), else a ZipMap output, else the
predicted-label output itself (then only top-1 is defined: the label must equal the prediction). Labels
that name outputs bind to those. `LabelBinding.note` says in one line which output the labels were read for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..errors import InputDataError
from .labels import ANY_OUTPUT, label_of

SCORES, ZIPMAP, PREDICTED = "scores", "zipmap", "label"
_SCORE_WORDS = ("prob", "logit", "score", "output_probability")


def _kind(value: Any) -> Optional[str]:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return ZIPMAP
    if isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.floating) and value.size > 1:
            return SCORES
        if (np.issubdtype(value.dtype, np.integer) or value.dtype == object) and value.size >= 1:
            return PREDICTED
    return None


@dataclass(frozen=True)
class LabelBinding:
    """Labels bound to one output: `kind` scores (top-k of the last axis), zipmap (top-k of the map's
    values, the label a key), label (the prediction must equal the label; top-1 only)."""

    output: str
    kind: str
    labels: Mapping[str, int]
    """sample id -> class (an index for scores; the class key for zipmap and label outputs)."""
    note: str

    @property
    def ks(self) -> Sequence[int]:
        return (1,) if self.kind == PREDICTED else (1, 5)

    def scores(self, value: Any, label: int) -> "tuple[np.ndarray, int]":
        """(score row, label index) of one sample's scores or ZipMap output, for `labels.topk_correct`."""
        if self.kind == ZIPMAP:
            entry = value[0]
            keys = sorted(entry)
            if label not in keys:
                raise InputDataError(f"label {label} is not a class of output '{self.output}' ({len(keys)} classes)")
            return np.array([float(entry[k]) for k in keys]), keys.index(label)
        return np.asarray(value, dtype=np.float64).reshape(-1), label

    def correct(self, value: Any, sample: str, k: int) -> Optional[bool]:
        """Whether the sample's output has its label among the top k (None: the sample has no label)."""
        label = self.labels.get(sample)
        return None if label is None else self.judge(value, label, k)

    def judge(self, value: Any, label: int, k: int) -> bool:
        """Whether `label` is among the top k of one sample's output (`labels.accuracy_report`'s judge)."""
        from .labels import topk_correct

        if self.kind == PREDICTED:  # int64 or string predictions: equal as text (3 == "3")
            return str(np.asarray(value).reshape(-1)[0]) == str(label)
        row, index = self.scores(value, label)
        return topk_correct(row, index, k)


def bind_labels(labels: Mapping[str, Mapping[str, int]], sample_ids: Sequence[str],
                outputs: Mapping[str, Any]) -> List[LabelBinding]:
    """The bindings of a label file over `sample_ids`, given one sample's reference outputs (name -> value,
    in the model's output order): one per output the labels name, or one for '*' labels (module docstring)."""
    named: List[str] = []
    for entry in labels.values():
        for key in entry:
            if key != ANY_OUTPUT and key not in named:
                named.append(key)
    unknown = [n for n in named if n not in outputs]
    if unknown:
        raise InputDataError(f"--labels: output '{unknown[0]}' is not an output of the model "
                             f"(outputs: {', '.join(outputs)})")
    bindings: List[LabelBinding] = []
    for name in named:
        kind = _kind(outputs[name]) or SCORES
        per_sample = {s: v for s in sample_ids if (v := label_of(labels, s, name)) is not None}
        bindings.append(LabelBinding(name, kind, per_sample, f"labels read for output '{name}' (named in the file)"))
    if any(ANY_OUTPUT in entry for entry in labels.values()):
        output, kind = _pick(outputs)
        per_sample = {s: v for s in sample_ids if (v := _any_label(labels, s)) is not None}
        if output not in named:
            bindings.append(LabelBinding(output, kind, per_sample, _note(output, kind, outputs)))
    return bindings


def _any_label(labels: Mapping[str, Mapping[str, int]], sample: str) -> Optional[int]:
    return label_of(labels, sample, ANY_OUTPUT)


def _pick(outputs: Mapping[str, Any]) -> "tuple[str, str]":
    kinds = {name: _kind(value) for name, value in outputs.items()}
    for wanted in (SCORES, ZIPMAP, PREDICTED):
        found = [n for n, k in kinds.items() if k == wanted]
        if found:
            worded = [n for n in found if any(w in n.lower() for w in _SCORE_WORDS)]
            return (worded or found)[0], wanted
    first = next(iter(outputs))
    return first, SCORES


def _note(output: str, kind: str, outputs: Mapping[str, Any]) -> str:
    others = [n for n in outputs if n != output]
    besides = f" of {len(outputs)} outputs; not {', '.join(repr(o) for o in others[:3])}" if others else ""
    if kind == ZIPMAP:
        what = f"a map of {len(outputs[output][0])} class probabilities"
    elif kind == PREDICTED:
        what = "the predicted label itself: top-1 only"
    else:
        what = f"scores of {np.asarray(outputs[output]).shape[-1]} classes"
    return f"labels read for output '{output}' ({what}{besides})"


def accuracy(binding: LabelBinding, outputs: Sequence[Mapping[str, Any]], sample_ids: Sequence[str],
             k: int) -> Optional[float]:
    """Top-k accuracy of a model's outputs (one map per sample) over the labelled samples (None: none)."""
    right: List[bool] = []
    for sample, values in zip(sample_ids, outputs):
        verdict = binding.correct(values[binding.output], sample, k)
        if verdict is not None:
            right.append(verdict)
    return float(np.mean(right)) if right else None


def binding_table(bindings: Sequence[LabelBinding]) -> Dict[str, str]:
    return {b.output: b.note for b in bindings}
