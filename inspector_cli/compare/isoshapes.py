"""Run-time shapes (and types) of the isolation model's inputs where the candidate does not declare them.

Models exported with dynamic batch/sequence axes have symbolic dimensions on almost every tensor.
The isolation model (subgraph.py) declares those dims free; each sample binds them. Usually the
reference tensor that feeds a cut has the same shape (`feed_shape` binds from it), but a cut tensor
can be a reshaped view of the paired one ([B, S, H*D] paired with the [B, S, H, D] the candidate
reads). Its shape is then only known by running the candidate: this probe exposes those tensors in
the candidate once per distinct input-shape signature (one extra run, not one per sample).
Tensors that shape inference cannot type at all (outputs of ai.onnx.ml ops; some re-exports) are
typed the same way, from one run of the candidate (`runtime_types`): the arrays always know.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.graph import ModelGraph
from ..core.runner import RuntimeConfig, Session, open_session
from ..errors import InferenceError, ModelLoadError
from .subgraph import NOT_A_TENSOR, IsolationFeed

Shape = Tuple[int, ...]


def runtime_types(graph: ModelGraph, runtime: RuntimeConfig, names: Sequence[str],
                  feeds_b: Dict[str, np.ndarray]) -> Dict[str, int]:
    """ONNX element types of the candidate's tensors `names`, from one run on `feeds_b`; NOT_A_TENSOR for a
    sequence or map (the isolation model feeds tensors only); everything is left out when that run fails:
    the layers stay skipped with their reason, the comparison goes on."""
    from onnx import helper

    try:
        session = open_session(graph, runtime.without_spinning(), extra_outputs=list(names), keep_outputs=False,
                               label=f"B {graph.display_name} (isolation types)")
        out = session.run(feeds_b)
    except (ModelLoadError, InferenceError):
        return {}
    return {name: int(helper.np_dtype_to_tensor_dtype(out[name].dtype)) if isinstance(out[name], np.ndarray)
            else NOT_A_TENSOR for name in names if isinstance(out.get(name), (np.ndarray, list, dict))}


def needs_probe(feed: IsolationFeed) -> bool:
    """Whether the feed has a symbolic dimension (its shape is bound per sample)."""
    return feed.shape is None or any(d is None for d in feed.shape)


class ShapeProbe:
    """The candidate's run-time shapes of the symbolic isolation feeds, cached per input shapes."""

    def __init__(self, graph: ModelGraph, runtime: RuntimeConfig, feeds: Sequence[IsolationFeed]) -> None:
        inputs = set(graph.input_names)
        self._graph, self._runtime = graph, runtime
        self._names: List[str] = [f.name for f in feeds if needs_probe(f) and f.name not in inputs]
        self._session: Optional[Session] = None
        self._cache: Dict[Tuple[Tuple[str, Shape], ...], Dict[str, Shape]] = {}

    def shapes(self, feeds_b: Dict[str, np.ndarray]) -> Dict[str, Shape]:
        """Shapes of the probed tensors (and the candidate's inputs) for these candidate feeds."""
        key = tuple(sorted((k, tuple(np.shape(v))) for k, v in feeds_b.items()))
        if key not in self._cache:
            found: Dict[str, Shape] = {k: tuple(np.shape(v)) for k, v in feeds_b.items()}
            if self._names:
                if self._session is None:
                    self._session = open_session(self._graph, self._runtime.without_spinning(),
                                                 extra_outputs=self._names, keep_outputs=False,
                                                 label=f"B {self._graph.display_name} (isolation shapes)")
                out = self._session.run(feeds_b)
                found.update({name: tuple(np.shape(out[name])) for name in self._names if name in out})
            self._cache[key] = found
        return self._cache[key]
