"""`mi run`: a step without inputs uses the suite's data when its model takes the same inputs.

The shipped ci-gate suite profiles the int8 model with no `inputs:` (synthetic data), which stops on
any model with a symbolic sequence or image dimension, although the suite's other steps read real
samples for the very same model. A step that gives neither `inputs` nor synthetic shapes now reuses
the data of an earlier step whose model has the same input names as its own; the step says so.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence

_MODEL_KEYS = ("model", "model_a", "model_b", "against")
_SYNTHETIC_KEYS = ("shape", "val_range")


def _models(options: Mapping[str, Any]) -> List[str]:
    return [str(options[k]) for k in _MODEL_KEYS if isinstance(options.get(k), (str, Path))]


def _input_names(path: str, cache: Dict[str, Optional[FrozenSet[str]]]) -> Optional[FrozenSet[str]]:
    """The model's graph inputs (initializers excluded), or None when it cannot be read."""
    if path not in cache:
        try:
            import onnx

            graph = onnx.load(path, load_external_data=False).graph
            inits = {t.name for t in graph.initializer}
            cache[path] = frozenset(i.name for i in graph.input if i.name not in inits)
        except Exception:  # noqa: BLE001 - the step itself reports an unreadable model, better than we can
            cache[path] = None
    return cache[path]


def share_suite_data(steps: Sequence[Any], default_maps: Dict[int, Dict[str, Any]],
                     accepts_inputs: Mapping[str, bool]) -> List[str]:
    """Give `inputs` to the steps that have none, from the first step with data whose model takes the
    same inputs; returns one note per step changed. `steps` are the suite's steps (index, name, kind)."""
    sources = [(step, default_maps[step.index]) for step in steps
               if step.index in default_maps and default_maps[step.index].get("inputs")]
    cache: Dict[str, Optional[FrozenSet[str]]] = {}
    notes: List[str] = []
    for step in steps:
        options = default_maps.get(step.index)
        if options is None or not accepts_inputs.get(step.kind) or options.get("inputs") or \
                any(options.get(k) for k in _SYNTHETIC_KEYS):
            continue
        wanted = [_input_names(m, cache) for m in _models(options)]
        if not wanted or any(w is None for w in wanted):
            continue
        for source, source_options in sources:
            names = {_input_names(m, cache) for m in _models(source_options)}
            if len(names) == 1 and all(w in names for w in wanted):
                options["inputs"] = source_options["inputs"]
                shown = ", ".join(map(str, source_options["inputs"]))
                notes.append(f"step '{step.name}': no inputs given; uses the suite's data {shown} "
                             f"(step '{source.name}', same model inputs)")
                break
    return notes
