"""Synthetic inputs generated from a model's input specs (`--seed`, `--val-range`, `--shape`)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputDataError, UsageError
from .elemtypes import INTEGER_TYPES, elem_type_of, ml_dtype, ml_dtypes_module
from .memory import available_memory
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
        if _is_float(dtype):
            return DEFAULT_FLOAT_RANGE
        if dtype == np.bool_:  # drawn as 0/1 whatever the range
            return DEFAULT_INT_RANGE
        low, high = _limits(dtype)  # int4/int2: the default's 0..10 clipped to what the type holds
        return max(DEFAULT_INT_RANGE[0], low), min(DEFAULT_INT_RANGE[1], high)

    def shape_for(self, spec: TensorInfo) -> Tuple[int, ...]:
        shapes = dict(self.shapes)
        if spec.name in shapes:
            fixed = shapes[spec.name]
            if spec.shape is not None and len(fixed) != len(spec.shape):
                raise UsageError(f"--shape {spec.name}: {len(fixed)} dimensions given, "
                                 f"the input has {len(spec.shape)} {format_shape(spec.shape)}")
            for axis, (given, declared) in enumerate(zip(fixed, spec.shape or ())):
                # A static dimension is part of the model's contract: onnxruntime would refuse the
                # sample later, with a less clear message.
                if isinstance(declared, int) and declared >= 0 and given != declared:
                    raise UsageError(f"--shape {spec.name}:{'x'.join(map(str, fixed))}: dimension {axis} is "
                                     f"{given}, but the model fixes it at {declared} {format_shape(spec.shape)}")
            return fixed
        if spec.shape is None:
            raise InputDataError(f"input '{spec.name}' has an unknown shape",
                                 hint=f"fix it with --shape {spec.name}:1x3x224x224")
        dims: List[int] = []
        for axis, dim in enumerate(spec.shape):
            if axis == 0 and is_batch_dim(dim):
                dims.append(1)  # the batch: 1 is what every model accepts (said in the result's notes)
                continue
            if not isinstance(dim, int) or dim < 0:
                label = f"'{dim}'" if isinstance(dim, str) else "unknown"
                raise InputDataError(
                    f"input '{spec.name}' {format_shape(spec.shape)}: dimension {axis} ({label}) is dynamic",
                    hint=f"fix it with --shape {spec.name}:" + "x".join(
                        str(d) if isinstance(d, int) and d >= 0 else "1" if i == 0 and is_batch_dim(d) else "N"
                        for i, d in enumerate(spec.shape)),
                )
            dims.append(dim)
        return tuple(dims)

    def ones_mask(self, spec: TensorInfo) -> bool:
        """An integer or boolean attention mask without a --val-range of its own is all ones: every
        position attended, as a tokenizer writes it for an unpadded prompt. A random mask is no input
        a model is fed (GroupQueryAttention derives its sequence lengths from it and refuses one whose
        sum exceeds its length: onnxruntime's `seqlens_k[0] = ...`)."""
        dtype = spec.numpy_dtype
        return (MASK_NAME.search(spec.name) is not None and dtype is not None and dtype.kind in "iub"
                and spec.name not in {n for n, _, _ in self.val_ranges})

    def defaulted(self) -> List[str]:
        """Notes for the symbolic batch dimensions that were set to 1 (no --shape for them) and the
        attention masks generated as ones."""
        given = dict(self.shapes)
        return [f"input '{s.name}' {format_shape(s.shape)}: symbolic batch dimension set to 1 "
                f"(--shape {s.name}:... sets another)"
                for s in self.specs if s.name not in given and s.shape and is_batch_dim(s.shape[0])] + \
               [f"input '{s.name}': an attention mask, generated as ones (--val-range {s.name}:LO,HI draws it)"
                for s in self.specs if self.ones_mask(s)]

    def check(self, specs: Sequence[TensorInfo]) -> None:
        names = {s.name for s in specs}
        for name in [n for n, _, _ in self.val_ranges] + [n for n, _ in self.shapes]:
            if name and name not in names:
                raise UsageError(f"input '{name}' (in --val-range/--shape) is not an input of the model",
                                 hint=f"inputs: {', '.join(sorted(names))}")
        for spec in specs:
            if sample_dtype(spec) is None or sample_dtype(spec) == np.dtype(object):
                raise InputDataError(f"input '{spec.name}' has type {spec.dtype_name}; synthetic data cannot be generated",
                                     hint="pass real samples with --inputs")
            self.shape_for(spec)
            self._check_range(spec)
        self.check_memory(specs)

    def _check_range(self, spec: TensorInfo) -> None:
        """A value range the input's dtype cannot hold would overflow to inf or wrap around."""
        dtype = sample_dtype(spec)
        assert dtype is not None
        lo, hi = self.range_for(spec.name, dtype)
        if dtype == np.bool_:
            ok = True
        else:
            low, high = _limits(dtype)
            ok = low <= lo and hi <= high
        if not ok:
            raise UsageError(f"--val-range {spec.name}:{lo:g},{hi:g}: outside what {dtype.name} input "
                             f"'{spec.name}' can hold")

    def check_memory(self, specs: Sequence[TensorInfo], budget: Optional[int] = None) -> None:
        """Refuse, before allocating, a sample larger than the memory budget (half the memory
        available now): a shape of 10^12 elements must be an error, not a swapping machine."""

        budget = budget if budget is not None else available_memory() // 2
        sizes = []
        for spec in specs:
            dtype = sample_dtype(spec)
            if dtype is None:
                continue
            shape = self.shape_for(spec)
            sizes.append((math.prod(shape) * dtype.itemsize, spec, shape))
        total = sum(size for size, _, _ in sizes)
        if not sizes or total <= budget:
            return
        size, spec, shape = max(sizes, key=lambda item: item[0])
        smaller = list(shape)
        smaller[max(range(len(shape)), key=lambda axis: shape[axis])] = 1
        raise InputDataError(
            f"input '{spec.name}' {format_shape(shape)}: a synthetic sample needs {_human(size)} "
            f"({spec.dtype_name}), more than the memory budget of {_human(budget)}",
            hint=f"give a smaller shape, e.g. --shape {spec.name}:{'x'.join(map(str, smaller))}")

    def to_dict(self) -> Dict[str, Any]:
        return {
            "count": self.count,
            "seed": self.seed,
            "val_ranges": {n or "*": [lo, hi] for n, lo, hi in self.val_ranges},
            "shapes": {n: list(s) for n, s in self.shapes},
        }


MASK_NAME = re.compile(r"(^|[._/])attention_mask$", re.I)
BATCH_NAMES = frozenset({"batch", "n", "batch_size", "batchsize", "bs", "b"})
# Names that carry no meaning: torch.export (the dynamo exporter) calls every symbol s<N> ('s33'), onnx
# shape inference invents unk__<N>. On the first axis such a name is as good as unnamed: a batch.
GENERATED_DIM_NAME = re.compile(r"s\d+|unk__\d+")


def is_batch_dim(dim: object) -> bool:
    """A first-axis dimension that is a symbolic batch: named batch/N/batch_size (any case), unnamed, or
    with a generated name (torch.export's s<N>, shape inference's unk__<N>). Other symbolic dimensions
    (sequence length, image size) still need --shape: no default fits them."""
    if isinstance(dim, int) and dim >= 0:
        return False
    if not isinstance(dim, str) or dim == "":
        return True
    return dim.lower() in BATCH_NAMES or GENERATED_DIM_NAME.fullmatch(dim) is not None


def generate_sample(spec: SyntheticSpec, index: int) -> TensorMap:
    """Sample `index`: the generator is seeded with (seed, index), so order and sharding do not matter."""
    rng = np.random.default_rng([spec.seed, index])
    feeds: TensorMap = {}
    for tensor in spec.specs:
        dtype = sample_dtype(tensor)
        assert dtype is not None
        shape = spec.shape_for(tensor)
        if spec.ones_mask(tensor):
            feeds[tensor.name] = np.ones(shape, dtype=dtype)
            continue
        lo, hi = spec.range_for(tensor.name, dtype)
        if elem_type_of(dtype) is not None:  # bfloat16, float8, int4...: drawn as numpy's, rounded to the type
            wide = np.float32 if _is_float(dtype) else np.int8
            feeds[tensor.name] = _fill(np.empty(shape, dtype=wide), _drawer(rng, np.dtype(wide), lo, hi)).astype(dtype)
            continue
        feeds[tensor.name] = _fill(np.empty(shape, dtype=dtype), _drawer(rng, dtype, lo, hi))
    return feeds


def sample_dtype(spec: TensorInfo) -> Optional[np.dtype]:
    """The dtype of an input's samples: numpy's, or the ml_dtypes type of bfloat16/float8/int4... (imported
    only for such an input)."""
    return spec.numpy_dtype if spec.numpy_dtype is not None else ml_dtype(spec.elem_type)


def _is_float(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.floating) or (elem_type_of(dtype) is not None and elem_type_of(dtype) not in INTEGER_TYPES)


def _limits(dtype: np.dtype) -> Tuple[float, float]:
    """The finite range of a numeric dtype, numpy's or ml_dtypes' (its own finfo/iinfo)."""
    if elem_type_of(dtype) is not None:
        ml_dtypes = ml_dtypes_module()
        info: Any = ml_dtypes.iinfo(dtype) if elem_type_of(dtype) in INTEGER_TYPES else ml_dtypes.finfo(dtype)
    elif np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
    else:
        info = np.finfo(dtype)
    low = float(info.min)
    return low, float(info.max)


def _drawer(rng: np.random.Generator, dtype: np.dtype, lo: float, hi: float) -> Callable[[int], np.ndarray]:
    """n values of the input's kind: booleans, integers in [lo, hi], or uniform floats in [lo, hi)."""
    if dtype == np.bool_:
        return lambda n: rng.integers(0, 2, size=n)
    if np.issubdtype(dtype, np.integer):
        return lambda n: rng.integers(int(lo), int(hi), size=n, endpoint=True)
    return lambda n: rng.uniform(lo, hi, size=n)


# Elements drawn at a time: the float64/int64 draws of one chunk are the only temporary, so a sample
# costs its own bytes (not 2-8x as a whole-array draw then cast would). numpy's generators give the
# same stream drawn in chunks as in one call, so values are those of a single draw.
_CHUNK = 1 << 20


def _fill(out: np.ndarray, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    flat = out.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        stop = min(start + _CHUNK, flat.size)
        flat[start:stop] = draw(stop - start)
    return out


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if value < 1024 or unit == "PB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def parse_val_range(text: str) -> Tuple[str, float, float]:
    """'input:0,255' or '0,1' (every input) -> (name, lo, hi)."""
    name, _, values = text.rpartition(":") if ":" in text else ("", "", text)
    try:
        lo_text, hi_text = values.split(",")
        lo, hi = float(lo_text), float(hi_text)
    except ValueError as exc:
        raise UsageError(f"--val-range '{text}': expected [NAME:]LOW,HIGH, e.g. input:0,255") from exc
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise UsageError(f"--val-range '{text}': LOW and HIGH must be finite numbers")
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
    if math.prod(dims) >= 1 << 62 or any(d >= 1 << 62 for d in dims):
        # numpy cannot even describe such a shape (OverflowError); the memory check sees the rest.
        raise UsageError(f"--shape '{text}': {math.prod(dims):.3g} elements is more than any array can hold")
    return name.strip(), dims


def make_synthetic_spec(count: int, seed: int, val_ranges: Sequence[str], shapes: Sequence[str]) -> SyntheticSpec:
    if count < 1:
        raise UsageError("--samples must be at least 1")
    return SyntheticSpec(count=count, seed=seed,
                         val_ranges=tuple(parse_val_range(v) for v in val_ranges),
                         shapes=tuple(parse_shape(s) for s in shapes))


