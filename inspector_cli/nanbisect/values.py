"""What counts as a bad value, and value statistics of tensors.

Checks are fast on clean tensors: the float64 sum of a tensor is non-finite exactly when some
element is (finite float32/float16 values cannot overflow a float64 sum), so the element-wise
test runs only when the sum says there is something to find.
"""
from __future__ import annotations

import enum
import math
from dataclasses import replace
from typing import Any, Dict, Optional

import numpy as np

from ..diff.values import is_numeric_tensor, layout, numbers_inside, numeric_value
from ..results.nan_bisect import TensorStats

FP16_MAX = 65504.0
FP16_TINY = 2.0 ** -24
"""Smallest positive fp16 (subnormal), about 5.96e-8: smaller magnitudes become 0."""


class Predicate(str, enum.Enum):
    """The property whose birth is searched: any NaN/Inf, or NaN only (where an Inf became NaN)."""

    NONFINITE = "nonfinite"
    NAN = "nan"


def is_float(array: Any) -> bool:
    return isinstance(array, np.ndarray) and array.dtype.kind == "f"


HEAD = 1 << 10
"""Elements checked first, element-wise: a bad replay's tensors are mostly NaN/Inf from the start
(propagated values fill them), and a full sum of each cost a bad sample ~1 inference (issue 16)."""


def float_values(value: Any) -> Any:
    """A tensor as it is; the float numbers inside a sequence or map (a ZipMap's probabilities, a list's
    tensors: diff/values.py), flat, so a NaN they carry is seen where it is (issue 29); else the value."""
    if isinstance(value, (list, tuple, dict)):
        numbers, _ = numbers_inside(value)
        return numbers if numbers is not None else value
    return numeric_value(value)  # bfloat16, float8...: their values in float64, where a NaN is seen


def is_bad(array: Any, predicate: Predicate = Predicate.NONFINITE) -> bool:
    """Does `array` hold a NaN or Inf (NaN only with `Predicate.NAN`)? False for non-float values.
    A sequence or map is bad when a float inside it is."""
    array = float_values(array)
    if not is_float(array) or array.size == 0:
        return False
    nan_only = predicate == Predicate.NAN
    # One pass: the sum is finite iff every value is. +Inf and -Inf together make NaN, which numpy
    # warns about ("invalid value encountered in reduce"): expected here, silenced where it arises.
    # First in the array's own precision (float32 sums run ~3x faster than float64-accumulated ones:
    # a bad sample's replay checks every tensor of its span, issue 16): a finite sum proves every
    # value finite; an overflowing one is settled element-wise (the same answer as the float64 sum
    # used before: finite float32/float16 values cannot overflow it, ~2x faster).
    with np.errstate(invalid="ignore", over="ignore"):
        if array.size > HEAD and array.flags.c_contiguous:
            head = array.reshape(-1)[:HEAD]
            if np.isnan(head).any() if nan_only else not np.isfinite(head).all():
                return True
        quick = array.sum(dtype=np.float32 if array.dtype == np.float16 else None)
        if math.isfinite(quick):
            return False
    if nan_only:
        return bool(np.isnan(array).any())
    return not bool(np.isfinite(array).all())


def nonfinite_counts(array: Any) -> Dict[str, int]:
    """{'nan': n, 'inf': m} of a tensor (zeros for non-float tensors)."""
    array = float_values(array)
    if not is_bad(array):
        return {"nan": 0, "inf": 0}
    return {"nan": int(np.isnan(array).sum()), "inf": int(np.isinf(array).sum())}


def tensor_stats(name: str, array: Any, source: str = "computed") -> TensorStats:
    """Min/max over finite values, counts of zeros, negatives, NaN and Inf (of the numbers inside, for a
    sequence or map: its dtype reads seq(...)/map(...), its shape [length])."""
    if isinstance(array, (list, tuple, dict)):
        shown = layout(array)
        inner = tensor_stats(name, float_values(array), source)
        return replace(inner, dtype=shown.dtype, shape=list(shown.shape)) if inner.count else \
            TensorStats(name=name, dtype=shown.dtype, shape=list(shown.shape), count=0, source=source)
    if not isinstance(array, np.ndarray):
        return TensorStats(name=name, dtype=type(array).__name__, shape=[], count=0, source=source)
    if is_numeric_tensor(array) and array.dtype.kind not in "fiub" or array.dtype.name == "float8_e5m2":
        # bfloat16, float8, int4...: measured on their values, named as ONNX names the type
        return replace(tensor_stats(name, numeric_value(array), source), dtype=layout(array).dtype)
    shape = [int(d) for d in array.shape]
    if array.dtype.kind not in "fiub" or array.size == 0:
        return TensorStats(name=name, dtype=str(array.dtype), shape=shape, count=int(array.size), source=source)
    nan = inf = 0
    values = array
    if array.dtype.kind == "f" and is_bad(array):
        finite = np.isfinite(array)
        nan = int(np.isnan(array).sum())
        inf = int(array.size - finite.sum() - nan)
        values = array[finite]
    lo: Optional[float] = float(values.min()) if values.size else None
    hi: Optional[float] = float(values.max()) if values.size else None
    zeros = int(np.count_nonzero(array == 0))
    negatives = int(np.count_nonzero(array < 0)) if array.dtype.kind in "fi" else 0
    return TensorStats(name=name, dtype=str(array.dtype), shape=shape, count=int(array.size), nan=nan, inf=inf,
                       zeros=zeros, negatives=negatives, min=lo, max=hi, source=source)


def fp16_range(array: Any) -> Optional[Dict[str, float]]:
    """How an fp32 tensor would fare in fp16: max |x|, elements above 65504, non-zero elements that
    would flush to zero, and non-zero elements in all. None for non-float tensors."""
    if not is_float(array) or array.size == 0:
        return None
    magnitude = np.abs(array[np.isfinite(array)]) if is_bad(array) else np.abs(array)
    if magnitude.size == 0:
        return None
    nonzero = magnitude[magnitude > 0]
    return {"max_abs": float(magnitude.max()), "overflow": int(np.count_nonzero(magnitude > FP16_MAX)),
            "underflow": int(np.count_nonzero(nonzero < FP16_TINY)), "nonzero": int(nonzero.size),
            "total": int(array.size)}
