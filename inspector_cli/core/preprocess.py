"""Image preprocessing specs: resize, center crop, scale, mean/std, channel order, layout, dtype.

The pipeline is the classic torchvision evaluation transform, step by step and in this order:

1. decode (Pillow) and convert to RGB (or L for `channel-order: GRAY`); alpha is dropped;
2. `resize`: one number sets the shorter side (aspect kept; the longer side is truncated as
   torchvision does), `[H, W]` sets the exact size; `interpolation` as Pillow's filters;
3. `center-crop` `[H, W]` (or one number): offsets `round((size - crop) / 2)`;
4. values in float32 (float64 for float64 inputs): `x * scale`, reorder channels (`BGR`), then `(x - mean) / std`, mean and
   std given in the *output* channel order;
5. `layout` NCHW / NHWC (CHW / HWC for models without a batch axis), cast to `dtype`.

Unset `layout` and `dtype` are taken from the model's input; sizes, channels and dtype that do
not fit the model are errors before any image is read. The spec is plain data (a dict with the
YAML keys), so it travels in `SampleSet.reader_options` and is recorded in every result.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputDataError
from .types import TensorInfo, format_shape

INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos")
CHANNEL_ORDERS = ("RGB", "BGR", "GRAY")
LAYOUTS = ("NCHW", "NHWC", "CHW", "HWC")
DTYPES = ("float32", "float16", "float64", "uint8")


class SpecError(ValueError):
    """A bad value in a preprocessing spec; `key` says which."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class PreprocessSpec:
    input: Optional[str] = None
    resize: Optional[Tuple[int, ...]] = None
    """(S,): shorter side to S, aspect kept; (H, W): exact size."""
    center_crop: Optional[Tuple[int, int]] = None
    interpolation: str = "bilinear"
    scale: float = 1.0
    mean: Optional[Tuple[float, ...]] = None
    std: Optional[Tuple[float, ...]] = None
    channel_order: str = "RGB"
    layout: Optional[str] = None
    dtype: Optional[str] = None

    @property
    def channels(self) -> int:
        return 1 if self.channel_order == "GRAY" else 3

    def out_size(self) -> Optional[Tuple[int, int]]:
        """(H, W) of every output image, when the spec fixes it."""
        if self.center_crop:
            return self.center_crop
        if self.resize and len(self.resize) == 2:
            return (self.resize[0], self.resize[1])
        return None

    def to_dict(self) -> Dict[str, Any]:
        """The YAML form (dashed keys, unset keys left out): parse_spec(to_dict()) == self."""
        out: Dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name.replace("_", "-")] = list(value) if isinstance(value, tuple) else value
        return out


KEYS = tuple(f.name.replace("_", "-") for f in fields(PreprocessSpec))


def parse_spec(values: Mapping[str, Any]) -> PreprocessSpec:
    """Build a spec from YAML keys (or `--preprocess-set` strings); raise SpecError naming the key."""
    spec = PreprocessSpec()
    changes: Dict[str, Any] = {}
    for raw_key, value in values.items():
        key = str(raw_key).replace("_", "-")
        if key not in KEYS:
            raise SpecError(key, "unknown preprocessing key")
        changes[key.replace("-", "_")] = _PARSERS[key](key, value)
    spec = replace(spec, **changes)
    _check_consistent(spec)
    return spec


def _sizes(key: str, value: Any, allow_one: bool) -> Tuple[int, ...]:
    items = _list(value, r"[x,\s]+")
    try:
        dims = tuple(int(v) for v in items)
        if any(float(v) != int(float(v)) for v in items):
            raise ValueError
    except (TypeError, ValueError):
        raise SpecError(key, f"{value!r} is not a size: give N or [H, W]") from None
    if len(dims) not in ((1, 2) if allow_one else (2,)) or any(d <= 0 for d in dims):
        raise SpecError(key, f"{value!r} is not a size: give N or [H, W] with positive integers")
    return dims


def _crop(key: str, value: Any) -> Tuple[int, int]:
    dims = _sizes(key, value, True)
    return (dims[0], dims[0]) if len(dims) == 1 else (dims[0], dims[1])


