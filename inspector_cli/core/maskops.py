"""The vocabulary of the mask analysis (core/maskscan.py, core/masks.py): which ops carry a mask's
values, which end it, and the `Mask` a scan finds. Pure data and small array tests, no graph walk."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
import onnx

from .topology import NodeInfo

FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Clip"}
"""Ops whose output position i is computed from the inputs' position i (with broadcasting)."""
SAME = {"Cast", "CastLike", "Identity"}
RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}
MOVES = {"Expand", "Transpose", "Slice", "Gather", "Concat", "Tile", "Pad", "Trilu"} | RESHAPES | SAME
"""Ops that move a mask's values without arithmetic (Pad may also fill with one: its constant_value;
Trilu keeps a triangle of it: `triu(full(-inf), 1)`, the causal mask of nn.Transformer)."""
REDUCES = {"ReduceMax", "ReduceMin"}
"""A row's extreme of a mask is a mask (the ONNX Attention function reads ReduceMax of its bias)."""
PATH_OPS = ELEMENTWISE | MOVES | REDUCES | {"Where"}
CLAMPS = {"Max", "Min", "Clip"}
ENDS = {"Softmax"}
COMPARES = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "IsInf"}
"""Tests of a mask's values: its infinities end in a boolean, never in arithmetic."""
ATTENTION_MASK_INPUTS: Dict[Tuple[str, str], Tuple[int, ...]] = {
    ("", "Attention"): (3,),                                         # attn_mask (opset 23)
    ("com.microsoft", "Attention"): (5,),                            # attention_bias
    ("com.microsoft", "MultiHeadAttention"): (5,),
    ("com.microsoft", "GroupQueryAttention"): (10,),
    ("com.microsoft", "PackedAttention"): (5,),
    ("com.microsoft", "PackedMultiHeadAttention"): (6,),
    ("com.microsoft", "DecoderMaskedSelfAttention"): (5,),
    ("com.microsoft", "DecoderMaskedMultiHeadAttention"): (4,),
    ("com.microsoft", "LongformerAttention"): (3,),                  # mask
    ("com.microsoft", "QOrderedAttention"): (19,),
}
"""Fused attention ops and their float inputs added to the scores before the softmax inside
(onnxruntime's contrib schemas; tests/core/test_mask_spellings.py checks them against the installed
onnxruntime): a mask that reaches one ends there."""
_ATTENTION_OPS = {op for _, op in ATTENTION_MASK_INPUTS}
DATA_INPUTS = {"Where": (1, 2), "Expand": (0,), "Reshape": (0,), "Slice": (0,), "Gather": (0,), "Tile": (0,),
               "Unsqueeze": (0,), "Squeeze": (0,), "Clip": (0, 1, 2), "CastLike": (0,), "Pad": (0, 2),
               "ReduceMax": (0,), "ReduceMin": (0,), "Trilu": (0,)}
"""Inputs through which a mask's values travel (a Where's condition, a Reshape's shape or CastLike's
type source carry none)."""
MAX_CONSTANT_ELEMENTS = 1 << 22
"""Constants read to look for a fill (a causal buffer of 2048 x 2048 is 4 M); larger ones are weights."""


def extreme(array: np.ndarray, sign: int) -> np.ndarray:
    """Elements that are +-inf or beyond half the dtype's largest finite value, of `sign` (bool array)."""
    if array.dtype.kind != "f":
        return np.zeros(array.shape, bool)
    big = float(np.finfo(array.dtype).max) / 2
    with np.errstate(invalid="ignore"):
        return array <= -big if sign < 0 else array >= big


def fill_sign(array: np.ndarray) -> int:
    """-1 or +1 when `array` is a fill (no NaN, extreme values all of one sign), else 0."""
    if array.dtype.kind != "f" or array.size == 0 or np.isnan(array).any():
        return 0
    low, high = bool(extreme(array, -1).any()), bool(extreme(array, 1).any())
    return -1 if low and not high else 1 if high and not low else 0


@dataclass(frozen=True)
class Mask:
    """One mask: its fill constants, the nodes it crosses and the Softmax (or clamp) that ends it."""

    fill: float
    """The extreme value of the fill (e.g. -inf or -3.4028235e38)."""
    constants: Tuple[str, ...]
    nodes: Tuple[str, ...]
    """Every node on the mask path, in topological order (the Softmax and clamps included)."""
    ends: Tuple[str, ...]
    """The nodes where the masked values stop: Softmax (0 weight), comparisons, a fused attention op's
    mask input, the clamps bounded by a fill."""
    tensors: Tuple[str, ...]
    """Computed tensors on the mask path (the Softmax outputs are not: they hold no masked value)."""
    inputs: Tuple[str, ...] = ()
    """Graph inputs that carry the mask (an additive attention mask the caller fills with -inf)."""

    def describe(self) -> str:
        """One line naming the fill, its constants and the nodes the mask runs through."""
        def names(items: Tuple[str, ...], limit: int = 4) -> str:
            return ", ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")

        inner = tuple(n for n in self.nodes if n not in self.ends)
        sources = (*self.constants, *(f"input {i}" for i in self.inputs))
        through = f" through {names(inner)}" if inner else ""
        return f"mask of {self.fill:g} from {names(sources, 2)}{through} to {names(self.ends, 2)}"


def end_inputs(node: NodeInfo) -> Optional[Tuple[int, ...]]:
    """The inputs at which `node` ends a mask (None: it does not)."""
    op = node.op_type
    if op in ENDS:
        return (0,)
    if op in COMPARES:
        return tuple(range(len(node.inputs)))
    if op not in _ATTENTION_OPS:  # most nodes: no tuple built, no domain read
        return None
    return ATTENTION_MASK_INPUTS.get((node.domain if node.domain != "ai.onnx" else "", op))


COPIES = SAME | RESHAPES | {"Transpose", "Expand"}
"""Moves whose output positions follow from the input's exactly."""
