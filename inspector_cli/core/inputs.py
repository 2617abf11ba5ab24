"""Input samples: discovered from files and folders or generated, streamed one at a time, checked.

A `SampleSet` is a list of cheap `SampleRef`s (a file path, or a synthetic index) plus the way to
load one; samples are read only when iterated, so a data set of any size streams in constant
memory, and a set can be sliced into shards or resumed by sample id.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputDataError, UsageError
from . import input_formats
from .input_formats import POSITIONAL, known_suffixes, reader_for
from .synthetic import SyntheticSpec, generate_sample
from . import images, raw_dumps  # noqa: F401  (register the image and .bin readers)
from .elemtypes import ML_DTYPE_NAMES, adopt
from .types import TensorInfo, TensorMap, format_shape


@dataclass(frozen=True)
class SampleRef:
    """One sample, not yet loaded: `kind` is 'file', 'folder' or 'synthetic'."""

    id: str
    kind: str
    path: Optional[str] = None
    index: int = 0


@dataclass
class SampleSet:
    """The samples of a run, loadable one at a time (picklable, so worker processes can load too)."""

    refs: List[SampleRef]
    specs: List[TensorInfo]
    source: str
    synthetic: Optional[SyntheticSpec] = None
    reader_options: Dict[str, Any] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.refs)

    def __iter__(self) -> Iterator[Tuple[str, TensorMap]]:
        for ref in self.refs:
            yield ref.id, self.load(ref)

    def load(self, ref: SampleRef) -> TensorMap:
        """Read one sample and check it against the model's inputs."""
        if ref.kind == "synthetic":
            assert self.synthetic is not None
            return generate_sample(self.synthetic, ref.index)
        assert ref.path is not None
        path = Path(ref.path)
        if ref.kind == "folder":
            raw = input_formats.read_folder(path, self.specs, self.reader_options)
        else:
            reader = reader_for(path)
            if reader is None:
                raise InputDataError(f"{path}: unsupported input file type '{path.suffix}'",
                                     hint=f"supported: {', '.join(known_suffixes())}")
            raw = reader(path, self.specs, self.reader_options)
        return check_feeds(resolve_positional(raw, self.specs, ref.id), self.specs, ref.id)

    def subset(self, refs: Sequence[SampleRef]) -> "SampleSet":
        return SampleSet(list(refs), self.specs, self.source, self.synthetic, self.reader_options, list(self.notes))

    def describe(self) -> Dict[str, Any]:
        """Summary recorded in results: where the samples came from and what the model expects."""
        return {
            "source": self.source,
            "count": len(self.refs),
            "synthetic": self.synthetic.to_dict() if self.synthetic else None,
            "inputs": [{"name": s.name, "dtype": s.dtype_name, "shape": format_shape(s.shape)} for s in self.specs],
            "notes": list(self.notes),
            # How files were decoded (image preprocessing, raw dump layout), resolved against the model.
            **({"reader_options": dict(self.reader_options)} if self.reader_options else {}),
        }


# ---- discovery ------------------------------------------------------------------------------------
def discover_samples(paths: Sequence[str], specs: Sequence[TensorInfo],
                     reader_options: Optional[Dict[str, Any]] = None) -> SampleSet:
    """Find the samples under `paths` (files, data folders, ONNX-zoo test_data_set_N folders)."""
    refs: List[SampleRef] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder", hint="check --inputs")
        refs.extend(_refs_for_path(path))
    if not refs:
        raise InputDataError(f"{', '.join(map(str, paths))}: no input samples found",
                             hint=f"expected {', '.join(known_suffixes())} files, sample folders or test_data_set_N folders")
    _check_unique_ids(refs)
    options = input_formats.prepare_options(dict(reader_options or {}), specs)
    return SampleSet(refs, list(specs), source=", ".join(map(str, paths)), reader_options=options)


def _refs_for_path(path: Path) -> List[SampleRef]:
    if path.is_file():
        return [SampleRef(id=path.name, kind="file", path=str(path))]
    entries = sorted(p for p in path.iterdir() if not p.name.startswith("."))
    zoo_sets = [p for p in entries if p.is_dir() and p.name.startswith("test_data_set_")]
    if zoo_sets:
        zoo_sets.sort(key=lambda p: _natural_key(p.name))
        return [SampleRef(id=p.name, kind="folder", path=str(p)) for p in zoo_sets]
    if any(p.is_file() and p.name.startswith("input_") and p.suffix == ".pb" for p in entries):
        return [SampleRef(id=path.name, kind="folder", path=str(path))]
    refs: List[SampleRef] = []
    members = set(input_formats.folder_member_suffixes())
    for entry in sorted(entries, key=lambda p: _natural_key(p.name)):
        if entry.is_file() and reader_for(entry) is not None:
            refs.append(SampleRef(id=entry.name, kind="file", path=str(entry)))
        elif entry.is_dir() and any(c.suffix.lower() in members for c in entry.iterdir()):
            refs.append(SampleRef(id=entry.name, kind="folder", path=str(entry)))
    return refs


