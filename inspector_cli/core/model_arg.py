"""What every public entry point accepts as a model: a path, or a graph already loaded."""
from __future__ import annotations

import os
from typing import Union

from .graph import ModelGraph, load_model
from .lazyload import load_model_lazy

ModelArg = Union[str, "os.PathLike[str]", ModelGraph]


def as_graph(model: ModelArg, *, lazy: bool = False) -> ModelGraph:
    """The model as a graph (a `ModelGraph` is used as given).

    lazy=True leaves large embedded weights in the file (lazyload.py; onnxruntime reads them
    there): what compare wants for two big models at once. Otherwise `load_model`.
    """
    if isinstance(model, ModelGraph):
        return model
    return load_model_lazy(model) if lazy else load_model(model)
