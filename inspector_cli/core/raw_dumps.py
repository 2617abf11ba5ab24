"""Raw tensor dumps (`.bin`): bare bytes as embedded toolchains write them, no header.

The dtype and shape of each input come from `--raw-dtype [NAME:]DTYPE` and `--raw-shape
[NAME:]DIMS` (reader option `raw`), else from the model (its dtype, its static shape). A file's
size must be exactly shape x itemsize; anything else is an error naming the file, the byte counts
and what was expected. Which input a file is: `<input>.bin`, `input_K.bin` (by position), or the
only input. Dtypes are numpy names (`float32`, `uint8`, ...) or codes with a byte order (`>f4`
for big-endian data); the data is converted to native byte order.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputDataError, UsageError
from .input_formats import positional, register_options_preparer, register_reader
from .types import TensorInfo, TensorMap, format_shape

OPTION = "raw"
_POSITIONAL = re.compile(r"input_(\d+)$")


def parse_raw_dtype(text: str) -> Tuple[str, str]:
    """'x:uint8' or 'float32' (every input) -> (name, canonical dtype string)."""
    name, _, value = text.rpartition(":")
    try:
        dtype = np.dtype(value.strip())
    except TypeError:
        raise UsageError(f"--raw-dtype '{text}': '{value}' is not a numpy dtype (e.g. float32, uint8, >f4)") from None
    if dtype.kind not in "biuf" or dtype.hasobject:
        raise UsageError(f"--raw-dtype '{text}': {dtype} is not a numeric dtype")
    return name.strip(), dtype_text(dtype)


def dtype_text(dtype: np.dtype) -> str:
    """'float32' for native/little-endian data, '>f4' style when the byte order matters."""
    return dtype.name if dtype.byteorder in ("=", "|", "<") else dtype.str


def parse_raw_shape(text: str) -> Tuple[str, List[int]]:
    """'x:1x3x224x224' or '1x3x224x224' (every input) -> (name, dims)."""
    name, _, dims_text = text.rpartition(":")
    try:
        dims = [int(d) for d in dims_text.replace(",", "x").split("x") if d.strip() != ""]
    except ValueError:
        raise UsageError(f"--raw-shape '{text}': expected [NAME:]DIMS, e.g. input:1x3x224x224") from None
    if not dims or any(d < 0 for d in dims):
        raise UsageError(f"--raw-shape '{text}': dimensions must be non-negative integers")
    return name.strip(), dims


def raw_options(dtypes: Sequence[str], shapes: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The reader option for the flags, or None when neither flag was given."""
    if not dtypes and not shapes:
        return None
    return {"dtype": dict(parse_raw_dtype(t) for t in dtypes),
            "shape": {name: dims for name, dims in (parse_raw_shape(t) for t in shapes)}}


def layout_for(spec: TensorInfo, raw: Dict[str, Any]) -> Dict[str, Any]:
    """dtype and shape of `spec`'s .bin files: per-input flag, then the flag for all, then the model."""
    dtypes, shapes = raw.get("dtype") or {}, raw.get("shape") or {}
    dtype = dtypes.get(spec.name) or dtypes.get("")
    if dtype is None:
        dtype = str(spec.numpy_dtype) if spec.numpy_dtype is not None else None
    shape = shapes.get(spec.name) or shapes.get("")
    if shape is None and spec.is_static:
        shape = [int(d) for d in spec.shape or ()]  # type: ignore[arg-type]
    return {"dtype": dtype, "shape": shape}


def prepare(options: Dict[str, object], specs: Sequence[TensorInfo]) -> Dict[str, object]:
    """Resolve `--raw-dtype/--raw-shape` per input and check them against the model up front."""
    raw = options.get(OPTION)
    if not isinstance(raw, dict):
        return options
    names = [s.name for s in specs]
    for flag, table in (("--raw-dtype", raw.get("dtype") or {}), ("--raw-shape", raw.get("shape") or {})):
        for name in table:
            if name and name not in names:
                raise UsageError(f"{flag} {name}: not an input of the model", hint=f"inputs: {', '.join(names)}")
    resolved: Dict[str, Any] = {}
    for spec in specs:
        layout = layout_for(spec, raw)
        _check_against_model(spec, layout["dtype"], layout["shape"], "--raw-dtype/--raw-shape")
        resolved[spec.name] = layout
    return {**options, OPTION: {**raw, "inputs": resolved}}


