"""Run-time shapes of the original model's tensors.

ONNX shape inference runs with the graph inputs fixed to the shapes actually fed (dynamic
dimensions resolved), then every tensor the profiler saw (outputs of kernels that kept an
original tensor's name) overrides it with the shape onnxruntime really produced.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Tuple

from ..core.graph import ModelGraph
from ..core.protoutil import infer_tensor_info
from ..core.types import TensorInfo
from .kernel_info import ORT_TYPE_BYTES, TypedShape

Shape = Tuple[int, ...]


@dataclass(frozen=True)
class RuntimeTensor:
    shape: Shape
    itemsize: Optional[float]

    @property
    def nbytes(self) -> Optional[int]:
        if self.itemsize is None:
            return None
        count = 1
        for d in self.shape:
            count *= d
        return int(count * self.itemsize)


def _declared_matches(graph: ModelGraph, input_shapes: Mapping[str, Shape]) -> bool:
    for spec in graph.inputs:
        if spec.name in input_shapes and (spec.shape is None or tuple(spec.shape) != tuple(input_shapes[spec.name])):
            return False
    return True


def _infer_with_inputs(graph: ModelGraph, input_shapes: Mapping[str, Shape]) -> Dict[str, TensorInfo]:
    """Shape inference with the inputs' dims set to the real ones (edited in place, then restored)."""
    saved = {}
    for vi in graph.model.graph.input:
        if vi.name in input_shapes and vi.type.HasField("tensor_type"):
            saved[vi.name] = vi.type.tensor_type.shape.SerializeToString() \
                if vi.type.tensor_type.HasField("shape") else None
            shape = vi.type.tensor_type.shape
            del shape.dim[:]
            for d in input_shapes[vi.name]:
                shape.dim.add().dim_value = int(d)
    try:
        return infer_tensor_info(graph.model)
    finally:
        for vi in graph.model.graph.input:
            if vi.name in saved:
                tensor_type = vi.type.tensor_type
                if saved[vi.name] is None:
                    tensor_type.ClearField("shape")
                else:
                    tensor_type.shape.ParseFromString(saved[vi.name])


def runtime_tensors(graph: ModelGraph, input_shapes: Mapping[str, Shape],
                    observed: Iterable[Tuple[str, TypedShape]] = ()) -> Dict[str, RuntimeTensor]:
    """name -> run-time shape and element size, for every tensor whose shape is known."""
    info = graph.all_tensor_info() if _declared_matches(graph, input_shapes) else _infer_with_inputs(graph, input_shapes)
    tensors: Dict[str, RuntimeTensor] = {}
    for name, ti in info.items():
        if ti.is_static:
            dtype = ti.numpy_dtype
            tensors[name] = RuntimeTensor(tuple(int(d) for d in ti.shape or ()),  # type: ignore[arg-type]
                                          float(dtype.itemsize) if dtype is not None and dtype.kind != "O" else None)
    for name, typed in observed:
        if name:
            tensors[name] = RuntimeTensor(typed.dims, ORT_TYPE_BYTES.get(typed.dtype))
    return tensors
