"""Readers for sample files: .npz, .npy, ONNX TensorProto .pb, and per-sample folders.

Each reader turns one path into a name -> array map (names may be positional placeholders that
`inputs.py` resolves against the model). More formats register with `register_reader`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..errors import InputDataError
from .types import TensorInfo, TensorMap

Reader = Callable[[Path, Sequence[TensorInfo], Dict[str, object]], TensorMap]
"""(path, model inputs, reader options) -> feeds. Raise InputDataError naming the file."""

OptionsPreparer = Callable[[Dict[str, object], Sequence[TensorInfo]], Dict[str, object]]
"""(reader options, model inputs) -> options resolved against the model; raise on a mismatch."""

_READERS: Dict[str, Reader] = {}
_FOLDER_MEMBERS = {".npy", ".pb"}  # suffixes that may hold one input of a per-sample folder
_PREPARERS: List[OptionsPreparer] = []
POSITIONAL = "\x00pos"  # prefix of placeholder names meaning "the k-th model input"


def register_reader(suffixes: Sequence[str], reader: Reader, *, folder_member: bool = False) -> None:
    """Register a reader for file suffixes such as ('.png', '.jpg').

    `folder_member`: such files may also be one input each inside a per-sample folder.
    """
    for suffix in suffixes:
        _READERS[suffix.lower()] = reader
        if folder_member:
            _FOLDER_MEMBERS.add(suffix.lower())


def folder_member_suffixes() -> List[str]:
    return sorted(_FOLDER_MEMBERS)


def register_options_preparer(preparer: OptionsPreparer) -> None:
    """Register a function that checks and completes reader options against the model's inputs
    once per data set (before any file is read), so the resolved options are recorded in results."""
    _PREPARERS.append(preparer)


def prepare_options(options: Dict[str, object], specs: Sequence[TensorInfo]) -> Dict[str, object]:
    for preparer in _PREPARERS:
        options = preparer(options, specs)
    return options


def reader_for(path: Path) -> Optional[Reader]:
    return _READERS.get(path.suffix.lower())


def known_suffixes() -> List[str]:
    return sorted(_READERS)


def positional(index: int) -> str:
    return f"{POSITIONAL}{index}"


def numpy_file_error(path: Path, exc: BaseException, kind: str) -> InputDataError:
    """One error naming the file for whatever numpy, zipfile or zlib raised on a bad sample file.

    A pickled (object) array is refused for safety; anything else (truncated, bad CRC, not a zip,
    short header) is "truncated or corrupt". Reading never runs pickles (allow_pickle=False).
    """
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "pickle" in detail.lower() or "object arrays" in detail.lower():
        return InputDataError(f"{path}: cannot read {kind} without unpickling ({detail})",
                              hint="save plain numeric arrays; object arrays are refused for safety")
    return InputDataError(f"{path}: not a readable {kind} file, truncated or corrupt ({detail})")


_NPY_MAGIC = b"\x93NUMPY"


def _read_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # ValueError, EOFError, OSError, struct.error...: all mean a bad file
        with open(path, "rb") as handle:
            head = handle.read(len(_NPY_MAGIC))
        if not head.startswith(_NPY_MAGIC) and not head.startswith(b"\x80"):
            # numpy calls anything without its magic "pickled data"; a pickle starts with 0x80.
            raise InputDataError(f"{path}: not a .npy file, truncated or corrupt (no NumPy header)") from exc
        raise numpy_file_error(path, exc, ".npy") from exc


def read_npy(path: Path, specs: Sequence[TensorInfo], options: Dict[str, object]) -> TensorMap:
    """One array: named after the file when the stem is an input name, else the single input."""
    array = _read_npy(path)
    names = [s.name for s in specs]
    if path.stem in names:
        return {path.stem: array}
    if len(specs) == 1:
        return {specs[0].name: array}
    raise InputDataError(
        f"{path}: a .npy file holds one array but the model has {len(specs)} inputs ({', '.join(names)})",
        hint="use one .npz per sample, or one folder per sample with <input_name>.npy files",
    )


_NPZ_POSITIONAL = re.compile(r"arr_(\d+)$")


def load_npz(path: Path) -> Dict[str, np.ndarray]:
    """Every array of an `.npz` (never unpickling). An ml_dtypes array numpy cannot describe again (np.save
    writes float8_e5m2 as '<f1', which np.load refuses) comes back as void items of its size, which
    `inputs.check_feeds` reads as the model input's type; bad files raise InputDataError naming them."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except ValueError as exc:
        if "descr" not in str(exc):
            raise numpy_file_error(path, exc, ".npz") from exc
        try:
            return _load_npz_opaque(path)
        except Exception as inner:
            raise numpy_file_error(path, inner, ".npz") from inner
    except Exception as exc:  # BadZipFile, zlib.error, bad CRC, EOFError...: a bad file
        raise numpy_file_error(path, exc, ".npz") from exc


