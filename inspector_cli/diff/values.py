"""Values that are not numeric tensors, reduced to the same `PairStats` as tensors (issue 29).

onnxruntime returns a string tensor as an object (or unicode) array, a sequence as a list, a map as
a dict and a `seq(map)` (ai.onnx.ml ZipMap: one {class: probability} per row) as a list of dicts.
Where numbers are inside, the metrics apply to them: a sequence of tensors is compared element by
element and the sums merged (one cosine over the whole sequence); a map, or a list of maps with one
key set, is read as the vector (matrix) of its values in sorted key order, so ZipMap probabilities
keep KL and top-k. Where no number is (strings, labels, keys), values are compared for equality:
`PairStats.items` compared, `items_unequal` differing, and the first difference (where, a, b).

A structure that differs (another sequence length, an element shape, a key set) is no value to
compare: `reduce_values` then returns None, as a shape mismatch of two tensors does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.elemtypes import elem_type_of, is_typed, widen
from ..core.types import onnx_dtype_name
from .metrics import DEFAULT_TOPK, PairStats, compare_arrays, shapes_compatible

SHOWN_CHARS = 40
"""A differing string is shown up to this many characters (then '...')."""


@dataclass(frozen=True)
class Layout:
    """What a value is, as results show it: `dtype` (a numpy dtype name for numeric tensors, `string`,
    `seq(...)`, `map(...)`) and `shape` (a tensor's shape; a sequence's length; a map's key count)."""

    dtype: str
    shape: Tuple[int, ...]


def is_numeric_tensor(value: Any) -> bool:
    """A numpy array of numbers or booleans (bfloat16, float8, int4... included): the tensor metrics apply."""
    return isinstance(value, np.ndarray) and (value.dtype.kind in "biuf" or is_typed(value))


def numeric(value: np.ndarray) -> np.ndarray:
    """A numeric tensor in a numpy type: an ml_dtypes array (bfloat16, float8, int4...) widened to the exact
    values in float64 (int64 for int4/int2), so every metric is computed from the values, never the codes."""
    return widen(value) if is_typed(value) else value


def numeric_value(value: Any) -> Any:
    """`numeric(value)` for an ml_dtypes array, any other value as it is."""
    return widen(value) if is_typed(value) else value


def layout(value: Any) -> Layout:
    """The dtype label and shape of any value onnxruntime returns (or a golden file holds); an element type
    numpy lacks is named as ONNX names it ('float8e4m3fn', 'bfloat16', 'int4')."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OUS":
            return Layout("string", tuple(value.shape))
        elem = elem_type_of(value.dtype)
        return Layout(onnx_dtype_name(elem) if elem is not None else str(value.dtype), tuple(value.shape))
    if isinstance(value, dict):
        return Layout(_map_label(value), (len(value),))
    if isinstance(value, (list, tuple)):
        inner = layout(value[0]).dtype if value else "?"
        inner = f"tensor({inner})" if value and isinstance(value[0], np.ndarray) else inner
        return Layout(f"seq({inner})", (len(value),))
    return Layout(type(value).__name__, ())


def _map_label(value: Dict[Any, Any]) -> str:
    if not value:
        return "map(?)"
    key, item = next(iter(value.items()))
    key_type = "string" if isinstance(key, (str, bytes)) else "int64"
    item_type = "string" if isinstance(item, (str, bytes)) else "float32" if isinstance(item, float) else \
        layout(np.asarray(item)).dtype
    return f"map({key_type},{item_type})"


def reduce_values(a: Any, b: Any, *, topk: Sequence[int] = DEFAULT_TOPK,
                  distribution: bool = True) -> Optional[PairStats]:
    """The sums of comparing reference `a` with candidate `b`, whatever they are; None when their
    structure differs (shapes, sequence lengths, key sets)."""
    if is_numeric_tensor(a) and is_numeric_tensor(b):
        if not shapes_compatible(a.shape, b.shape):
            return None
        return compare_arrays(numeric(a), numeric(b), topk=topk, distribution=distribution)
    stats = _reduce(a, b, "", topk, distribution)
    if stats is not None:
        stats.samples = 1
    return stats


def _reduce(a: Any, b: Any, where: str, topk: Sequence[int], distribution: bool) -> Optional[PairStats]:
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return None
        keys = sorted(a, key=_sort_key)
        return _reduce(_as_values([a[k] for k in keys]), _as_values([b[k] for k in keys]), where, topk, distribution)
    if _is_sequence(a) and _is_sequence(b):
        if len(a) != len(b):
            return None
        rows = _map_rows(a, b)
        if rows is not None:  # ZipMap: a list of {class: probability}, one key set: the probability matrix
            return _reduce(rows[0], rows[1], where, topk, distribution)
        total = PairStats()
        for index, (x, y) in enumerate(zip(a, b)):
            part = _reduce(x, y, f"{where}[{index}]", topk, distribution)
            if part is None:
                return None
            samples = total.samples
            total.merge(part)
            total.samples = samples
        return total
    if is_numeric_tensor(a) and is_numeric_tensor(b):
        if not shapes_compatible(a.shape, b.shape):
            return None
        return compare_arrays(numeric(a), numeric(b), topk=topk, distribution=distribution)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        arr_a, arr_b = np.asarray(a), np.asarray(b)
        if arr_a.dtype.kind == "O" and arr_a.size and not _scalar_items(arr_a):
            return None  # an object array of something else (nested structures): not one value
        if not shapes_compatible(arr_a.shape, arr_b.shape):
            return None
        return _equality(arr_a.reshape(-1), arr_b.reshape(-1), arr_a.shape, where)
    if type(a) is not type(b) and not (_is_number(a) and _is_number(b)):
        return None
    return _equality(np.array([a], dtype=object), np.array([b], dtype=object), (), where)


def _equality(flat_a: np.ndarray, flat_b: np.ndarray, shape: Tuple[int, ...], where: str) -> PairStats:
    """Item-by-item equality of two flat arrays (strings compared as text: bytes decoded as UTF-8)."""
    stats = PairStats()
    text_a, text_b = [_text(x) for x in flat_a.tolist()], [_text(x) for x in flat_b.tolist()]
    unequal = [i for i, (x, y) in enumerate(zip(text_a, text_b)) if x != y]
    stats.items, stats.items_unequal = len(text_a), len(unequal)
    if unequal:
        first = unequal[0]
        index = np.unravel_index(first, shape) if len(shape) > 1 else ((first,) if shape else ())
        at = where + "".join(f"[{int(i)}]" for i in index)
        stats.first_unequal = (at or "value", _shown(text_a[first]), _shown(text_b[first]))
    return stats


def _text(item: Any) -> Any:
    if isinstance(item, bytes):
        return item.decode("utf-8", errors="surrogateescape")
    if isinstance(item, np.generic):
        return item.item()
    return item


def _shown(item: Any) -> str:
    text = repr(item)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


def _scalar_items(array: np.ndarray) -> bool:
    first = array.reshape(-1)[0]
    return isinstance(first, (str, bytes, int, float, bool, np.generic))


def _sort_key(key: Any) -> Tuple[int, Any]:
    return (0, key) if _is_number(key) else (1, _text(key))


def _as_values(items: List[Any]) -> np.ndarray:
    """The values of a map in key order: a float array when they are numbers, else an object array."""
    if items and all(_is_number(x) for x in items):
        return np.asarray(items, dtype=np.float64 if any(isinstance(x, float) for x in items) else np.int64)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _map_rows(a: Sequence[Any], b: Sequence[Any]) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """A list of maps with one key set and numeric values on both sides -> two [rows, keys] matrices."""
    if not a or not all(isinstance(x, dict) for x in list(a) + list(b)):
        return None
    keys = set(a[0])
    if any(set(x) != keys for x in list(a) + list(b)):
        return None
    order = sorted(keys, key=_sort_key)
    if not all(_is_number(x[k]) for x in list(a) + list(b) for k in order):
        return None
    return (np.array([[x[k] for k in order] for x in a], np.float64),
            np.array([[x[k] for k in order] for x in b], np.float64))


def numbers_inside(value: Any) -> Tuple[Optional[np.ndarray], int]:
    """The numbers a non-tensor value holds, flat (a sequence's tensors one after another, a map's values,
    a ZipMap's probabilities row by row), and how many items it has (elements, keys, strings); None for
    the numbers when it holds none (strings, labels): such a value is counted, not measured."""
    if isinstance(value, np.ndarray):
        if is_numeric_tensor(value):
            return numeric(value).reshape(-1), int(value.size)
        return None, int(value.size)
    if isinstance(value, dict):
        values = _as_values([value[k] for k in sorted(value, key=_sort_key)])
        return (values if values.dtype.kind in "biuf" else None), len(value)
    if _is_sequence(value):
        parts = [numbers_inside(x)[0] for x in value]
        found = [p for p in parts if p is not None]
        if not found:
            return None, len(value)
        return np.concatenate([p.astype(np.float64, copy=False) if p.dtype != found[0].dtype else p for p in found]), \
            len(value)
    if _is_number(value):
        return np.asarray([value], dtype=np.float64), 1
    return None, 1


def numeric_leaves(value: Any) -> List[np.ndarray]:
    """The numbers inside any value, as arrays in a fixed order: a numeric tensor itself; a map's values
    in sorted key order; a sequence's elements in turn; nothing for strings (the fix-it tier's
    finiteness checks and tolerances read these; equality covers the rest: `reduce_values`)."""
    if is_numeric_tensor(value):
        return [numeric(value)]
    if isinstance(value, dict):
        values = _as_values([value[k] for k in sorted(value, key=_sort_key)])
        return [values] if values.dtype.kind in "biuf" else [x for v in values for x in numeric_leaves(v)]
    if _is_sequence(value):
        return [x for item in value for x in numeric_leaves(item)]
    return []


def all_finite(value: Any) -> bool:
    """No NaN or Inf among the numbers of `value` (strings and empty values are finite)."""
    return all(bool(np.isfinite(np.asarray(x, dtype=np.float64)).all()) for x in numeric_leaves(value))
