"""Reading initializer values (external data included, from inside the model folder only)."""
from __future__ import annotations

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


def nonfinite_initializers(graph: ModelGraph) -> List[NonFiniteWeight]:
    """Initializers holding NaN or Inf, with the nodes that read them."""
    found: List[NonFiniteWeight] = []
    for tensor, value in iter_initializers(graph):
        if value is None or not np.issubdtype(value.dtype, np.floating):
            continue
        finite = np.isfinite(value)
        if finite.all():
            continue
        found.append(NonFiniteWeight(
            tensor=tensor.name, nan=int(np.isnan(value).sum()), inf=int(np.isinf(value).sum()), size=int(value.size),
            consumers=tuple(n.name for n in graph.consumers.get(tensor.name, []))))
    return found
