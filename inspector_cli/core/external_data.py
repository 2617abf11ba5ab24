"""The external-data guard: every place a TensorProto can carry external data is checked before
anything is read (locations inside the model's folder only, no NUL, numeric offset and length,
files long enough). Used by `load_model`, the lazy loader and validate (MI108/MI109)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import onnx

from ..errors import ModelLoadError
from .protoutil import iter_all_tensors

_EXTERNAL = onnx.TensorProto.EXTERNAL


def external_data_problems(model: onnx.ModelProto, model_path: Path) -> List[Tuple[str, str]]:
    """(tensor name, problem) for every external-data reference that is unsafe or missing, in every
    place a tensor can be stored (`iter_all_tensors`: sparse initializers and subgraph attributes
    too). Problems that make reading unsafe say 'unsafe' (validate reports them as MI109)."""
    folder = model_path.resolve().parent
    problems: List[Tuple[str, str]] = []
    files: Dict[str, Tuple[Optional[str], int]] = {}  # location -> (problem, size): resolved once per file
    for where, tensor in iter_all_tensors(model.graph):
        if tensor.data_location != _EXTERNAL:
            continue
        name = tensor.name or f"<unnamed {where}>"
        problem = _external_problem(tensor, folder, files)
        if problem:
            problems.append((name, problem if where == "initializer" else f"{problem} ({where})"))
    return problems


def _external_problem(tensor: onnx.TensorProto, folder: Path,
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


def _file_problem(location: str, folder: Path) -> Tuple[Optional[str], int]:
    """(problem, size in bytes) of an external-data file named relative to the model's folder."""
    target = (folder / location).resolve()
    if os.path.isabs(location) or not _is_inside(target, folder):
        return f"external data location '{location}' resolves outside the model's folder {folder}", 0
    if not target.is_file():
        return f"external data file '{location}' not found in {folder}", 0
    return None, target.stat().st_size


def check_external_data(model: onnx.ModelProto, model_path: Path) -> None:
    problems = external_data_problems(model, model_path)
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
