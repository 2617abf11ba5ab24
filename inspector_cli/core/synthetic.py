"""Synthetic inputs generated from a model's input specs (`--seed`, `--val-range`, `--shape`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..errors import InputDataError, UsageError
from .types import TensorInfo, TensorMap, format_shape

DEFAULT_FLOAT_RANGE = (0.0, 1.0)
DEFAULT_INT_RANGE = (0.0, 10.0)


@dataclass(frozen=True)
class SyntheticSpec:
    """How to generate samples: count, seed, value ranges and fixed shapes per input name.

    A range or shape keyed by '' applies to every input that has none of its own.
    """

    count: int = 1
    seed: int = 0
    val_ranges: Tuple[Tuple[str, float, float], ...] = ()
    shapes: Tuple[Tuple[str, Tuple[int, ...]], ...] = ()
    specs: Tuple[TensorInfo, ...] = field(default=(), compare=False)

    def range_for(self, name: str, dtype: np.dtype) -> Tuple[float, float]:
        ranges = {n: (lo, hi) for n, lo, hi in self.val_ranges}
        if name in ranges:
            return ranges[name]
        if "" in ranges:
            return ranges[""]
        return DEFAULT_FLOAT_RANGE if np.issubdtype(dtype, np.floating) else DEFAULT_INT_RANGE

    def shape_for(self, spec: TensorInfo) -> Tuple[int, ...]:
        shapes = dict(self.shapes)
        if spec.name in shapes:
            fixed = shapes[spec.name]
            if spec.shape is not None and len(fixed) != len(spec.shape):
                raise UsageError(f"--shape {spec.name}: {len(fixed)} dimensions given, "
                                 f"the input has {len(spec.shape)} {format_shape(spec.shape)}")
            return fixed
        if spec.shape is None:
            raise InputDataError(f"input '{spec.name}' has an unknown shape",
                                 hint=f"fix it with --shape {spec.name}:1x3x224x224")
        dims: List[int] = []
        for axis, dim in enumerate(spec.shape):
            if not isinstance(dim, int) or dim < 0:
                label = f"'{dim}'" if isinstance(dim, str) else "unknown"
                raise InputDataError(
                    f"input '{spec.name}' {format_shape(spec.shape)}: dimension {axis} ({label}) is dynamic",
                    hint=f"fix it with --shape {spec.name}:" + "x".join(
                        str(d) if isinstance(d, int) and d >= 0 else "N" for d in spec.shape),
                )
            dims.append(dim)
        return tuple(dims)

    def check(self, specs: Sequence[TensorInfo]) -> None:
        names = {s.name for s in specs}
        for name in [n for n, _, _ in self.val_ranges] + [n for n, _ in self.shapes]:
            if name and name not in names:
                raise UsageError(f"input '{name}' (in --val-range/--shape) is not an input of the model",
                                 hint=f"inputs: {', '.join(sorted(names))}")
        for spec in specs:
            if spec.numpy_dtype is None or spec.numpy_dtype == np.dtype(object):
                raise InputDataError(f"input '{spec.name}' has type {spec.dtype_name}; synthetic data cannot be generated",
                                     hint="pass real samples with --inputs")
            self.shape_for(spec)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "count": self.count,
            "seed": self.seed,
            "val_ranges": {n or "*": [lo, hi] for n, lo, hi in self.val_ranges},
            "shapes": {n: list(s) for n, s in self.shapes},
        }


def generate_sample(spec: SyntheticSpec, index: int) -> TensorMap:
    """Sample `index`: the generator is seeded with (seed, index), so order and sharding do not matter."""
    rng = np.random.default_rng([spec.seed, index])
    feeds: TensorMap = {}
    for tensor in spec.specs:
        dtype = tensor.numpy_dtype
        assert dtype is not None
        shape = spec.shape_for(tensor)
        lo, hi = spec.range_for(tensor.name, dtype)
        if dtype == np.bool_:
            feeds[tensor.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            feeds[tensor.name] = rng.integers(int(lo), int(hi), size=shape, endpoint=True).astype(dtype)
        else:
            feeds[tensor.name] = rng.uniform(lo, hi, size=shape).astype(dtype)
    return feeds


def parse_val_range(text: str) -> Tuple[str, float, float]:
    """'input:0,255' or '0,1' (every input) -> (name, lo, hi)."""
    name, _, values = text.rpartition(":") if ":" in text else ("", "", text)
    try:
        lo_text, hi_text = values.split(",")
        lo, hi = float(lo_text), float(hi_text)
    except ValueError as exc:
        raise UsageError(f"--val-range '{text}': expected [NAME:]LOW,HIGH, e.g. input:0,255") from exc
    if hi < lo:
        raise UsageError(f"--val-range '{text}': HIGH is below LOW")
    return name.strip(), lo, hi


def parse_shape(text: str) -> Tuple[str, Tuple[int, ...]]:
    """'input:1x3x224x224' (or with commas) -> (name, dims)."""
    name, sep, dims_text = text.rpartition(":")
    if not sep or not name:
        raise UsageError(f"--shape '{text}': expected NAME:DIMS, e.g. input:1x3x224x224")
    try:
        dims = tuple(int(d) for d in dims_text.replace(",", "x").split("x") if d != "")
    except ValueError as exc:
        raise UsageError(f"--shape '{text}': dimensions must be integers, e.g. input:1x3x224x224") from exc
    if any(d < 0 for d in dims):
        raise UsageError(f"--shape '{text}': dimensions must not be negative")
    return name.strip(), dims


def make_synthetic_spec(count: int, seed: int, val_ranges: Sequence[str], shapes: Sequence[str]) -> SyntheticSpec:
    if count < 1:
        raise UsageError("--samples must be at least 1")
    return SyntheticSpec(count=count, seed=seed,
                         val_ranges=tuple(parse_val_range(v) for v in val_ranges),
                         shapes=tuple(parse_shape(s) for s in shapes))