def _natural_key(name: str) -> List[Any]:
    import re

    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _check_unique_ids(refs: List[SampleRef]) -> None:
    seen: Dict[str, int] = {}
    for i, ref in enumerate(refs):
        if ref.id in seen:
            # Same file name under two folders: fall back to the full path to keep ids unique.
            refs[i] = SampleRef(id=str(ref.path), kind=ref.kind, path=ref.path, index=ref.index)
        seen[refs[i].id] = i


def synthetic_samples(specs: Sequence[TensorInfo], spec: SyntheticSpec) -> SampleSet:
    """`spec.count` generated samples (seeded per index, so any subset regenerates identically)."""
    spec = replace(spec, specs=tuple(specs))
    spec.check(specs)
    refs = [SampleRef(id=f"synthetic_{i:04d}", kind="synthetic", index=i) for i in range(spec.count)]
    return SampleSet(refs, list(specs), source="synthetic", synthetic=spec, notes=spec.defaulted())


def open_samples(paths: Sequence[str], specs: Sequence[TensorInfo], synthetic: SyntheticSpec,
                 reader_options: Optional[Dict[str, Any]] = None) -> SampleSet:
    """Samples from `paths` when given, else synthetic ones from the model's input specs."""
    if paths:
        return discover_samples(paths, specs, reader_options)
    return synthetic_samples(specs, synthetic)


# ---- checking -------------------------------------------------------------------------------------
def resolve_positional(feeds: TensorMap, specs: Sequence[TensorInfo], sample: str) -> TensorMap:
    """Replace 'k-th input' placeholders (zoo input_K.pb, npz arr_K) by the model's input names."""
    if not any(k.startswith(POSITIONAL) for k in feeds):
        return feeds
    resolved: TensorMap = {}
    for key, value in feeds.items():
        if key.startswith(POSITIONAL):
            index = int(key[len(POSITIONAL):])
            if index >= len(specs):
                raise InputDataError(f"{sample}: input #{index} given, but the model has only {len(specs)} inputs")
            key = specs[index].name
        resolved[key] = value
    return resolved


def check_feeds(feeds: TensorMap, specs: Sequence[TensorInfo], sample: str) -> TensorMap:
    """Check names, dtypes and shapes of one sample against the model; raise naming what is wrong."""
    expected = {s.name: s for s in specs}
    unknown = [k for k in feeds if k not in expected]
    if unknown:
        raise InputDataError(f"{sample}: unknown input {', '.join(repr(u) for u in unknown)}; "
                             f"the model's inputs are {', '.join(repr(n) for n in expected)}")
    missing = [n for n in expected if n not in feeds]
    if missing:
        raise InputDataError(f"{sample}: missing input {', '.join(repr(m) for m in missing)}",
                             hint=f"the model needs {', '.join(repr(n) for n in expected)}")
    for name, spec in expected.items():
        value = feeds[name]
        if spec.kind != "tensor" or not isinstance(value, np.ndarray):
            continue  # a sequence, optional or map: onnxruntime checks what is inside
        if spec.elem_type in ML_DTYPE_NAMES:  # bfloat16, float8, int4...: an ml_dtypes array, or .npz's void items
            value = feeds[name] = typed_feed(value, spec, sample)
        want = spec.numpy_dtype
        if want is not None and value.dtype != want:
            raise InputDataError(f"{sample}: input '{name}' has dtype {value.dtype}, the model expects {want}",
                                 hint=f"convert it, e.g. array.astype(np.{want})")
        if spec.shape is not None:
            if value.ndim != len(spec.shape) or any(
                isinstance(d, int) and d >= 0 and d != v for d, v in zip(spec.shape, value.shape)
            ):
                raise InputDataError(f"{sample}: input '{name}' has shape {list(value.shape)}, "
                                     f"the model expects {format_shape(spec.shape)}")
    return feeds


def typed_feed(value: np.ndarray, spec: TensorInfo, sample: str) -> np.ndarray:
    """`value` as the ml_dtypes array of input `spec`'s element type (numpy has none for it)."""
    adopted = adopt(value, spec.elem_type)
    if adopted is None:
        raise InputDataError(f"{sample}: input '{spec.name}' has dtype {value.dtype}, the model expects {spec.dtype_name}",
                             hint=f"save it as an ml_dtypes {ML_DTYPE_NAMES[spec.elem_type]} array "
                                  f"(ml_dtypes.{ML_DTYPE_NAMES[spec.elem_type]}), or as a TensorProto .pb")
    return adopted


def adapt_feeds(feeds: TensorMap, dtypes: Dict[str, Optional[np.dtype]]) -> Tuple[TensorMap, List[str]]:
    """Cast float inputs to another model's float dtype (fp32 data into an fp16 model).

    Returns the feeds and a note per cast input; non-float mismatches are left for the runtime to
    reject with its own message.
    """
    adapted: TensorMap = {}
    notes: List[str] = []
    for name, value in feeds.items():
        want = dtypes.get(name)
        if want is not None and value.dtype != want and np.issubdtype(value.dtype, np.floating) \
                and np.issubdtype(want, np.floating):
            adapted[name] = value.astype(want)
            notes.append(f"input '{name}' cast from {value.dtype} to {want} for the second model")
        else:
            adapted[name] = value
    return adapted, notes
