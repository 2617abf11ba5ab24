"""One stateful model ready to step: its graph, a plain session, the state wiring and input dtypes."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.graph import ModelGraph, load_model
from ..core.runner import RuntimeConfig, Session, open_session
from ..core.types import TensorInfo, TensorMap
from ..errors import InferenceError
from .wiring import StateWiring, detect_wiring


@dataclass
class SteppedModel:
    """A model plus what stepping it needs. `run(feeds, state)` returns every output."""

    graph: ModelGraph
    session: Session
    wiring: StateWiring
    role: str

    def __post_init__(self) -> None:
        # The binding's run without InferenceSession.run's Python-side input validation (~20 us per
        # call, as much as a small step's metrics): every step feeds the same names, which the first
        # step checks through the public run; a missing or mistyped input still fails in onnxruntime.
        ort_session = self.session.ort_session
        inner = getattr(ort_session, "_sess", None)
        public = ort_session.run
        if inner is None or not hasattr(inner, "run"):
            self._run = public
            return
        checked: list = []

        def run(names: List[str], feeds: TensorMap) -> list:
            if not checked:
                checked.append(True)
                return public(names, feeds)
            return inner.run(names, feeds, None)
        self._run = run

    @property
    def inputs(self) -> List[TensorInfo]:
        return self.graph.inputs

    @property
    def step_specs(self) -> List[TensorInfo]:
        """The inputs a step sample supplies (everything but the state)."""
        state = set(self.wiring.state_inputs)
        return [t for t in self.graph.inputs if t.name not in state]

    @property
    def dtypes(self) -> Dict[str, Optional[np.dtype]]:
        return self.session.input_dtypes

    def cast(self, feeds: TensorMap) -> TensorMap:
        """Float feeds in this model's float dtypes (fp32 data or state into an fp16 model)."""
        dtypes = self.session.input_dtypes
        if all(value.dtype == dtypes.get(name, value.dtype) for name, value in feeds.items()):
            return feeds  # the common case (same dtypes): no new dict per step
        out: TensorMap = {}
        for name, value in feeds.items():
            want = dtypes.get(name)
            if want is not None and value.dtype != want and value.dtype.kind == "f" and want.kind == "f":
                value = value.astype(want)
            out[name] = value
        return out

    def run(self, feeds: TensorMap, state: TensorMap, step: int) -> TensorMap:
        merged = dict(feeds)
        merged.update(state)
        try:
            values = self._run(self.session.output_names, merged)
        except Exception as exc:  # onnxruntime raises its own types; name the model and the step
            text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            raise InferenceError(f"{self.role} ({self.graph.display_name}): inference failed at step {step}: {text[:400]}") \
                from exc
        return dict(zip(self.session.output_names, values))


def quiet_threads(runtime: RuntimeConfig) -> RuntimeConfig:
    """No spinning of onnxruntime's idle worker threads between runs (unless the user set it).

    A step is short and the Python work between two runs (metrics, state hand-over) needs a core:
    threads spin-waiting for the next run took it, and made the loop 4x slower than bare inference
    on two cores (scripts/bench_sequence.py)."""
    keys = {k for k, _ in runtime.session_config}
    extra = tuple((k, "0") for k in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning") if k not in keys)
    return runtime.replace(session_config=tuple(runtime.session_config) + extra)


def open_stepped(path: "str | Path | ModelGraph", explicit: Sequence[Tuple[str, str]] = (),
                 runtime: RuntimeConfig = RuntimeConfig(), role: str = "A") -> SteppedModel:
    """Load a model, wire its state (explicit pairs first, then by names) and open its session."""
    graph = path if isinstance(path, ModelGraph) else load_model(path)
    wiring = detect_wiring(graph.inputs, graph.outputs, explicit, model=f"model {role} ({graph.display_name})")
    session = open_session(graph, quiet_threads(runtime), label=f"model {role} ({graph.display_name})")
    return SteppedModel(graph, session, wiring, role)
