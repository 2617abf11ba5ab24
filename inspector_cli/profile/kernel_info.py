"""What a kernel's profiler event says about it: op type, provider, typed shapes and sizes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

# ONNX Runtime's type names in input_type_shape / output_type_shape -> bytes per element.
ORT_TYPE_BYTES: Dict[str, float] = {
    "float": 4, "double": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1, "int4": 0.5, "uint4": 0.5,
    "float8e4m3fn": 1, "float8e4m3fnuz": 1, "float8e5m2": 1, "float8e5m2fnuz": 1,
}


@dataclass(frozen=True)
class TypedShape:
    dtype: str
    dims: Tuple[int, ...]

    def nbytes(self) -> Optional[int]:
        size = ORT_TYPE_BYTES.get(self.dtype)
        if size is None:
            return None
        count = 1
        for d in self.dims:
            count *= d
        return int(count * size)

    def text(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class KernelInfo:
    """What a kernel's first event says about it (identical in every run of fixed-shape inputs)."""

    name: str
    op_type: str
    provider: str
    inputs: Tuple[TypedShape, ...] = ()
    outputs: Tuple[TypedShape, ...] = ()
    activation_bytes: Optional[int] = None
    parameter_bytes: Optional[int] = None
    output_bytes: Optional[int] = None
    args: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _shapes(value: Any) -> Tuple[TypedShape, ...]:
    shapes = []
    for entry in value or []:
        if isinstance(entry, dict):
            for dtype, dims in entry.items():
                shapes.append(TypedShape(str(dtype), tuple(int(d) for d in dims or [])))
    return tuple(shapes)


def parse_int(value: Any) -> Optional[int]:
    """onnxruntime writes sizes as strings ("8192"); None when absent or not a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def kernel_info(name: str, args: Dict[str, Any]) -> KernelInfo:
    """A `KernelInfo` from the `args` of a kernel's `_kernel_time` event."""
    return KernelInfo(
        name=name, op_type=str(args.get("op_name", "?")), provider=str(args.get("provider", "?")),
        inputs=_shapes(args.get("input_type_shape")), outputs=_shapes(args.get("output_type_shape")),
        activation_bytes=parse_int(args.get("activation_size")), parameter_bytes=parse_int(args.get("parameter_size")),
        output_bytes=parse_int(args.get("output_size")), args=args)
