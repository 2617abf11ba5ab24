"""Hand-off of a non-finite step to nan-bisect: the step's full inputs (step inputs + carried state).

`write_step_bundle` writes `<dir>/step_<N>_<role>/inputs.npz` (exactly the model's inputs, so
`mi nan-bisect MODEL --inputs .../inputs.npz` reads it as one sample) and `bundle.json` saying
which model, step and wiring it comes from and the command that reproduces it.
"""
from __future__ import annotations

import json
import shlex
from operator import attrgetter
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

from ..core.types import TensorMap
from .wiring import StateWiring

_SHAPE = attrgetter("shape")


def nonfinite_names(values: TensorMap, names: "List[str] | None" = None) -> List[str]:
    """Names of the float tensors among `values` holding NaN or Inf."""
    bad = []
    for name in names if names is not None else list(values):
        value = values[name]
        if value.dtype.kind == "f" and value.size and not np.isfinite(value).all():
            bad.append(name)
    return bad


def nonfinite_free(steps: Sequence[Sequence[Any]]) -> bool:
    """True when no float array of any step's outputs holds NaN or Inf (`steps[k][j]`: output j of
    step k). One check per output over all steps when its shape does not change."""
    for j in range(len(steps[0])):
        values = [step[j] for step in steps]
        first = values[0]
        if not isinstance(first, np.ndarray) or first.dtype.kind != "f" or not first.size:
            continue
        if first.ndim and list(map(_SHAPE, values)).count(first.shape) == len(values):
            if not np.isfinite(np.concatenate(values)).all():
                return False
        elif any(not np.isfinite(v).all() for v in values):
            return False
    return True


def write_step_bundle(folder: Path, model_path: str, role: str, step: int, feeds: TensorMap,
                      wiring: StateWiring, bad_tensors: List[str]) -> Path:
    """Write the step's inputs and a description; returns the path of inputs.npz."""
    target = folder / f"step_{step:06d}_{role}"
    target.mkdir(parents=True, exist_ok=True)
    inputs = target / "inputs.npz"
    np.savez(inputs, **{k: np.ascontiguousarray(v) for k, v in feeds.items()})
    meta: Dict[str, object] = {
        "model": model_path, "role": role, "step": step,
        "state": [{"input": p.input, "output": p.output} for p in wiring.pairs],
        "step_inputs": list(wiring.step_inputs), "nonfinite": bad_tensors,
        "reproduce": f"mi nan-bisect {shlex.quote(model_path)} --inputs {shlex.quote(str(inputs))}",
    }
    (target / "bundle.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return inputs
