"""Image files as samples: .png, .jpg/.jpeg, .bmp decoded with Pillow, then preprocessed.

Reader options key `preprocess` holds the spec (core/preprocess.py) as a dict; it is resolved
against the model once per data set (`prepare`), and that resolved form is what results record.
Without a spec, images are taken as they are (RGB, NCHW or NHWC as the model looks, the model's
dtype, no scaling): a model that expects [0, 1] then sees [0, 255], and `mi inputs show` makes
that visible.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence

import numpy as np

from ..errors import InputDataError
from .input_formats import register_options_preparer, register_reader
from .preprocess import PreprocessSpec, SpecError, crop_box, normalise, parse_spec, resize_filter_name, \
    resized_size, resolve_spec
from .types import TensorInfo, TensorMap

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
OPTION = "preprocess"


def spec_from_options(options: Dict[str, object]) -> PreprocessSpec:
    raw = options.get(OPTION) or {}
    assert isinstance(raw, dict)
    try:
        return parse_spec(raw)
    except SpecError as exc:
        raise InputDataError(f"preprocessing spec: {exc.key}: {exc}") from None


def prepare(options: Dict[str, object], specs: Sequence[TensorInfo]) -> Dict[str, object]:
    """Resolve a given spec against the model (errors before any image is read)."""
    if OPTION not in options:
        return options
    resolved, _ = resolve_spec(spec_from_options(options), specs)
    return {**options, OPTION: resolved.to_dict()}


def read_image(path: Path, specs: Sequence[TensorInfo], options: Dict[str, object]) -> TensorMap:
    """Decode one image and turn it into the model input's tensor."""
    spec, target = resolve_spec(spec_from_options(options), specs)
    image = _open(path)
    image = image.convert("L" if spec.channel_order == "GRAY" else "RGB")
    width, height = image.size
    new_w, new_h = resized_size(spec, width, height)
    if (new_w, new_h) != (width, height):
        image = image.resize((new_w, new_h), resample=_filter(spec))
    box = crop_box(spec, new_w, new_h)
    if box is not None:
        crop_h, crop_w = spec.center_crop or (0, 0)
        if crop_w > new_w or crop_h > new_h:
            raise InputDataError(f"{path}: image is {new_w}x{new_h} (width x height) after resize, smaller than "
                                 f"the center crop {crop_h}x{crop_w} (height x width)",
                                 hint="resize it first: set resize to at least the crop size")
        image = image.crop(box)
    array = normalise(spec, np.asarray(image))
    _check_size(path, array, target, spec)
    return {target.name: array}


def _open(path: Path) -> Any:
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as exc:  # pragma: no cover - pillow is a dependency; a broken install
        raise InputDataError(f"{path}: reading images needs Pillow", hint="pip install pillow") from exc
    try:
        image = Image.open(path)
        image.load()
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise InputDataError(f"{path}: not a readable image ({exc})") from None
    return image


def _filter(spec: PreprocessSpec) -> Any:
    from PIL import Image

    return getattr(Image.Resampling, resize_filter_name(spec.interpolation))


def _check_size(path: Path, array: np.ndarray, target: TensorInfo, spec: PreprocessSpec) -> None:
    """Images of another size than a static model input: say which and how to fix it."""
    if target.shape is None or len(target.shape) != array.ndim:
        return
    layout = spec.layout or "NCHW"
    want = dict(zip(layout, target.shape))
    got = dict(zip(layout, array.shape))
    if any(isinstance(want.get(a), int) and want[a] >= 0 and want[a] != got[a] for a in "HW"):
        raise InputDataError(f"{path}: the image gives {got['H']}x{got['W']} (height x width), "
                             f"input '{target.name}' expects {want['H']}x{want['W']}",
                             hint="add resize and/or center-crop to the preprocessing spec (--preprocess)")


register_reader(IMAGE_SUFFIXES, read_image, folder_member=True)
register_options_preparer(prepare)
