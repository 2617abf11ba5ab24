"""Quantisation parameters: where QOperator ops keep their output scale, and dequantising in numpy."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

# Output quantisation parameters of QOperator ops: op -> (index of y_scale, index of y_zero_point).
QOP_OUTPUT_PARAMS = {
    "QLinearConv": (6, 7), "QLinearMatMul": (6, 7), "QLinearAdd": (6, 7), "QLinearMul": (6, 7),
    "QGemm": (7, 8), "QLinearGlobalAveragePool": (3, 4), "QLinearAveragePool": (3, 4),
    "QLinearSigmoid": (3, 4), "QLinearLeakyRelu": (3, 4), "QLinearSoftmax": (3, 4), "QLinearReduceMean": (3, 4),
    "QLinearConcat": (0, 1), "QLinearWhere": (7, 8),
}
# Quantised inputs of QOperator ops: op -> ((input, scale, zero point) index triples). A tensor read there
# is quantised with those parameters, also where nothing quantised it in the graph (a Gather on int8 weights).
QOP_INPUT_PARAMS = {
    "QLinearConv": ((0, 1, 2),), "QLinearMatMul": ((0, 1, 2), (3, 4, 5)), "QLinearAdd": ((0, 1, 2), (3, 4, 5)),
    "QLinearMul": ((0, 1, 2), (3, 4, 5)), "QGemm": ((0, 1, 2), (3, 4, 5)), "QLinearGlobalAveragePool": ((0, 1, 2),),
    "QLinearAveragePool": ((0, 1, 2),), "QLinearSigmoid": ((0, 1, 2),), "QLinearLeakyRelu": ((0, 1, 2),),
    "QLinearSoftmax": ((0, 1, 2),), "QLinearReduceMean": ((0, 1, 2),), "QLinearWhere": ((1, 2, 3), (4, 5, 6)),
}


def qop_input_params(op_type: str, n_inputs: int) -> tuple:
    """The (input, scale, zero point) index triples of a QOperator op with `n_inputs` inputs
    (QLinearConcat: y_scale, y_zero_point, then one triple per input)."""
    if op_type == "QLinearConcat":
        return tuple((k, k + 1, k + 2) for k in range(2, n_inputs - 2, 3))
    return QOP_INPUT_PARAMS.get(op_type, ())


# Ops that move quantised integers without changing their scale (the value keeps its parameters).
INT_PASSTHROUGH = frozenset({"MaxPool", "NhwcMaxPool", "Transpose", "Slice", "Gather", "Split", "Pad", "Resize",
                             "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat", "Expand", "Tile",
                             "DepthToSpace", "SpaceToDepth"})


@dataclass(frozen=True)
class QuantSpec:
    """How integers of a quantised tensor map to floats: (q - zero_point) * scale along `axis`."""

    scale: str
    zero_point: Optional[str]
    axis: int = 1


def dequantize(values: np.ndarray, scale: Optional[np.ndarray], zero: Optional[np.ndarray], axis: int = 1,
               out: Optional[np.ndarray] = None) -> np.ndarray:
    """(values - zero) * scale in float32; per-channel parameters broadcast along `axis`.

    The one dequantisation of the package (compare's captures, validate's weight checks). float32
    because the dequantised values are compared with float32 tensors: its rounding (2^-24
    relative) is some 100 dB below int8 quantisation noise, so SQNR figures do not move.
    """
    if scale is None:
        raise ValueError("quantisation scale is not a stored constant")
    scale32 = np.asarray(scale, dtype=np.float32)
    zero32 = np.asarray(zero if zero is not None else 0, dtype=np.float32)
    if scale32.ndim == 1 and scale32.size > 1 and values.ndim > 1:
        shape = [1] * values.ndim
        shape[axis % values.ndim] = scale32.size
        scale32 = scale32.reshape(shape)
        zero32 = zero32.reshape(shape) if zero32.size > 1 else zero32
    if out is None or out.shape != values.shape:
        out = np.empty(values.shape, dtype=np.float32)
    np.subtract(values, zero32, out=out, dtype=np.float32, casting="unsafe")
    np.multiply(out, scale32, out=out)
    return out

