"""Reading initializer values (external data included, from inside the model folder only)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from .graph import ModelGraph, load_external_tensor


def initializer_array(graph: ModelGraph, tensor: onnx.TensorProto) -> Optional[np.ndarray]:
    """The value of an initializer as numpy (None for types numpy cannot hold, e.g. bfloat16)."""
    try:
        return numpy_helper.to_array(load_external_tensor(graph, tensor))
    except (ValueError, TypeError, KeyError):
        return None


def iter_initializers(graph: ModelGraph) -> Iterator[Tuple[onnx.TensorProto, Optional[np.ndarray]]]:
    """(proto, value) of every top-level initializer, one at a time (values are not kept)."""
    for tensor in graph.model.graph.initializer:
        yield tensor, initializer_array(graph, tensor)


@dataclass(frozen=True)
class NonFiniteWeight:
    tensor: str
    nan: int
    inf: int
    size: int
    consumers: Tuple[str, ...]


STREAM_CHUNK_BYTES = 16 << 20
"""External weights are checked for NaN/Inf this many bytes at a time: a 2 GB weight file costs 16 MB
(issue 15: reading each tensor through a proto copy and a numpy copy held 3x the largest tensor)."""
_EXTERNAL_FLOATS = {onnx.TensorProto.FLOAT: "<f4", onnx.TensorProto.DOUBLE: "<f8", onnx.TensorProto.FLOAT16: "<f2"}


def nonfinite_initializers(graph: ModelGraph) -> List[NonFiniteWeight]:
    """Initializers holding NaN or Inf, with the nodes that read them (external data streamed)."""
    found: List[NonFiniteWeight] = []
    for tensor in graph.model.graph.initializer:
        counts = _nonfinite_counts(graph, tensor)
        if counts is None or not (counts[0] or counts[1]):
            continue
        nan, inf, size = counts
        found.append(NonFiniteWeight(tensor=tensor.name, nan=nan, inf=inf, size=size,
                                     consumers=tuple(n.name for n in graph.consumers.get(tensor.name, []))))
    return found


def _nonfinite_counts(graph: ModelGraph, tensor: onnx.TensorProto) -> Optional[Tuple[int, int, int]]:
    """(NaN, Inf, size) of a float initializer; None for other types and unreadable values."""
    chunks = float_chunks(graph, tensor)
    if chunks is None:
        return None
    nan = inf = size = 0
    try:
        for chunk in chunks:
            size += int(chunk.size)
            if not np.isfinite(chunk).all():
                nan += int(np.isnan(chunk).sum())
                inf += int(np.isinf(chunk).sum())
    except ValueError:  # the file shrank under us: unreadable, as a whole read would be
        return None
    return nan, inf, size


def finite_abs_max(graph: ModelGraph, tensor: onnx.TensorProto) -> Optional[float]:
    """max |x| over the finite values of a floating initializer (streamed like the NaN/Inf counts);
    None for other types, unreadable values and no finite value."""
    chunks = float_chunks(graph, tensor)
    if chunks is None:
        return None
    best: Optional[float] = None
    try:
        for chunk in chunks:
            finite = np.abs(chunk[np.isfinite(chunk)])
            if finite.size:
                top = float(finite.max())
                best = top if best is None else max(best, top)
    except ValueError:
        return None
    return best


def float_chunks(graph: ModelGraph, tensor: onnx.TensorProto) -> Optional[Iterable[np.ndarray]]:
    """The values of a floating initializer as flat arrays of at most STREAM_CHUNK_BYTES (external
    data read a chunk at a time, never the whole file: issue 33), or the whole array when embedded;
    None for other types and unreadable values (as `initializer_array` returns None)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL and graph.folder is not None:
        if tensor.data_type not in _EXTERNAL_FLOATS:
            return None  # read as a numpy array, no other type is floating
        opened = _open_external(graph, tensor, np.dtype(_EXTERNAL_FLOATS[tensor.data_type]))
        if opened is None:
            return None
        if opened is not _UNOPENED:
            return _read_chunks(*opened)  # type: ignore[misc]
    value = initializer_array(graph, tensor)
    if value is None or not np.issubdtype(value.dtype, np.floating):
        return None
    return [value.reshape(-1)]


_UNOPENED = object()
"""The external file cannot be opened here: the caller falls back to the reader that reports why."""


def _open_external(graph: ModelGraph, tensor: onnx.TensorProto, dtype: np.dtype) -> Any:
    """(handle at the tensor's offset, length, dtype); None when the stored bytes do not hold
    exactly its elements, `_UNOPENED` when the file cannot be opened."""
    from onnx.external_data_helper import ExternalDataInfo

    assert graph.folder is not None
    try:
        info = ExternalDataInfo(tensor)
        offset = int(info.offset or 0)
        handle = open(os.path.join(graph.folder.resolve(), info.location), "rb")
    except (OSError, ValueError):
        return _UNOPENED
    size = math.prod(int(d) for d in tensor.dims)
    available = os.fstat(handle.fileno()).st_size - offset
    length = int(info.length) if info.length is not None else available
    if length != size * dtype.itemsize or length > available:
        handle.close()
        return None
    handle.seek(offset)
    return handle, length, dtype


def _read_chunks(handle: BinaryIO, length: int, dtype: np.dtype) -> Iterator[np.ndarray]:
    """`length` bytes from `handle` as arrays of `dtype`, through one reused buffer (each chunk is
    overwritten by the next: consumers reduce it before asking for more)."""
    with handle:
        buffer = bytearray(min(length, STREAM_CHUNK_BYTES // dtype.itemsize * dtype.itemsize))
        left = length
        while left > 0:
            got = handle.readinto(memoryview(buffer)[:min(left, len(buffer))])
            if not got or got % dtype.itemsize:
                raise ValueError(f"external data ended {left} bytes early")
            yield np.frombuffer(buffer, dtype=dtype, count=got // dtype.itemsize)
            left -= got
