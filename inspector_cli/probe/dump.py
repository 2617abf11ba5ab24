"""Writing one sample's tensors to .npz under a size cap (`--dump DIR`, `--dump-max-bytes`).

Arrays are streamed into the zip one at a time (`np.lib.format.write_array`, never pickled), in
topological order, until the next one would pass the cap; those left out are listed. The
sample's inputs go to a second file that `--inputs` accepts as it is, so the trigger replays.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from ..errors import UsageError
from ..results.probe import DumpInfo

DEFAULT_MAX_BYTES = 256 << 20


def safe_stem(sample: str) -> str:
    """A file-name stem from a sample id ('s003.npz' -> 's003')."""
    name = Path(sample).name
    for suffix in (".npz", ".npy", ".pb"):
        name = name.removesuffix(suffix)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "sample"


class NpzWriter:
    """An .npz file filled array by array, stopping at `max_bytes` of array data."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.written: List[str] = []
        self.skipped: List[str] = []
        self.bytes = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._zip: Optional[zipfile.ZipFile] = zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True)
        except OSError as exc:
            raise UsageError(f"{path}: cannot write the dump ({exc.strerror or exc})", hint="check --dump") from exc

    def add(self, name: str, array: np.ndarray) -> bool:
        assert self._zip is not None
        array = np.asarray(array)
        if name in self.written or name in self.skipped:
            return False
        if self.bytes + array.nbytes > self.max_bytes:
            self.skipped.append(name)
            return False
        # np.load strips the '.npy' suffix back off; names keep their slashes inside the zip.
        with self._zip.open(name + ".npy", "w", force_zip64=True) as handle:
            np.lib.format.write_array(handle, np.ascontiguousarray(array), allow_pickle=False)
        self.written.append(name)
        self.bytes += array.nbytes
        return True

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
            self._zip = None


def open_dump(directory: str, sample: str, max_bytes: int) -> NpzWriter:
    """The writer of `DIR/<sample>.tensors.npz`."""
    return NpzWriter(Path(directory) / f"{safe_stem(sample)}.tensors.npz", max_bytes)


def finish_dump(writer: NpzWriter, inputs: Optional[Dict[str, np.ndarray]]) -> DumpInfo:
    """Close the tensors file and write the sample's inputs beside it."""
    writer.close()
    inputs_path = None
    if inputs is not None:
        inputs_path = writer.path.with_name(writer.path.name.replace(".tensors.npz", ".inputs.npz"))
        np.savez(inputs_path, **inputs)
    return DumpInfo(tensors_path=str(writer.path), inputs_path=str(inputs_path) if inputs_path else None,
                    written=list(writer.written), skipped=list(writer.skipped), bytes=writer.bytes,
                    max_bytes=writer.max_bytes)
