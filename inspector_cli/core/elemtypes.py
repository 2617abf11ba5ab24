"""ONNX element types numpy has no dtype for: bfloat16, the float8s, float8e8m0, float4e2m1, int4/uint4, int2/uint2.

They are values like any other (issue 42): read from `.pb` and `.npz` samples as `ml_dtypes` arrays,
fed to onnxruntime as an `OrtValue` carrying the ONNX element type (its plain `run` only takes numpy's
types: "Numpy_type 260 can't be converted to MLDataType"), read back from the output's bytes (onnxruntime
hands a float8e4m3fn output over as its raw uint8 codes and refuses the others: "No corresponding Numpy
type for Tensor Type"), and widened to float64 for the metrics from their exact values. The 4- and 2-bit
types travel packed (two or four elements a byte, the first in the low bits), as ONNX stores them.

`ml_dtypes` is imported only when such a type appears (docs/speed.md "Import budgets"): the lookups by
element type and dtype name below need no import.
"""
from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

ML_DTYPE_NAMES: Dict[int, str] = {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2",
}
"""ONNX element type -> the ml_dtypes type of the same values."""
_ELEM_OF_ML = {name: elem for elem, name in ML_DTYPE_NAMES.items()}
_ELEM_BY_DTYPE: Dict[np.dtype, Optional[int]] = {}
"""elem_type_of's answers by dtype (dtypes hash and compare by value: '<f4' and '>f4' are two keys)."""
INTEGER_TYPES = frozenset({21, 22, 25, 26})
"""uint4, int4, uint2, int2: the integer ones."""
PACKED_BITS: Dict[int, int] = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}
"""Bits per element of the sub-byte types; onnxruntime holds them packed, as TensorProto does."""
ORT_NAMES: Dict[int, str] = {
    16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2",
}
"""ONNX element type -> its name in onnxruntime's type strings ('tensor(float8e4m3fn)')."""
_ELEM_OF_ORT = {f"tensor({name})": elem for elem, name in ORT_NAMES.items()}


def ml_dtype(elem_type: int) -> Optional[np.dtype]:
    """The ml_dtypes dtype of an ONNX element type numpy lacks (None for numpy's own types, or a type
    the installed ml_dtypes does not have). Imports ml_dtypes: call only when such a type appears."""
    name = ML_DTYPE_NAMES.get(elem_type)
    if name is None:
        return None
    found = getattr(ml_dtypes_module(), name, None)
    return np.dtype(found) if found is not None else None


def ml_dtypes_module() -> Any:
    """ml_dtypes (bound by the core dependencies, through onnx), or a one-line error naming the fix."""
    try:
        import ml_dtypes
    except ImportError:
        from ..errors import UsageError

        raise UsageError("bfloat16, float8 and int4 values need ml_dtypes, which is not installed",
                         hint="pip install 'ml_dtypes>=0.5,<0.7'") from None
    return ml_dtypes


def elem_type_of(dtype: np.dtype) -> Optional[int]:
    """The ONNX element type of an ml_dtypes dtype (by its name: no import; numpy's own names never clash;
    the kind is no guide: float8_e5m2 says 'f', the others 'V'), else None."""
    try:
        return _ELEM_BY_DTYPE[dtype]
    except KeyError:  # numpy builds dtype.name in Python (~1 us): asked for every layer pair of every sample
        elem = _ELEM_OF_ML.get(dtype.name)
        if len(_ELEM_BY_DTYPE) < 1024:  # structured dtypes are unbounded in number; the common ones fit
            _ELEM_BY_DTYPE[dtype] = elem
        return elem


def elem_type_of_ort(type_string: str) -> Optional[int]:
    """The ONNX element type of an onnxruntime type string such as 'tensor(float8e4m3fn)', for these types."""
    return _ELEM_OF_ORT.get(type_string)


def is_typed(value: Any) -> bool:
    """An ml_dtypes array (bfloat16, float8, int4...): numpy's own arithmetic does not know it."""
    return isinstance(value, np.ndarray) and elem_type_of(value.dtype) is not None


def adopt(value: np.ndarray, elem_type: int) -> Optional[np.ndarray]:
    """`value` read as element type `elem_type` when it holds such values: already that ml_dtypes type, or
    the opaque void items `np.load` gives for one (an `.npz` saved from ml_dtypes arrays stores '|V1',
    '|V2'); None when it is something else (another type: the caller names the mismatch)."""
    if elem_type not in ML_DTYPE_NAMES or not isinstance(value, np.ndarray):
        return None
    want = ml_dtype(elem_type)
    if want is None:
        return None
    if value.dtype == want:
        return value
    if value.dtype.kind == "V" and value.dtype.names is None and value.dtype.itemsize == want.itemsize \
            and elem_type_of(value.dtype) is None:
        return value.view(want)
    return None


def widen(value: np.ndarray) -> np.ndarray:
    """The exact values of an ml_dtypes array in a numpy type the metrics know: float64 for the float
    types (every bfloat16/float8/float4 value is exact in it, NaN and Inf kept), int64 for int4/int2."""
    if elem_type_of(value.dtype) in INTEGER_TYPES:
        return value.astype(np.int64)
    return value.astype(np.float64)


