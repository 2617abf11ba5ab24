"""Intentional infinities: attention masks and clamp bounds, found by tracing the data-flow.

Every decoder export fills the positions a query may not attend to with -inf (or the dtype's lowest
finite value) before a `Softmax`, which turns them into 0: torch's SDPA export builds
`Where(causal, 0, -inf)` and adds it to the scores; eager GPT-2 uses `Where(causal, scores,
finfo.min)`; BERT-style models `(1 - mask) * finfo.min`. Those values are no NaN/Inf birth and
their constant is no weight defect. This module finds them once per model (shared by `probe` and
`nan-bisect`) and says, per tensor and sample, which of its infinities are masked values.

The rules (docs/guide/nan-bisect.md, "Masks"):

* a **fill** is a float constant (initializer or Constant node) without NaN holding at least one
  *extreme* value: +-inf or beyond half the dtype's largest finite value, all of one sign;
* from a fill the trace follows `Where` (as a value, not the condition), `Add`/`Sub`/`Mul`/`Div`,
  `Max`/`Min`/`Clip`, and the ops that move a mask (`Expand`, `Reshape`, `Cast`, `Slice`,
  `Unsqueeze`, `Squeeze`, `Transpose`, `Concat`, `Gather`, `Tile`...); it is a mask only when it
  reaches a `Softmax` (or the fill is the bound of a `Max`/`Min`/`Clip` clamp), and only the
  tensors on such a route are on the mask path;
* **masked values** of a path tensor are its infinities of the fill's sign at the positions the
  mask sets: for a tensor computed from constants and conditions only (the mask itself) every
  extreme value; for data with a mask applied (the scores) the positions are carried from the
  mask through each node (`Where` picks them by its condition, element-wise ops take the union,
  reshapes move them). An Inf elsewhere in the same tensor (an overflow), a NaN, or an Inf of the
  other sign is not masked. When a tensor the positions need is not at hand, the fill-signed
  infinities of the tensor count as masked (`MaskAnalysis.positions` returns None and says so);
* a **guarded row**: the NaN a Softmax makes of a row masked at every position is intended when
  the one reader of its output (through Cast/Identity) is a `Where` that replaces exactly those rows,
  its condition a comparison on the mask (the ONNX `Attention` function's `RowAllMasked` guard), and
  the NaN lie exactly in those rows.

The same analysis carries a reduction's identity over an empty set (core/identities.py), so that
`intended` answers for every infinity a model makes on purpose.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple

import numpy as np

from .graph import ModelGraph
from .identities import EmptyReduction, find_empty_reductions, identity_count
from .maskops import COMPARES, ELEMENTWISE, ENDS, RESHAPES, SAME, Mask, extreme, fill_sign
from .maskscan import scan_masks

Values = Mapping[str, np.ndarray]
__all__ = ["Mask", "MaskAnalysis", "extreme", "fill_sign", "find_masks"]


@dataclass
class MaskAnalysis:
    """The masks of one model, and which values of each tensor on their paths are masked."""

    graph: ModelGraph
    masks: List[Mask] = field(default_factory=list)
    constant_values: Dict[str, np.ndarray] = field(default_factory=dict)
    """Each fill's value (small: read once)."""
    sign: Dict[str, int] = field(default_factory=dict)
    """Path tensors (fills included) -> the sign of their masked values."""
    pure: Set[str] = field(default_factory=set)
    """Path tensors computed from constants and conditions only (the mask itself, no data)."""
    mask_of: Dict[str, int] = field(default_factory=dict)
    """Path tensor or node -> index into `masks`."""
    rows_of: Dict[str, str] = field(default_factory=dict)
    """A Softmax ending a mask: its output and the Cast/Identity copies of it -> the Softmax (they
    hold its fully masked rows' NaN)."""
    guards: Dict[str, str] = field(default_factory=dict)
    """Softmax -> the Where that replaces its fully masked rows (see the module docstring)."""
    empty: Dict[str, EmptyReduction] = field(default_factory=dict)
    """Tensors that may hold a reduction's identity over an empty set (core/identities.py)."""

    # ---- queries ----------------------------------------------------------------------------------
    def __bool__(self) -> bool:
        return bool(self.masks or self.empty)

    def on_path(self, tensor: str) -> bool:
        return tensor in self.sign and tensor not in self.constant_values

    def is_fill(self, tensor: str) -> bool:
        return tensor in self.constant_values

    def mask(self, name: str) -> Optional[Mask]:
        index = self.mask_of.get(name)
        return None if index is None else self.masks[index]

    def softmax_inputs(self) -> Dict[str, str]:
        """Softmax node -> its input on the mask path."""
        found: Dict[str, str] = {}
        for mask in self.masks:
            for end in mask.ends:
                node = self.graph.node_by_name[end]
                if node.op_type in ENDS and node.inputs and node.inputs[0] in self.sign:
                    found[end] = node.inputs[0]
        return found

    def needs(self, tensors: Iterable[str]) -> List[str]:
        """Tensors (not among `tensors`; computed ones and graph inputs) whose values the positions of
        `tensors` need."""
        wanted: List[str] = []
        seen: Set[str] = set()
        stack = [t for t in tensors if self.on_path(t)]
        while stack:
            name = stack.pop()
            if name in seen or name in self.pure or self.is_fill(name):
                continue
            seen.add(name)
            node = self.graph.producer.get(name)
            if node is None:
                continue
            for position, inp in enumerate(node.inputs):
                if not inp or inp in self.graph.initializer_names:
                    continue
                if inp in self.sign or (node.op_type == "Where" and position == 0):
                    if inp not in seen and not self.is_fill(inp):
                        wanted.append(inp)
                    stack.append(inp)
        given = set(tensors)
        inputs = set(self.graph.input_names)
        return [t for t in dict.fromkeys(wanted) if t not in given and (t in self.graph.producer or t in inputs)]

    def positions(self, tensor: str, values: Values,
                  cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> Optional[np.ndarray]:
        """The elements of `tensor` the mask sets (bool, its shape); None when a value it needs is
        missing or an op moves positions in a way not followed (then see `masked_count`)."""
        cache = {} if cache is None else cache
        if tensor in cache:
            return cache[tensor]
        value = self._value(tensor, values)
        result: Optional[np.ndarray] = None
        if value is not None and tensor in self.sign:
            sign = self.sign[tensor]
            if tensor in self.pure or self.is_fill(tensor):
                result = extreme(value, sign)
            else:
                carried = self._carried(tensor, value, values, cache)
                result = None if carried is None else carried & extreme(value, sign)
        cache[tensor] = result
        return result

    def masked_count(self, tensor: str, value: np.ndarray, values: Values,
                     cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> Tuple[int, bool]:
        """(number of masked infinities in `value`, whether their positions were known)."""
        if not self.on_path(tensor) or value.dtype.kind != "f":
            return 0, True
        infinite = np.isinf(value) & (value < 0 if self.sign[tensor] < 0 else value > 0)
        where = self.positions(tensor, {**values, tensor: value}, cache)
        if where is None:
            return int(np.count_nonzero(infinite)), False
        return int(np.count_nonzero(infinite & where)), True

    def only_masked(self, tensor: str, value: np.ndarray, values: Values,
                    cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> bool:
        """Are all the non-finite values of `value` masked values (and there are some)?"""
        if not self.on_path(tensor) or value.dtype.kind != "f":
            return False
        bad = int(value.size - np.count_nonzero(np.isfinite(value)))
        masked, _ = self.masked_count(tensor, value, values, cache)
        return bad > 0 and masked == bad

    def intended(self, tensor: str, value: np.ndarray, values: Values,
                 cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> bool:
        """Is every non-finite value of `tensor` intended: a fill constant, only masked values, a
        Softmax's fully masked rows its guard replaces, or a reduction's identity over an empty set?"""
        if self.is_fill(tensor) or self.only_masked(tensor, value, values, cache):
            return True
        if tensor in self.empty and self.identities(tensor, value, values) == value.size:
            return True
        return self.guarded_rows(tensor, value, values, cache) > 0

    def identities(self, tensor: str, value: np.ndarray, values: Values) -> int:
        """The infinities of `value` that are a reduction's identity over an empty set (0 or all)."""
        entry = self.empty.get(tensor)
        return 0 if entry is None else identity_count(self.graph, entry, np.asarray(value), values)

    def guarded_rows(self, tensor: str, value: np.ndarray, values: Values,
                     cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> int:
        """The fully masked rows of the Softmax `tensor` carries when its guard replaces them and its NaN
        lie exactly there (nothing else non-finite); else 0."""
        softmax = self.rows_of.get(tensor)
        if softmax is None or softmax not in self.guards or value.dtype.kind != "f":
            return 0
        rows, exact = self.row_nan(tensor, value, values, cache)
        return rows if exact and not np.isinf(value).any() else 0

    def row_nan(self, tensor: str, value: np.ndarray, values: Values,
                cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> Tuple[int, bool]:
        """(fully masked rows of the Softmax whose output `tensor` carries, whether the NaN of `value`
        are exactly those rows); (0, False) when the Softmax's input is not at hand."""
        softmax = self.rows_of.get(tensor)
        source = None if softmax is None else values.get(self.graph.node_by_name[softmax].inputs[0])
        if softmax is None or source is None or value.dtype.kind != "f":
            return 0, False
        found = self._dead_rows(softmax, np.asarray(source), values, cache)
        if found is None:
            return 0, False
        dead, rows = found
        return rows, dead.shape == value.shape and bool(np.array_equal(np.isnan(value), dead))

    def fully_masked_rows(self, softmax: str, value: np.ndarray, values: Values,
                          cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> int:
        """Rows of a Softmax's input (along its axis) that are -inf at every position, all masked:
        the Softmax of such a row is 0/0 = NaN."""
        found = self._dead_rows(softmax, value, values, cache)
        return 0 if found is None else found[1]

    def _dead_rows(self, softmax: str, value: np.ndarray, values: Values,
                   cache: Optional[Dict[str, Optional[np.ndarray]]] = None) -> Optional[Tuple[np.ndarray, int]]:
        """The Softmax input's fully masked rows: a bool array of its shape (True across each such
        row: where the Softmax makes NaN) and their number; None for an input that is not a float
        tensor with elements."""
        node = self.graph.node_by_name[softmax]
        if value.dtype.kind != "f" or value.ndim == 0 or value.size == 0:
            return None
        where = self.positions(node.inputs[0], {**values, node.inputs[0]: value}, cache)
        dead = np.isneginf(value) & (where if where is not None else True)
        axis = int(self.graph.node_attribute(softmax, "axis", -1 if self.graph.opset >= 13 else 1))  # type: ignore[arg-type]
        axis = axis % value.ndim
        if self.graph.opset < 13:  # the input is coerced to 2-D at `axis`
            rows = dead.reshape(int(np.prod(value.shape[:axis], dtype=np.int64)), -1).all(axis=1, keepdims=True)
            width = int(value.size) // max(1, rows.shape[0])
            return np.broadcast_to(rows, (rows.shape[0], width)).reshape(value.shape), int(np.count_nonzero(rows))
        rows = dead.all(axis=axis, keepdims=True)
        return np.broadcast_to(rows, value.shape), int(np.count_nonzero(rows))

    # ---- carrying positions through one node ------------------------------------------------------
    def _value(self, tensor: str, values: Values) -> Optional[np.ndarray]:
        if tensor in self.constant_values:
            return self.constant_values[tensor]
        value = values.get(tensor)
        return np.asarray(value) if value is not None else None

    def _carried(self, tensor: str, value: np.ndarray, values: Values,
                 cache: Dict[str, Optional[np.ndarray]]) -> Optional[np.ndarray]:
        node = self.graph.producer.get(tensor)
        if node is None:
            return None
        shape = value.shape
        inputs: List[Optional[np.ndarray]] = []
        for inp in node.inputs:
            if inp and inp in self.sign:
                where = self.positions(inp, values, cache)
                if where is None:
                    return None
                inputs.append(where)
            else:
                inputs.append(None)  # data: the mask sets none of its positions
        op = node.op_type
        try:
            if op == "Where":
                condition = self._value(node.inputs[0], values)
                if condition is None:
                    return None
                picked = [np.zeros((), bool) if p is None else p for p in inputs[1:3]]
                return np.broadcast_to(np.where(condition.astype(bool), picked[0], picked[1]), shape)
            if op in ELEMENTWISE:
                union = np.zeros(shape, bool)
                for where in inputs:
                    if where is not None:
                        union = union | np.broadcast_to(where, shape)
                return union
            first = inputs[0]
            if first is None:
                return None
            if op in SAME:
                return first
            if op in RESHAPES:
                return first.reshape(shape)
            if op == "Expand":
                return np.broadcast_to(first, shape)
            if op == "Transpose":
                perm = self.graph.node_attribute(node.name, "perm", None)
                return first.transpose(list(perm) if perm is not None else None)  # type: ignore[arg-type]
        except ValueError:
            return None
        return None  # Slice, Gather, Concat, Tile of masked data: positions not followed


def find_masks(graph: ModelGraph) -> MaskAnalysis:
    """The masks of `graph`'s top level (see the module docstring for the rules); computed once per
    graph object (probe and nan-bisect ask from the workflow and from each engine part)."""
    cached = graph.__dict__.get(_CACHE)
    if isinstance(cached, MaskAnalysis):
        return cached
    analysis = MaskAnalysis(graph)
    for group in scan_masks(graph):
        index = len(analysis.masks)
        mask = group.mask
        analysis.masks.append(mask)
        for name in (*mask.constants, *mask.nodes, *mask.tensors):
            analysis.mask_of[name] = index
        analysis.constant_values.update(group.values)
        analysis.sign.update(group.signs)
        analysis.pure.update(group.pure)
        for name in mask.inputs:
            analysis.mask_of[name] = index
    _find_row_guards(analysis)
    analysis.empty = find_empty_reductions(graph)
    graph.__dict__[_CACHE] = analysis
    return analysis


def _find_row_guards(analysis: MaskAnalysis) -> None:
    """Fill `rows_of` and `guards`: each Softmax ending a mask, the Cast/Identity copies of its output
    and the Where (if any) that replaces its fully masked rows."""
    graph = analysis.graph
    for mask in analysis.masks:
        for end in mask.ends:
            node = graph.node_by_name[end]
            if node.op_type not in ENDS or not node.outputs or not node.outputs[0]:
                continue
            tensor = node.outputs[0]
            analysis.rows_of[tensor] = end
            while True:
                readers = [(c, [i for i, t in enumerate(c.inputs) if t == tensor])
                           for c in graph.consumers.get(tensor, [])]
                # CastLike's second input and Shape read the type or shape only, not the values
                readers = [(c, at) for c, at in readers
                           if not (c.op_type == "CastLike" and at == [1]) and c.op_type not in ("Shape", "Size")]
                if len(readers) != 1:
                    break
                reader, at = readers[0]
                if reader.op_type in SAME and at == [0] and reader.outputs and reader.outputs[0]:
                    tensor = reader.outputs[0]
                    analysis.rows_of[tensor] = end
                    continue
                if reader.op_type == "Where" and _tests_the_mask(analysis, reader.inputs[0], at):
                    analysis.guards[end] = reader.name
                break


def _tests_the_mask(analysis: MaskAnalysis, condition: str, at: List[int]) -> bool:
    """Is `condition` a comparison that ends a mask (or its negation), such that a Where reading the
    Softmax rows at input positions `at` replaces them where the comparison holds?"""
    producer = analysis.graph.producer.get(condition)
    negated = producer is not None and producer.op_type == "Not"
    if negated and producer is not None:
        producer = analysis.graph.producer.get(producer.inputs[0])
    if producer is None or producer.op_type not in COMPARES or producer.name not in analysis.mask_of:
        return False
    return at == ([1] if negated else [2])


_CACHE = "_mi_masks"

