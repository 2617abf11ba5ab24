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



def external_data_problems(model: onnx.ModelProto, model_path: Path,
                           stored: Optional[List[Tuple[str, onnx.TensorProto]]] = None) -> List[Tuple[str, str]]:
    """(tensor name, problem) for every external-data reference that is unsafe or missing, in every
    place a tensor can be stored (`iter_all_tensors`: sparse initializers and subgraph attributes
    too). Problems that make reading unsafe say 'unsafe' (validate reports them as MI109). `stored`:
    `external_tensors(model.graph)` when the caller holds it (a pass over every node saved)."""
    folder = _Folder(model_path)
    problems: List[Tuple[str, str]] = []
    files: Dict[str, Tuple[Optional[str], int]] = {}  # location -> (problem, size): resolved once per file
    for where, tensor in external_tensors(model.graph) if stored is None else stored:
        name = tensor.name or f"<unnamed {where}>"
        problem = _external_problem(tensor, folder, files)
        if problem:
            problems.append((name, problem if where == "initializer" else f"{problem} ({where})"))
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
                      files: Dict[str, Tuple[Optional[str], int]]) -> Optional[str]:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    if not location:
        return "external data without a location"
    if "\x00" in location:
        # A NUL cuts a C string short: 'w.bin\0/../../etc/passwd' may name another file to a reader.
        return f"external data location {location!r} holds a NUL byte (unsafe; refused)"
    numbers = {}
    for key in ("offset", "length"):
        text = info.get(key, "") or "0"
        if not text.isdigit():  # digits only: no sign, no spaces, no '1e3'
            return f"external data {key} {text!r} is not a non-negative integer (unsafe; refused)"
        numbers[key] = int(text)
    if location not in files:  # the lazy loader's 8,000 references at 50,000 nodes all name one file
        files[location] = _file_problem(location, folder)
    problem, size = files[location]
    if problem:
        return problem
    end = numbers["offset"] + numbers["length"]
    if end > size:
        return f"external data file '{location}' is shorter ({size} bytes) than the tensor needs ({end})"
    return None


def _file_problem(location: str, folder: _Folder) -> Tuple[Optional[str], int]:
    """(problem, size in bytes) of an external-data file named relative to the model's folder."""
    target = None if os.path.isabs(location) else folder.target(location)
    if target is None:
        return f"external data location '{location}' resolves outside the model's folder {folder}", 0
    if not target.is_file():
        return f"external data file '{location}' not found in {folder}", 0
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
    problems = external_data_problems(model, model_path, stored)
    if problems:
        name, problem = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ModelLoadError(f"{model_path}: tensor '{name}': {problem}{more}",
                             hint="external data must live inside the model's folder; refusing to read it")


def _is_inside(target: Path, folder: Path) -> bool:
    try:
        target.relative_to(folder)
        return True
    except ValueError:
        return False