# ---- packing of the 4- and 2-bit types -------------------------------------------------------------
def pack(value: np.ndarray, bits: int) -> np.ndarray:
    """Element codes packed into bytes as ONNX stores them: element i in bits (i % per) * bits of byte i // per."""
    per = 8 // bits
    codes = np.ascontiguousarray(value).reshape(-1).view(np.uint8) & np.uint8((1 << bits) - 1)
    padded = np.zeros(-(-codes.size // per) * per, np.uint8)
    padded[:codes.size] = codes
    groups = padded.reshape(-1, per).astype(np.uint16)
    packed = np.zeros(groups.shape[0], np.uint16)
    for slot in range(per):
        packed |= groups[:, slot] << (slot * bits)
    return packed.astype(np.uint8)


def unpack(data: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The `count` element codes (one a byte, low bits) of packed bytes."""
    per = 8 // bits
    mask = np.uint8((1 << bits) - 1)
    slots = [(data >> np.uint8(slot * bits)) & mask for slot in range(per)]
    return np.stack(slots, axis=1).reshape(-1)[:count]


# ---- onnxruntime -----------------------------------------------------------------------------------
def to_ort_value(value: np.ndarray, elem_type: int) -> Tuple[Any, np.ndarray]:
    """An onnxruntime OrtValue of `value` (an ml_dtypes array) with its ONNX element type, and the buffer it
    wraps (no copy: keep the buffer alive until the run returns). onnxruntime reads a sub-byte type's
    buffer as packed bytes while taking the element shape from the array, so the packed bytes go in the
    front of an array of the element shape."""
    import onnxruntime as ort

    value = np.ascontiguousarray(value)
    bits = PACKED_BITS.get(elem_type)
    if bits is None:
        buffer = value.view(np.uint16 if value.dtype.itemsize == 2 else np.uint8)
    else:
        packed = pack(value, bits)  # never more bytes than elements
        buffer = np.zeros(value.shape, np.uint8)
        buffer.reshape(-1)[:packed.size] = packed
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buffer, elem_type), buffer


def from_ort_value(value: Any, elem_type: int) -> np.ndarray:
    """An output OrtValue of one of these types as an ml_dtypes array (a copy of its bytes)."""
    shape = tuple(int(d) for d in value.shape())
    size = int(value.tensor_size_in_bytes())
    data = np.empty(size, np.uint8)
    if size:
        ctypes.memmove(data.ctypes.data, value.data_ptr(), size)
    want = ml_dtype(elem_type)
    if want is None:
        raise TypeError(f"the installed ml_dtypes has no {ORT_NAMES.get(elem_type, elem_type)} type")
    count = int(np.prod(shape, dtype=np.int64))
    bits = PACKED_BITS.get(elem_type)
    codes = unpack(data, bits, count) if bits is not None else data
    return codes.view(want).reshape(shape)


def feed_value(value: Any, keep: List[np.ndarray]) -> Any:
    """A feed as onnxruntime's `run` takes it: an ml_dtypes array as a typed OrtValue, anything else as is."""
    if not is_typed(value):
        return value
    elem = elem_type_of(value.dtype)
    assert elem is not None
    ort_value, buffer = to_ort_value(value, elem)
    keep.append(buffer)
    return ort_value


def run(session: Any, names: Sequence[str], feeds: Mapping[str, Any], output_types: Mapping[str, Optional[int]]
        ) -> List[Any]:
    """`session.run(names, feeds)` (an onnxruntime InferenceSession) where a feed or an output is of one
    of these types: typed feeds go in as OrtValues; outputs of these types are read from their bytes
    (onnxruntime's own conversion refuses them or returns raw codes). Other outputs come back as `run`
    returns them (a sequence or map included: those are fetched by a plain run of their own)."""
    keep: List[np.ndarray] = []
    inputs = {name: feed_value(value, keep) for name, value in feeds.items()}
    typed = [n for n in names if output_types.get(n) is not None]
    if not typed:
        return list(session.run(list(names), inputs))
    plain = [n for n in names if output_types.get(n) is None]
    import onnxruntime as ort

    ort_inputs = {name: value if isinstance(value, ort.OrtValue) else _ort_value(value)
                  for name, value in inputs.items()}
    got: Dict[str, Any] = {}
    if all(isinstance(v, ort.OrtValue) for v in ort_inputs.values()):
        values = session.run_with_ort_values(list(names), ort_inputs)
        for name, value in zip(names, values):
            elem = output_types.get(name)
            got[name] = from_ort_value(value, elem) if elem is not None else _plain_output(value)
    else:  # a sequence or map input: the typed outputs through OrtValues need tensor feeds only
        raise TypeError("a sequence or map input together with a bfloat16/float8/int4 output is not supported")
    if plain and any(got.get(n) is _NOT_A_TENSOR for n in plain):
        again = dict(zip(plain, session.run(plain, inputs)))
        got.update(again)
    return [got[n] for n in names]


_NOT_A_TENSOR = object()


def _ort_value(value: Any) -> Any:
    import onnxruntime as ort

    if isinstance(value, np.ndarray):
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value))
    return value  # a list (sequence) or dict (map): not an OrtValue; see `run`


def _plain_output(value: Any) -> Any:
    if value.is_tensor():
        return value.numpy()
    return _NOT_A_TENSOR


def typed_outputs(outputs: Sequence[Any]) -> Dict[str, int]:
    """name -> element type of a session's outputs (onnxruntime NodeArgs) of these types."""
    found = {}
    for arg in outputs:
        elem = _ELEM_OF_ORT.get(arg.type)
        if elem is not None:
            found[arg.name] = elem
    return found
