"""`show_inputs` and `make_inputs`: look at a data folder, or write one as .npz for a model.

Statistics stream (running sums in float64), so a folder of any size is read in constant memory.
"""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

import numpy as np

from ..core.elemtypes import INTEGER_TYPES, elem_type_of
from ..diff.values import layout
from ..config.inputs import InputsConfig
from ..core.graph import load_model
from ..core.input_formats import folder_member_suffixes, numpy_file_error
from ..core.inputs import SampleRef, SampleSet, discover_samples, open_samples
from ..core.types import TensorInfo, format_shape
from ..errors import InputDataError, UsageError
from ..progress import Progress, no_progress
from ..results.base import ModelRef
from ..results.inputs import InputsResult, InputStats


class InputTally:
    """Running statistics of one input over samples (finite values only in min/max/mean/std)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtypes: List[str] = []
        self.shapes: List[str] = []
        self.samples = self.elements = self.finite = self.nan = self.inf = 0
        self.total = self.total_sq = 0.0
        self.low, self.high = math.inf, -math.inf
        self.integer_valued = True

    def add(self, array: np.ndarray) -> None:
        self.samples += 1
        self.elements += array.size
        opaque = array.dtype.kind == "V" and elem_type_of(array.dtype) is None
        # ONNX's name of bfloat16, float8, int4...; an .npz of ml_dtypes arrays read without the model holds
        # opaque items whose type only the model's input says
        label = f"{array.dtype.itemsize}-byte items (give -m MODEL)" if opaque else layout(array).dtype
        if label not in self.dtypes:
            self.dtypes.append(label)
        shape = format_shape(tuple(array.shape))
        if shape not in self.shapes:
            self.shapes.append(shape)
        if opaque:
            return
        values = array.astype(np.float64, copy=False).ravel()
        if np.issubdtype(array.dtype, np.floating) or elem_type_of(array.dtype) not in (None, *INTEGER_TYPES):
            nan = np.isnan(values)
            inf = np.isinf(values)
            self.nan += int(nan.sum())
            self.inf += int(inf.sum())
            values = values[~(nan | inf)]
            if values.size and self.integer_valued:
                self.integer_valued = bool(np.all(values == np.round(values)))
        if values.size:
            self.finite += values.size
            self.total += float(values.sum())
            self.total_sq += float(np.dot(values, values))
            self.low = min(self.low, float(values.min()))
            self.high = max(self.high, float(values.max()))

    def stats(self) -> InputStats:
        if not self.finite:
            return InputStats(self.name, self.dtypes, self.shapes[:5], self.samples, self.elements,
                              nan=self.nan, inf=self.inf)
        mean = self.total / self.finite
        std = math.sqrt(max(self.total_sq / self.finite - mean * mean, 0.0))
        return InputStats(self.name, self.dtypes, self.shapes[:5], self.samples, self.elements, self.low, self.high,
                          mean, std, self.nan, self.inf, self.integer_valued,
                          looks_like(self.low, self.high, mean, std, self.integer_valued))


def looks_like(low: float, high: float, mean: float, std: float, integer_valued: bool) -> str:
    """A plain reading of a value range, so [0, 255] fed where [0, 1] was expected stands out."""
    if low >= 0 and 1.5 < high <= 255:
        return "pixels [0, 255]" if integer_valued else "[0, 255]"
    if low >= 0 and high <= 1:
        return "[0, 1]"
    if low >= -1 and high <= 1:
        return "[-1, 1]"
    if abs(mean) < 0.5 and 0.5 < std < 2:
        return "normalised (mean ~0, std ~1)"
    return ""


def range_warnings(stats: Sequence[InputStats]) -> List[str]:
    warnings = []
    for s in stats:
        if s.looks_like.endswith("[0, 255]") and any("float" in d for d in s.dtypes):
            warnings.append(f"input '{s.name}' ranges over [{s.min:.4g}, {s.max:.4g}] as {'/'.join(s.dtypes)}: "
                            "raw pixel scale? A model trained on [0, 1] or normalised images needs scale 1/255 "
                            "(and mean/std) in the preprocessing spec")
        if s.nan or s.inf:
            warnings.append(f"input '{s.name}' holds {s.nan} NaN and {s.inf} Inf value(s)")
    return warnings


def _tally(samples: SampleSet, progress: Progress, on_sample=None) -> List[InputStats]:
    tallies: Dict[str, InputTally] = {}
    total = len(samples)
    for done, (sample_id, feeds) in enumerate(samples, start=1):
        for name, array in feeds.items():
            tallies.setdefault(name, InputTally(name)).add(np.asarray(array))
        if on_sample is not None:
            on_sample(sample_id, feeds)
        progress(done, total, sample_id)
    order = [s.name for s in samples.specs]
    return [tallies[n].stats() for n in order if n in tallies] + \
        [t.stats() for n, t in tallies.items() if n not in order]


def show_inputs(paths: Sequence[str], model: Optional[str] = None, config: Optional[InputsConfig] = None,
                *, progress: Progress = no_progress) -> InputsResult:
    """Names, dtypes, shapes and value statistics of every input over the samples under `paths`.

    With `model`, samples are checked against its inputs (and images/.bin files can be decoded);
    without it, names come from the files (.npz keys, .npy, .pb and per-sample folders).
    """
    config = config or InputsConfig(inputs=tuple(paths))
    models: List[ModelRef] = []
    if model:
        graph = load_model(model)
        models.append(ModelRef.of(graph, "model"))
        samples = discover_samples(paths, graph.inputs, config.reader_options)
    else:
        probe = discover_samples(paths, [TensorInfo("input")], {})
        samples = discover_samples(paths, infer_specs(probe.refs[0]), config.reader_options)
    if config.limit:
        samples = samples.subset(samples.refs[:config.limit])
    stats = _tally(samples, progress)
    return InputsResult(action="show", models=models, config=config.to_dict(), inputs=samples.describe(),
                        stats=stats, samples=len(samples), warnings=range_warnings(stats))


def infer_specs(ref: SampleRef) -> List[TensorInfo]:
    """Input names of a data set without a model, read from its first sample (no dtypes or shapes)."""
    path = Path(ref.path or "")
    if ref.kind == "folder":
        members = set(folder_member_suffixes())
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in members and not p.name.startswith("output_"))
        if any(p.suffix.lower() not in (".npy", ".pb") for p in files):
            raise UsageError(f"{path}: images and .bin dumps need --model (it says their dtype and shape)")
        return [TensorInfo(p.stem) for p in files]
    suffix = path.suffix.lower()
    if suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as archive:
                return [TensorInfo(key) for key in archive.files]
        except Exception as exc:  # BadZipFile, truncated: the file named, exit 3
            raise numpy_file_error(path, exc, ".npz") from exc
    if suffix == ".npy":
        return [TensorInfo("input")]
    if suffix == ".pb":
        import onnx

        from google.protobuf.message import DecodeError

        tensor = onnx.TensorProto()
        try:
            tensor.ParseFromString(path.read_bytes())
        except DecodeError as exc:
            raise InputDataError(f"{path}: not a readable ONNX TensorProto ({exc})") from exc
        return [TensorInfo(tensor.name or path.stem)]
    raise UsageError(f"{path}: images and .bin dumps need --model (it says their dtype and shape)",
                     hint="mi inputs show DATA --model model.onnx")


def make_inputs(model: str, out: str, config: InputsConfig, *, progress: Progress = no_progress) -> InputsResult:
    """Write samples for `model` to `out` as one .npz per sample (keys = input names).

    Samples are synthetic (`config.synthetic`, count and value ranges) or read from
    `config.inputs` in any supported format (images through the preprocessing spec, raw dumps).
    """
    graph = load_model(model)
    folder = Path(out)
    _check_out(folder, config.force)
    samples = open_samples(config.inputs, graph.inputs, config.synthetic, config.reader_options)
    if config.inputs and config.limit:
        samples = samples.subset(samples.refs[:config.limit])
    folder.mkdir(parents=True, exist_ok=True)
    written: List[str] = []
    used: Set[str] = set()

    def write(sample_id: str, feeds: Dict[str, np.ndarray]) -> None:
        target = folder / _file_name(sample_id, used)
        buffer = io.BytesIO()
        np.savez(buffer, **feeds)
        from ..serialize import write_atomic

        write_atomic(target, buffer.getvalue())
        written.append(str(target))

    stats = _tally(samples, progress, write)
    return InputsResult(action="make", models=[ModelRef.of(graph, "model")], config=config.to_dict(),
                        inputs=samples.describe(), stats=stats, samples=len(samples), written=written,
                        out=str(folder), warnings=range_warnings(stats))


def _check_out(folder: Path, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: is a file", hint="give a folder")
    if folder.is_dir() and not force:
        existing = sorted(folder.glob("*.npz"))
        if existing:
            raise UsageError(f"--out {folder}: already holds {len(existing)} .npz file(s)",
                             hint="use another folder, or --force to write into it")


def _file_name(sample_id: str, used: Set[str]) -> str:
    stem = "sample_" + sample_id[len("synthetic_"):] if sample_id.startswith("synthetic_") else Path(sample_id).stem
    name, n = f"{stem}.npz", 1
    while name in used:
        n += 1
        name = f"{stem}-{n}.npz"
    used.add(name)
    return name
