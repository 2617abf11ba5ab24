"""The external-data guard: every place a TensorProto can carry external data is checked before
anything is read (locations inside the model's folder only, no NUL, numeric offset and length,
files long enough). Used by `load_model`, the lazy loader and validate (MI108/MI109)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import onnx

from ..errors import ModelLoadError
from .protoutil import external_tensors
from .types import stored_bytes



# What is wrong with an external-data reference; validate reports each kind as its own rule.
MISSING = "missing"    # MI108: no location, no such file, or a file shorter than the tensor needs
OUTSIDE = "outside"    # MI109: a location that leaves the model's folder, or holds a NUL byte
MALFORMED = "malformed"  # MI110: an offset or length that is not a non-negative integer


def external_data_problems(model: onnx.ModelProto, model_path: Path,
                           stored: Optional[List[Tuple[str, onnx.TensorProto]]] = None) -> List[Tuple[str, str]]:
    """(tensor name, problem) for every external-data reference that is unsafe or missing, in every
    place a tensor can be stored (`iter_all_tensors`: sparse initializers and subgraph attributes
    too). `stored`: `external_tensors(model.graph)` when the caller holds it (a pass over every node
    saved)."""
    return [(name, text) for name, _, text in external_data_defects(model, model_path, stored)]


def external_data_defects(model: onnx.ModelProto, model_path: Path,
                          stored: Optional[List[Tuple[str, onnx.TensorProto]]] = None) -> List[Tuple[str, str, str]]:
    """(tensor name, kind, problem) for every bad external-data reference: kind is `MISSING`,
    `OUTSIDE` or `MALFORMED`, so each is reported as the defect it is (a non-numeric offset is not
    a path problem)."""
    folder = _Folder(model_path)
    problems: List[Tuple[str, str, str]] = []
    files: Dict[str, Tuple[Optional[Tuple[str, str]], int]] = {}  # location -> (problem, size): once per file
    for where, tensor in external_tensors(model.graph) if stored is None else stored:
        name = tensor.name or f"<unnamed {where}>"
        problem = _external_problem(tensor, folder, files)
        if problem:
            kind, text = problem
            problems.append((name, kind, text if where == "initializer" else f"{text} ({where})"))
    return problems


class _Folder:
    """Where a model's external data may live. Locations are named relative to the folder the model
    is reached through (as onnxruntime and onnx read them), and must resolve inside it, or inside the
    folder of the model file itself when the model is a symlink: the Hugging Face cache keeps
    `snapshots/<rev>/model.onnx` and `model.onnx_data` as symlinks into `blobs/`, and mi's lazy loader
    names the model file by the name it was given. A symlink the model does not share (a data file
    linked to `/etc/...`) still resolves outside both and is refused."""

    def __init__(self, model_path: Path) -> None:
        self.named = model_path.absolute().parent
        self.roots = (self.named.resolve(), model_path.resolve().parent)

    def __str__(self) -> str:
        return str(self.named)

    def target(self, location: str) -> Optional[Path]:
        """The file `location` names, resolved; None when it leaves the allowed folders."""
        target = (self.named / location).resolve()
        return target if any(_is_inside(target, root) for root in self.roots) else None


def _external_problem(tensor: onnx.TensorProto, folder: _Folder,
                      files: Dict[str, Tuple[Optional[Tuple[str, str]], int]]) -> Optional[Tuple[str, str]]:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    if not location:
        return MISSING, "external data without a location"
    if "\x00" in location:
        # A NUL cuts a C string short: 'w.bin\0/../../etc/passwd' may name another file to a reader.
        return OUTSIDE, f"external data location {location!r} holds a NUL byte (unsafe; refused)"
    numbers = {}
    for key in ("offset", "length"):
        text = info.get(key, "") or "0"
        if not text.isdigit():  # digits only: no sign, no spaces, no '1e3'
            return MALFORMED, f"external data {key} {text!r} is not a non-negative integer (refused)"
        numbers[key] = int(text)
    if location not in files:  # the lazy loader's 8,000 references at 50,000 nodes all name one file
        files[location] = _file_problem(location, folder)
    problem, size = files[location]
    if problem:
        return problem
    expected = _stored_bytes(tensor)
    if "length" in info and expected is not None and numbers["length"] != expected:
        return MALFORMED, (f"external data length {numbers['length']} does not match the tensor's "
                           f"{expected} bytes ({onnx.TensorProto.DataType.Name(tensor.data_type).lower()} "
                           f"{list(tensor.dims)})")
    end = numbers["offset"] + numbers["length"]
    if end > size:
        return MISSING, f"external data file '{location}' is shorter ({size} bytes) than the tensor needs ({end})"
    return None


def _stored_bytes(tensor: onnx.TensorProto) -> Optional[int]:
    return stored_bytes(tensor.data_type, tensor.dims)


def _file_problem(location: str, folder: _Folder) -> Tuple[Optional[Tuple[str, str]], int]:
    """(problem, size in bytes) of an external-data file named relative to the model's folder."""
    target = None if os.path.isabs(location) else folder.target(location)
    if target is None:
        return (OUTSIDE, f"external data location '{location}' resolves outside the model's folder {folder}"), 0
    if not target.is_file():
        return (MISSING, f"external data file '{location}' not found in {folder}"), 0
    return None, target.stat().st_size


def rebase_symlinked_data(model: onnx.ModelProto, model_path: Path,
                          stored: Optional[List[Tuple[str, onnx.TensorProto]]] = None) -> Optional[Path]:
    """For a model whose external data is reached through symlinks (checked by `check_external_data`
    first): rewrite each location, in memory, to the real file relative to the folder holding them
    all, and return that folder; None (nothing changed) when no symlink is involved.

    onnxruntime, given a model from memory, refuses a location whose real path leaves the folder it
    is told to read from (the Hugging Face cache: `snapshots/<rev>/model.onnx_data` -> `blobs/<sha>`),
    though it reads the same model from its path; mi runs models from memory. `stored`: as for
    `external_data_problems`."""
    named = model_path.absolute().parent
    real_named = named.resolve()
    targets: Dict[str, Path] = {}
    stored = external_tensors(model.graph) if stored is None else stored
    if not stored:
        return None
    for _, tensor in stored:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        if location and location not in targets:
            targets[location] = (named / location).resolve()
    if all(target == real_named / location for location, target in targets.items()):
        return None
    base = Path(os.path.commonpath([target.parent for target in targets.values()]))
    for _, tensor in stored:
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value in targets:
                entry.value = os.path.relpath(targets[entry.value], base)
    return base


def check_external_data(model: onnx.ModelProto, model_path: Path,
                        stored: Optional[List[Tuple[str, onnx.TensorProto]]] = None) -> None:
    """Raise `ModelLoadError` naming the first unsafe or missing external-data reference."""
    problems = external_data_defects(model, model_path, stored)
    if problems:
        name, kind, problem = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ModelLoadError(f"{model_path}: tensor '{name}': {problem}{more}", hint=_HINTS[kind])


_HINTS = {OUTSIDE: "external data must live inside the model's folder; refusing to read it",
          MISSING: "copy the external data file(s) with the model, keeping their relative paths",
          MALFORMED: "the model's external_data entries are corrupt; re-save the model with onnx"}


def _is_inside(target: Path, folder: Path) -> bool:
    try:
        target.relative_to(folder)
        return True
    except ValueError:
        return False
