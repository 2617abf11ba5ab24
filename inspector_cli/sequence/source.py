"""Step inputs of a sequence, read one step at a time (memory flat in the number of steps).

Three layouts:
- a folder of per-step samples in natural order (`step_0000.npz`, `step_0001.npz`, ... or one
  folder per step), read through core/inputs like any data set;
- one `.npz` whose arrays carry a leading time axis: each member is read a run of steps at a
  time (stored members at their offset in the file, compressed ones streamed; nothing is loaded whole);
- one array (`.npy`, memory-mapped) or audio file (`.wav`, PCM read frame by frame) cut into
  chunks of `chunk` values along its first axis, each reshaped to the model input.
"""
from __future__ import annotations

import os
import struct
import wave
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..core.inputs import check_feeds, discover_samples
from ..core.types import TensorInfo, TensorMap
from ..errors import InputDataError, UsageError


@dataclass
class StepSource:
    """Where the step inputs come from; `steps(start)` yields (index, feeds) from step `start` on."""

    path: Path
    specs: List[TensorInfo]
    layout: str
    """'folder', 'npz-time' or 'chunks'."""
    chunk: Optional[int] = None
    length: Optional[int] = None
    """Number of steps when known in advance."""
    notes: List[str] = field(default_factory=list)

    def steps(self, start: int = 0, limit: Optional[int] = None) -> Iterator[Tuple[int, TensorMap]]:
        """(step index, feeds) for steps start, start+1, ... (at most `limit` steps in all)."""
        if self.layout == "npz-time":
            return self._npz(start, limit)  # stops at `limit` itself: no generator around it
        return self._limited(start, limit)

    def _limited(self, start: int, limit: Optional[int]) -> Iterator[Tuple[int, TensorMap]]:
        reader = {"folder": self._folder, "chunks": self._chunks}[self.layout]
        for index, feeds in reader(start):
            if limit is not None and index >= limit:
                return
            yield index, feeds

    def describe(self) -> Dict[str, object]:
        return {"path": str(self.path), "layout": self.layout, "chunk": self.chunk, "steps": self.length,
                "notes": list(self.notes)}

    # ---- layouts ---------------------------------------------------------------------------------
    def _folder(self, start: int) -> Iterator[Tuple[int, TensorMap]]:
        samples = discover_samples([str(self.path)], self.specs)
        for index, ref in enumerate(samples.refs):
            if index >= start:
                yield index, samples.load(ref)

    def _npz(self, start: int, limit: Optional[int]) -> Iterator[Tuple[int, TensorMap]]:
        with zipfile.ZipFile(self.path) as archive, open(self.path, "rb") as raw:
            streams = {name[:-4]: _MemberStream(archive, name, self.path, raw.fileno()) for name in _npz_members(archive)}
            names = _names_for(list(streams), self.specs, self.path)
            length = min(s.steps for s in streams.values())
            if limit is not None:
                length = min(length, limit)
            # (input name, stream, whether the step array needs a leading batch axis), decided once
            ranks = {s.name: len(s.shape) for s in self.specs if s.shape is not None}
            plan = [(names[key], stream, ranks.get(names[key]) == len(stream.step_shape) + 1)
                    for key, stream in streams.items()]
            ahead = min(stream.ahead for stream in streams.values())
            index = 0
            checked = False
            while index < length:
                count = min(ahead, length - index)
                if index + count <= start:  # before the first step asked for: skipped, not read when stored
                    for _, stream, _ in plan:
                        stream.skip(count)
                    index += count
                    continue
                # each member's `count` steps in one read, then per step a view of each (no copies)
                arrays = [(name, stream.read(count, batch)) for name, stream, batch in plan]
                only, array = arrays[0] if len(arrays) == 1 else (None, None)
                for i in range(max(0, start - index), count):
                    # one step input (the usual streaming model): a dict display, no comprehension frame
                    # `[i, ...]`, not `[i]`: a scalar input per step (Silero VAD's sample rate) is then a 0-d
                    # array, not a numpy scalar that onnxruntime refuses ('Unable to handle object of type')
                    feeds = {only: array[i, ...]} if only is not None else {name: values[i, ...]
                                                                            for name, values in arrays}
                    if not checked:  # every step of a time-axis array has the same dtype and shape
                        check_feeds(feeds, self.specs, f"step {index + i}")
                        checked = True
                    yield index + i, feeds
                index += count

    def _chunks(self, start: int) -> Iterator[Tuple[int, TensorMap]]:
        assert self.chunk
        spec = self.specs[0]
        for index, values in enumerate(_chunk_values(self.path, self.chunk)):
            if index < start:
                continue
            shape = _chunk_shape(spec, values.size)
            array = values.reshape(shape).astype(spec.numpy_dtype or np.float32, copy=False)
            yield index, check_feeds({spec.name: array}, self.specs, f"step {index}")


