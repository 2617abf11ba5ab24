"""Reading initializer values (external data included, from inside the model folder only)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

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
_UNREADABLE = (-1, -1, -1)


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
    if tensor.data_location == onnx.TensorProto.EXTERNAL and graph.folder is not None:
        if tensor.data_type not in _EXTERNAL_FLOATS:
            return None  # read as a numpy array, no other type is floating: nothing to count
        counts = _stream_external(graph, tensor, np.dtype(_EXTERNAL_FLOATS[tensor.data_type]))
        if counts != _UNREADABLE:
            return counts
    value = initializer_array(graph, tensor)
    if value is None or not np.issubdtype(value.dtype, np.floating):
        return None
    if np.isfinite(value).all():
        return 0, 0, int(value.size)
    return int(np.isnan(value).sum()), int(np.isinf(value).sum()), int(value.size)


def _stream_external(graph: ModelGraph, tensor: onnx.TensorProto, dtype: np.dtype) -> Optional[Tuple[int, int, int]]:
    """Counts of one external float tensor read in chunks, None when the stored bytes do not hold
    exactly its elements (as `initializer_array` then returns None), `_UNREADABLE` when the
    file cannot be opened here (the caller falls back to the reader that reports why)."""
    from onnx.external_data_helper import ExternalDataInfo

    assert graph.folder is not None
    try:
        info = ExternalDataInfo(tensor)
        offset = int(info.offset or 0)
        handle = open(os.path.join(graph.folder.resolve(), info.location), "rb")
    except (OSError, ValueError):
        return _UNREADABLE
    size = math.prod(int(d) for d in tensor.dims)
    with handle:
        available = os.fstat(handle.fileno()).st_size - offset
        length = int(info.length) if info.length is not None else available
        if length != size * dtype.itemsize or length > available:
            return None
        handle.seek(offset)
        buffer = bytearray(min(length, STREAM_CHUNK_BYTES // dtype.itemsize * dtype.itemsize))
        nan = inf = 0
        left = length
        while left > 0:
            got = handle.readinto(memoryview(buffer)[:min(left, len(buffer))])
            if not got or got % dtype.itemsize:
                return None
            chunk = np.frombuffer(buffer, dtype=dtype, count=got // dtype.itemsize)
            if not np.isfinite(chunk).all():
                nan += int(np.isnan(chunk).sum())
                inf += int(np.isinf(chunk).sum())
            left -= got
    return nan, inf, size