def _load_npz_opaque(path: Path) -> Dict[str, np.ndarray]:
    """The members of an .npz whose dtype numpy does not know, as void items of the declared size."""
    import ast
    import struct
    import zipfile

    arrays: Dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            data = archive.read(member)
            if not data.startswith(_NPY_MAGIC):
                raise ValueError(f"member {member} is not a .npy array")
            major = data[6]
            size_format, start = ("<H", 10) if major == 1 else ("<I", 12)
            (length,) = struct.unpack(size_format, data[8:start])
            header = ast.literal_eval(data[start:start + length].decode("latin1"))  # a dict literal: never code
            descr = header["descr"]
            try:
                dtype = np.dtype(descr)
            except TypeError:  # '<f1' and the like: keep the bytes, one item per element
                dtype = np.dtype(f"V{int(re.sub(r'[^0-9]', '', descr))}")
            if dtype.hasobject:
                raise ValueError("object arrays cannot be read without unpickling")
            shape = tuple(header["shape"])
            body = data[start + length:]
            array = np.frombuffer(body, dtype=dtype, count=int(np.prod(shape, dtype=np.int64)))
            arrays[member[:-4] if member.endswith(".npy") else member] = \
                array.reshape(shape, order="F" if header.get("fortran_order") else "C").copy()
    return arrays


def read_npz(path: Path, specs: Sequence[TensorInfo], options: Dict[str, object]) -> TensorMap:
    """Keys are input names; `np.savez(f, a, b)` keys (arr_0, arr_1) mean inputs by position."""
    feeds = load_npz(path)
    names = {s.name for s in specs}
    if feeds and not (set(feeds) & names) and all(_NPZ_POSITIONAL.match(k) for k in feeds):
        return {positional(int(_NPZ_POSITIONAL.match(k).group(1))): v for k, v in feeds.items()}  # type: ignore[union-attr]
    return feeds


_ZOO_INPUT = re.compile(r"input_(\d+)\.pb$")


PROTO_KINDS = ("tensor", "sequence", "optional", "map")


def read_proto_value(path: Path, kind: str = "tensor") -> "tuple[str, object]":
    """(name, value) of one saved ONNX value: a TensorProto, or by the graph's declared `kind` a
    SequenceProto (a list), OptionalProto (the value, or None when empty) or MapProto (a dict), as the
    backend test data writes them. Element types numpy lacks come back as ml_dtypes arrays."""
    import onnx
    from google.protobuf.message import DecodeError
    from onnx import numpy_helper

    proto_type, read = {"sequence": (onnx.SequenceProto, numpy_helper.to_list),
                        "optional": (onnx.OptionalProto, numpy_helper.to_optional),
                        "map": (onnx.MapProto, numpy_helper.to_dict)}.get(kind, (onnx.TensorProto, numpy_helper.to_array))
    proto = proto_type()
    try:
        proto.ParseFromString(path.read_bytes())
    except (DecodeError, ValueError, TypeError, RuntimeWarning) as exc:
        raise InputDataError(f"{path}: not a readable ONNX {proto_type.__name__} "
                             f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from exc
    if isinstance(proto, onnx.TensorProto) and proto.data_location == onnx.TensorProto.EXTERNAL:
        raise InputDataError(f"{path}: TensorProto with external data is not supported as an input file")
    try:
        return proto.name, read(proto)
    except Exception as exc:  # numpy_helper raises ValueError, TypeError, KeyError... on inconsistent protos
        raise InputDataError(f"{path}: not a readable ONNX {proto_type.__name__} "
                             f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from exc


def read_pb(path: Path, specs: Sequence[TensorInfo], options: Dict[str, object]) -> TensorMap:
    """An ONNX TensorProto (or the Sequence/Optional/MapProto a non-tensor input takes); its `name` field,
    `input_K.pb` or `<input>.pb` says which input it is."""
    names = [s.name for s in specs]
    zoo = _ZOO_INPUT.match(path.name)
    target = (next((s for s in specs if s.name == path.stem), None)
              or (specs[int(zoo.group(1))] if zoo and int(zoo.group(1)) < len(specs) else None)
              or (specs[0] if len(specs) == 1 else None))
    name, array = read_proto_value(path, target.kind if target is not None else "tensor")
    if name and name in names:
        return {name: array}
    if path.stem in names:
        return {path.stem: array}
    if zoo:
        return {positional(int(zoo.group(1))): array}
    if len(specs) == 1:
        return {specs[0].name: array}
    raise InputDataError(f"{path}: cannot tell which of the model's inputs ({', '.join(names)}) this tensor is",
                         hint="set the TensorProto name, or name the file input_K.pb or <input_name>.pb")


def read_folder(path: Path, specs: Sequence[TensorInfo], options: Dict[str, object]) -> TensorMap:
    """One sample as a folder: `<input>.npy`/`.pb` files, or `input_K.pb` (ONNX model zoo layout)."""
    feeds: TensorMap = {}
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    for file in files:
        if file.suffix.lower() not in _FOLDER_MEMBERS:
            continue
        if file.name.startswith("output_"):
            continue
        if file.suffix.lower() == ".npy":
            part = {file.stem: _read_npy(file)} if file.stem in {s.name for s in specs} or len(files) > 1 \
                else read_npy(file, specs, options)
        elif file.suffix.lower() == ".pb":
            part = read_pb(file, specs, options)
        else:
            part = _READERS[file.suffix.lower()](file, specs, options)
        for key, value in part.items():
            if key in feeds:
                raise InputDataError(f"{path}: input '{key}' is given twice (second time by {file.name})")
            feeds[key] = value
    if not feeds and specs:  # a model without inputs (ONNX's test_constant) takes an empty sample
        raise InputDataError(f"{path}: sample folder holds no input files ({', '.join(sorted(_FOLDER_MEMBERS))})")
    return feeds


register_reader([".npy"], read_npy)
register_reader([".npz"], read_npz)
register_reader([".pb"], read_pb)