def open_steps(path: "str | Path", specs: Sequence[TensorInfo], chunk: Optional[int] = None) -> StepSource:
    """The step source at `path` for a model whose step (non-state) inputs are `specs`."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder", hint="check --sequence")
    specs = list(specs)
    if path.is_dir():
        if chunk:
            raise UsageError(f"--chunk {chunk}: applies to one array or audio file, not to the folder {path}")
        count = len(discover_samples([str(path)], specs).refs)
        return StepSource(path, specs, "folder", length=count)
    suffix = path.suffix.lower()
    if chunk:
        if len(specs) != 1:
            raise UsageError(f"--chunk {chunk}: the model has {len(specs)} step inputs "
                             f"({', '.join(s.name for s in specs)}); chunks feed exactly one")
        if suffix not in (".npy", ".wav"):
            raise UsageError(f"{path}: --chunk reads .npy or .wav files, not '{suffix}'")
        total = _value_count(path)
        return StepSource(path, specs, "chunks", chunk=chunk, length=total // chunk,
                          notes=[f"{total % chunk} trailing value(s) dropped"] if total % chunk else [])
    if suffix == ".npz":
        with zipfile.ZipFile(path) as archive:
            steps = [_MemberStream(archive, m, path, -1).steps for m in _npz_members(archive)]
        return StepSource(path, specs, "npz-time", length=min(steps) if steps else 0)
    raise UsageError(f"{path}: a sequence is a folder of step samples, an .npz with a leading time axis, "
                     f"or an .npy/.wav file with --chunk N")


# ---- .npz with a time axis -----------------------------------------------------------------------
def _npz_members(archive: zipfile.ZipFile) -> List[str]:
    return [n for n in archive.namelist() if n.endswith(".npy")]


class _MemberStream:
    """One array of an .npz read in runs of steps along its first axis.

    A stored (uncompressed) member, what np.savez writes, is read with os.pread at its offset in the
    file: no zip stream, no CRC pass over the data, and steps before a resumed run's first step are
    skipped without reading them. Not a memory map: the pages of a map that the run has passed
    would count in the process's resident memory, which must stay flat in the number of steps.
    A compressed member is streamed through zipfile."""

    def __init__(self, archive: zipfile.ZipFile, member: str, path: Path, fd: int) -> None:
        self.key = member[:-4]
        self._handle = archive.open(member)
        try:
            version = np.lib.format.read_magic(self._handle)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(self._handle)
        except ValueError as exc:
            raise InputDataError(f"{path}: member '{self.key}' is not a plain .npy array ({exc})") from exc
        if dtype.hasobject:
            raise InputDataError(f"{path}: member '{self.key}' holds Python objects; refused for safety")
        if fortran or not shape:
            raise InputDataError(f"{path}: member '{self.key}' needs a leading time axis in C order "
                                 f"(shape {list(shape)})")
        self.dtype = dtype
        self.step_shape = tuple(shape[1:])
        self.steps = int(shape[0])
        self._bytes = int(np.prod(self.step_shape, dtype=np.int64)) * dtype.itemsize
        # Up to 64 steps (at most 1 MiB) per read: one read per step cost as much as the whole
        # metric work of a small model. Memory stays bounded by this read-ahead.
        self.ahead = max(1, min(64, (1 << 20) // max(1, self._bytes)))
        self._fd = fd
        self._path = path
        self._offset: Optional[int] = _stored_offset(archive, member, self._handle.tell())
        if self._offset is not None and self._handle.tell() + self.steps * self._bytes > archive.getinfo(member).file_size:
            # pread is not bounded by the member as the zip stream is: it would read the next member's bytes
            raise InputDataError(f"{path}: member '{self.key}' declares {self.steps} steps but holds fewer "
                                 f"(truncated archive?)")

    def read(self, count: int, batch: bool) -> np.ndarray:
        """The next `count` steps as one array [count, (1,) *step_shape] (read-only)."""
        size = self._bytes * count
        if self._offset is not None:
            data = os.pread(self._fd, size, self._offset)
            self._offset += size
        else:
            data = self._handle.read(size)
        if len(data) < size:
            raise InputDataError(f"{self._path}: member '{self.key}' ends early (truncated archive?)")
        return np.frombuffer(data, dtype=self.dtype).reshape((count,) + ((1,) if batch else ()) + self.step_shape)

    def skip(self, count: int) -> None:
        if self._offset is not None:
            self._offset += self._bytes * count
        else:
            self.read(count, False)


def _stored_offset(archive: zipfile.ZipFile, member: str, header: int) -> Optional[int]:
    """Where the array data of a stored, unencrypted member starts in the file (None otherwise)."""
    info = archive.getinfo(member)
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1 or archive.fp is None:
        return None
    archive.fp.seek(info.header_offset)
    local = archive.fp.read(30)  # the local file header: its name and extra field lengths end it
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        return None
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_length + extra_length + header


def _names_for(keys: List[str], specs: Sequence[TensorInfo], path: Path) -> Dict[str, str]:
    names = [s.name for s in specs]
    if all(k in names for k in keys):
        missing = [n for n in names if n not in keys]
        if missing:
            raise InputDataError(f"{path}: no array for step input '{missing[0]}'")
        return {k: k for k in keys}
    if len(keys) == len(names) == 1:
        return {keys[0]: names[0]}
    raise InputDataError(f"{path}: arrays {', '.join(keys)} do not name the step inputs {', '.join(names)}")


# ---- chunked arrays and audio --------------------------------------------------------------------
def _value_count(path: Path) -> int:
    if path.suffix.lower() == ".wav":
        with wave.open(str(path), "rb") as audio:
            return audio.getnframes() * audio.getnchannels()
    return int(_open_npy(path).size)


def _open_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputDataError(f"{path}: not a readable .npy file ({exc})") from exc


def _chunk_values(path: Path, chunk: int) -> Iterator[np.ndarray]:
    if path.suffix.lower() == ".wav":
        with wave.open(str(path), "rb") as audio:
            width, channels = audio.getsampwidth(), audio.getnchannels()
            if width != 2:
                raise InputDataError(f"{path}: only 16-bit PCM audio is read ({8 * width}-bit given)")
            frames = max(1, chunk // channels)
            while True:
                data = audio.readframes(frames)
                if len(data) < frames * channels * 2:
                    return
                yield np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    array = _open_npy(path).reshape(-1)
    for begin in range(0, array.size - chunk + 1, chunk):
        yield np.array(array[begin:begin + chunk])  # copy out of the memory map, one chunk at a time


def _chunk_shape(spec: TensorInfo, count: int) -> List[int]:
    """The input's shape with its free dimension sized so that it holds `count` values."""
    if spec.shape is None:
        return [count]
    fixed = [d if isinstance(d, int) and d >= 0 else None for d in spec.shape]
    known = int(np.prod([d for d in fixed if d is not None])) if any(d is not None for d in fixed) else 1
    free = [i for i, d in enumerate(fixed) if d is None]
    if not free:
        if known != count:
            raise UsageError(f"--chunk {count}: input '{spec.name}' takes {known} values per step")
        return [int(d) for d in fixed]  # type: ignore[arg-type]
    if count % known:
        raise UsageError(f"--chunk {count}: not a multiple of the {known} fixed values of input '{spec.name}'")
    shape = [d if d is not None else 1 for d in fixed]
    shape[free[-1]] = count // known  # batch-like leading free dims stay 1; the last free dim takes the chunk
    return shape  # type: ignore[return-value]