def _number(key: str, value: Any) -> float:
    text = str(value).strip()
    try:
        if "/" in text:  # '1/255'
            num, den = text.split("/")
            result = float(num) / float(den)
        else:
            result = float(text)
    except (ValueError, ZeroDivisionError):
        raise SpecError(key, f"{value!r} is not a number (e.g. 0.0039 or 1/255)") from None
    if not np.isfinite(result):
        raise SpecError(key, f"{value!r} is not a finite number")
    return result


def _numbers(key: str, value: Any) -> Tuple[float, ...]:
    items = _list(value, r"[,\s]+")
    if not items or len(items) not in (1, 3):
        raise SpecError(key, f"{value!r}: give one value or one per channel (3)")
    numbers = tuple(_number(key, v) for v in items)
    if key == "std" and any(v == 0 for v in numbers):
        raise SpecError(key, "std must not be 0")
    return numbers


def _list(value: Any, separators: str) -> List[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    text = str(value).strip().strip("[]()")
    return [t for t in re.split(separators, text) if t]


def _choice(options: Sequence[str], upper: bool) -> Any:
    def parse(key: str, value: Any) -> str:
        text = str(value).strip()
        text = text.upper() if upper else text.lower()
        if text == "GREY":
            text = "GRAY"
        if text not in options:
            raise SpecError(key, f"{value!r} is not one of {', '.join(options)}")
        return text
    return parse


_PARSERS = {
    "input": lambda key, value: str(value),
    "resize": lambda key, value: _sizes(key, value, True),
    "center-crop": _crop,
    "interpolation": _choice(INTERPOLATIONS, False),
    "scale": _number,
    "mean": _numbers,
    "std": _numbers,
    "channel-order": _choice(CHANNEL_ORDERS, True),
    "layout": _choice(LAYOUTS, True),
    "dtype": _choice(DTYPES, False),
}


def _check_consistent(spec: PreprocessSpec) -> None:
    for key, values in (("mean", spec.mean), ("std", spec.std)):
        if values is not None and len(values) not in (1, spec.channels):
            raise SpecError(key, f"{len(values)} values for {spec.channels} channel(s) ({spec.channel_order})")
    if spec.dtype == "uint8" and (spec.scale != 1.0 or spec.mean or spec.std):
        raise SpecError("dtype", "uint8 output takes the pixels as they are: drop scale, mean and std")


# ---- against the model --------------------------------------------------------------------------------
def resolve_spec(spec: PreprocessSpec, specs: Sequence[TensorInfo]) -> Tuple[PreprocessSpec, TensorInfo]:
    """Pick the model input, fill `layout` and `dtype` from it, and check that everything fits."""
    target = _target_input(spec, specs)
    shape = target.shape
    where = f"preprocessing spec vs input '{target.name}' {format_shape(shape)}"
    model_dtype = target.numpy_dtype
    if model_dtype is None or not (np.issubdtype(model_dtype, np.floating) or model_dtype == np.uint8):
        raise InputDataError(f"{where}: the input is {target.dtype_name}; images can feed float or uint8 inputs only")
    if spec.dtype and np.dtype(spec.dtype) != model_dtype:
        raise InputDataError(f"{where}: the spec makes {spec.dtype}, the model expects {model_dtype}",
                             hint=f"set dtype: {model_dtype} (or leave it out to follow the model)")
    layout = spec.layout or _guess_layout(shape, spec.channels)
    rank = len(layout)
    if shape is not None and len(shape) != rank:
        raise InputDataError(f"{where}: layout {layout} has {rank} axes, the input has {len(shape)}",
                             hint="set layout: NCHW or NHWC for 4-D inputs, CHW or HWC for 3-D ones")
    resolved = replace(spec, input=target.name, layout=layout, dtype=spec.dtype or str(model_dtype))
    if shape is not None:
        dims = dict(zip(layout, shape))
        _check_dim(where, "channel", dims.get("C"), spec.channels, f"channel-order {spec.channel_order} gives "
                   f"{spec.channels} channel(s)", hint=_layout_hint(shape, layout, spec.channels))
        _check_dim(where, "batch", dims.get("N"), 1, "one image is one sample of batch 1",
                   hint="use a model with batch 1 or a dynamic batch axis")
        size = spec.out_size()
        if size is not None:
            for axis, got in zip("HW", size):
                _check_dim(where, "height" if axis == "H" else "width", dims.get(axis), got,
                           f"the spec makes {size[0]}x{size[1]} images", hint="change center-crop or resize")
    return resolved, target


def _target_input(spec: PreprocessSpec, specs: Sequence[TensorInfo]) -> TensorInfo:
    names = [s.name for s in specs]
    if spec.input is not None:
        for s in specs:
            if s.name == spec.input:
                return s
        raise InputDataError(f"preprocessing spec: input '{spec.input}' is not an input of the model",
                             hint=f"inputs: {', '.join(names)}")
    if len(specs) != 1:
        raise InputDataError(f"preprocessing spec: the model has {len(specs)} inputs ({', '.join(names)}); "
                             "say which one takes the images", hint="add 'input: NAME' to the spec")
    return specs[0]


def _guess_layout(shape: Optional[Tuple[Any, ...]], channels: int) -> str:
    if shape is not None and len(shape) in (3, 4):
        prefix = "N" if len(shape) == 4 else ""
        if shape[-1] == channels and shape[-3] != channels:
            return prefix + "HWC"
        return prefix + "CHW"
    return "NCHW"


def _layout_hint(shape: Tuple[Any, ...], layout: str, channels: int) -> str:
    other = layout.replace("CHW", "HWC") if "CHW" in layout else layout.replace("HWC", "CHW")
    if dict(zip(other, shape)).get("C") == channels:
        return f"the input looks {other}: set layout: {other}"
    return "set channel-order: GRAY for 1-channel inputs, RGB or BGR for 3-channel ones"


def _check_dim(where: str, what: str, model_dim: Any, got: int, because: str, hint: str) -> None:
    if isinstance(model_dim, int) and model_dim >= 0 and model_dim != got:
        raise InputDataError(f"{where}: {what} is {model_dim} in the model, but {because}", hint=hint)


# ---- the pipeline on one decoded image ---------------------------------------------------------------
def resized_size(spec: PreprocessSpec, width: int, height: int) -> Tuple[int, int]:
    """(width, height) after `resize` (torchvision's rule for one number: the shorter side)."""
    if not spec.resize:
        return width, height
    if len(spec.resize) == 2:
        return spec.resize[1], spec.resize[0]
    size = spec.resize[0]
    if width <= height:
        return size, int(size * height / width)
    return int(size * width / height), size


def crop_box(spec: PreprocessSpec, width: int, height: int) -> Optional[Tuple[int, int, int, int]]:
    """(left, top, right, bottom) of the center crop, or None; the offsets round as torchvision's."""
    if not spec.center_crop:
        return None
    crop_h, crop_w = spec.center_crop
    top = int(round((height - crop_h) / 2.0))
    left = int(round((width - crop_w) / 2.0))
    return left, top, left + crop_w, top + crop_h


def normalise(spec: PreprocessSpec, pixels: np.ndarray) -> np.ndarray:
    """HxWxC (or HxW) pixels -> the model's tensor: scale, channel order, mean/std, layout, dtype."""
    # float32 arithmetic, as torchvision's ToTensor/Normalize (float64 only for float64 inputs)
    work = np.float64 if spec.dtype == "float64" else np.float32
    x = pixels if spec.dtype == "uint8" else pixels.astype(work)
    if x.ndim == 2:
        x = x[:, :, None]
    if spec.channel_order == "BGR":
        x = x[:, :, ::-1]
    if spec.dtype != "uint8":
        x *= work(spec.scale)
        if spec.mean is not None:
            x -= np.asarray(spec.mean, work)
        if spec.std is not None:
            x /= np.asarray(spec.std, work)
    layout = spec.layout or "NCHW"
    if "CHW" in layout:
        x = x.transpose(2, 0, 1)
    if layout.startswith("N"):
        x = x[None]
    return np.ascontiguousarray(x.astype(spec.dtype or "float32"))


def resize_filter_name(interpolation: str) -> str:
    """Pillow's `Image.Resampling` member for an `interpolation` value."""
    return interpolation.upper()
