"""Small shared types: tensor maps, tensor descriptions and ONNX/numpy dtype mapping."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union

import numpy as np

TensorMap = Dict[str, np.ndarray]
"""Tensor name -> value, the currency between runner, capture and diff engine."""

Dim = Union[int, str, None]
"""One dimension: a size, a symbolic name, or None when unknown."""

# ONNX TensorProto.DataType -> numpy dtype name. Kept as strings so this module needs no onnx import.
_ONNX_TO_NUMPY: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "str", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16",
}
_ONNX_NAMES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
    19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0",
    25: "uint2", 26: "int2",
}
_ORT_TYPE_TO_NUMPY = {f"tensor({v if v != 'float32' else 'float'})": v for v in _ONNX_TO_NUMPY.values()}
_ORT_TYPE_TO_NUMPY.update({"tensor(float)": "float32", "tensor(double)": "float64", "tensor(string)": "str"})


def onnx_dtype_name(elem_type: int) -> str:
    """Readable name of an ONNX element type ('float32', 'int8', ...; 'undefined' for 0)."""
    return _ONNX_NAMES.get(elem_type, "undefined" if elem_type == 0 else f"type{elem_type}")


def numpy_dtype_for(elem_type: int) -> Optional[np.dtype]:
    """numpy dtype of an ONNX element type, or None when numpy has no equivalent."""
    name = _ONNX_TO_NUMPY.get(elem_type)
    if name is None or name == "bfloat16":
        return None
    return np.dtype(object) if name == "str" else np.dtype(name)


def numpy_dtype_from_ort(type_string: str) -> Optional[np.dtype]:
    """numpy dtype from onnxruntime's 'tensor(float)' notation."""
    name = _ORT_TYPE_TO_NUMPY.get(type_string)
    if name is None or name == "bfloat16":
        return None
    return np.dtype(object) if name == "str" else np.dtype(name)


@dataclass(frozen=True)
class TensorInfo:
    """What is known statically about one tensor: name, element type and (possibly partial) shape."""

    name: str
    elem_type: int = 0
    shape: Optional[Tuple[Dim, ...]] = None
    kind: str = "tensor"
    """The ONNX type's kind: 'tensor', 'sequence', 'optional' or 'map' (the proto a saved sample holds)."""

    @property
    def dtype_name(self) -> str:
        return onnx_dtype_name(self.elem_type)

    @property
    def numpy_dtype(self) -> Optional[np.dtype]:
        return numpy_dtype_for(self.elem_type)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    def shape_text(self) -> str:
        return format_shape(self.shape)

    def element_count(self) -> Optional[int]:
        """Number of elements when every dimension is known, else None."""
        # one loop, no generator: pairing and the scope tree ask this for every activation
        shape = self.shape
        if shape is None:
            return None
        count = 1
        for dim in shape:
            if not isinstance(dim, int) or dim < 0:
                return None
            count *= int(dim)
        return count

    def byte_size(self) -> Optional[int]:
        count = self.element_count()
        dtype = self.numpy_dtype
        if count is None or dtype is None:
            return None
        return count * dtype.itemsize


def format_shape(shape: Optional[Tuple[Dim, ...]]) -> str:
    """'[1, 3, 224, 224]', with symbolic dims by name and unknown ones as '?'."""
    if shape is None:
        return "?"
    if None in shape:
        return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
    return "[" + ", ".join(map(str, shape)) + "]"  # no generator: scope maps format ~10,000 distinct shapes


def tensor_shapes(feeds: "Dict[str, object]") -> Dict[str, Tuple[int, ...]]:
    """The shapes of the tensors among `feeds`; a sequence, map or empty optional input (a list, dict or
    None) has none and is left out (shape inference keeps its declared type)."""
    return {name: tuple(int(d) for d in value.shape) for name, value in feeds.items() if isinstance(value, np.ndarray)}


def is_float_dtype(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.floating)


# Bits per element of ONNX's fixed-size element types (4- and 2-bit types packed into bytes);
# strings and types without a fixed size are absent.
ELEMENT_BITS: Dict[int, int] = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32,
                                13: 64, 14: 64, 15: 128, 16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4,
                                23: 4, 24: 8, 25: 2, 26: 2}


def stored_bytes(elem_type: int, dims: "Tuple[int, ...] | list") -> Optional[int]:
    """The bytes a tensor of this element type and shape stores, or None for a type of no fixed size."""
    bits = ELEMENT_BITS.get(elem_type)
    if bits is None:
        return None
    count = 1
    for dim in dims:
        count *= int(dim)
    return (count * bits + 7) // 8