def _check_against_model(spec: TensorInfo, dtype: Optional[str], shape: Optional[List[int]], where: str) -> None:
    want = spec.numpy_dtype
    if dtype is not None and want is not None and np.dtype(dtype).newbyteorder("=") != want:
        raise InputDataError(f"{where}: .bin data for input '{spec.name}' is {dtype}, the model expects {want}",
                             hint="dump the tensor in the model's dtype, or fix --raw-dtype")
    if shape is not None and spec.shape is not None:
        if len(shape) != len(spec.shape) or any(isinstance(d, int) and d >= 0 and d != s
                                                for d, s in zip(spec.shape, shape)):
            raise InputDataError(f"{where}: shape {shape} for input '{spec.name}' does not fit the model's "
                                 f"{format_shape(spec.shape)}")


def _which_input(path: Path, specs: Sequence[TensorInfo]) -> Tuple[str, Optional[TensorInfo]]:
    names = {s.name: s for s in specs}
    if path.stem in names:
        return path.stem, names[path.stem]
    match = _POSITIONAL.match(path.stem)
    if match:
        index = int(match.group(1))
        return positional(index), specs[index] if index < len(specs) else None
    if len(specs) == 1:
        return specs[0].name, specs[0]
    raise InputDataError(f"{path}: cannot tell which of the model's inputs ({', '.join(names)}) this dump is",
                         hint="name the file <input_name>.bin or input_K.bin (K = input position)")


def read_raw(path: Path, specs: Sequence[TensorInfo], options: Dict[str, object]) -> TensorMap:
    """One raw dump: exactly prod(shape) values of dtype, in C order."""
    key, spec = _which_input(path, specs)
    if spec is None:
        raise InputDataError(f"{path}: names input position {path.stem[len('input_'):]}, "
                             f"but the model has {len(specs)} input(s)")
    raw = options.get(OPTION) if isinstance(options.get(OPTION), dict) else {}
    layout = (raw.get("inputs") or {}).get(spec.name) or layout_for(spec, raw)  # type: ignore[union-attr]
    dtype, shape = layout["dtype"], layout["shape"]
    if dtype is None:
        raise InputDataError(f"{path}: input '{spec.name}' has type {spec.dtype_name}; give its dtype",
                             hint=f"--raw-dtype {spec.name}:float32")
    if shape is None:
        raise InputDataError(f"{path}: input '{spec.name}' {format_shape(spec.shape)} has no fixed shape; "
                             "a .bin file has no header to say it", hint=f"--raw-shape {spec.name}:1x3x224x224")
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    size = path.stat().st_size
    if size != count * dt.itemsize:
        raise InputDataError(f"{path}: {size} bytes, but {dtype} {shape} for input '{spec.name}' needs "
                             f"{count * dt.itemsize} ({count} x {dt.itemsize})",
                             hint="check --raw-dtype and --raw-shape" + _guess(size, count, dt))
    array = np.fromfile(path, dtype=dt, count=count).reshape(shape)
    return {key: array.astype(dt.newbyteorder("="), copy=False)}


def _guess(size: int, count: int, dtype: np.dtype) -> str:
    """A likely cause when the byte count is a clean multiple of what another dtype would need."""
    for other in ("uint8", "float16", "float32", "float64"):
        if np.dtype(other).itemsize != dtype.itemsize and size == count * np.dtype(other).itemsize:
            return f"; the size fits {other} data"
    return ""


register_reader([".bin"], read_raw, folder_member=True)
register_options_preparer(prepare)
