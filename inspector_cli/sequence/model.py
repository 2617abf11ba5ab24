"""One stateful model ready to step: its graph, a plain session, the state wiring and input dtypes."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.graph import ModelGraph, load_model
from ..core.runner import RuntimeConfig, Session, _first_line, open_session
from ..core.types import TensorInfo, TensorMap
from ..errors import InferenceError
from .cachedims import Shapes, StateDims, resolve_state_dims
from .wiring import StateWiring, detect_wiring, initial_state


@dataclass
class SteppedModel:
    """A model plus what stepping it needs. `run(feeds, state)` returns every output."""

    graph: ModelGraph
    session: Session
    wiring: StateWiring
    role: str
    dims: Optional[StateDims] = None
    """What the model (and `--shape`) says about the state's free dims (sequence/cachedims)."""

    def __post_init__(self) -> None:
        self.hold(2)

    def hold(self, runs: int) -> None:
        """Keep each run's outputs valid during the next `runs - 1` runs (0: fresh arrays every run).

        Outputs are written into arrays bound once (core/binding, onnxruntime IO binding) and reused
        in turn by `runs` sets: with 2, the state a step returns is read by the next step while that
        step writes into the other set (re-stepping A to a diverging step for --layers). A
        growing KV cache changes the shapes every step (binding anew each time would cost more than
        it saves): decode asks for 0. The A/B loop and the nan-bisect scan hold a block of steps'
        outputs and call onnxruntime's run for fresh arrays themselves (`output_names`, `failure`)."""
        from ..core.binding import BoundRunner

        self.runner = BoundRunner(self.session, self.session.output_names, reuse=runs > 0, sets=max(1, runs))

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
        for name, value in feeds.items():
            want = dtypes.get(name)
            if want is not None and value.dtype != want:
                break
        else:
            return feeds  # the common case (same dtypes): no new dict per step
        out: TensorMap = {}
        for name, value in feeds.items():
            want = dtypes.get(name)
            if want is not None and value.dtype != want and value.dtype.kind == "f" and want.kind == "f":
                value = value.astype(want)
            out[name] = value
        return out

    def initial_state(self, feeds: TensorMap, init_file: Optional[Path] = None) -> Tuple[TensorMap, List[str]]:
        """The state of step 0 (sequence/wiring.initial_state with this model's resolved dims)."""
        return initial_state(self.wiring, self.inputs, feeds, init_file, self.dims,
                             model=f"model {self.role} ({self.graph.display_name})")

    def run(self, feeds: TensorMap, state: TensorMap, step: int) -> TensorMap:
        """Every output of one step (InferenceError naming the model and the step on failure)."""
        return self.runner.run({**feeds, **state}, sample=f"step {step}")

    @property
    def output_names(self) -> List[str]:
        """Every output, in the order of the lists onnxruntime's run returns (the A/B loop's call)."""
        return self.session.output_names

    def failure(self, step: int, exc: Exception) -> InferenceError:
        """The error for a failed run of `step` (as core/runner words it for a sample)."""
        return InferenceError(f"{self.session.label}: inference failed on sample step {step}: {_first_line(exc)}")


def open_stepped(path: "str | Path | ModelGraph", explicit: Sequence[Tuple[str, str]] = (),
                 runtime: RuntimeConfig = RuntimeConfig(), role: str = "A", shapes: Shapes = ()) -> SteppedModel:
    """Load a model, wire its state (explicit pairs first, then by names), resolve the state's free
    dims from the model and `shapes` (`--shape`: sequence/cachedims) and open its session."""
    graph = path if isinstance(path, ModelGraph) else load_model(path)
    wiring = detect_wiring(graph.inputs, graph.outputs, explicit, model=f"model {role} ({graph.display_name})")
    dims = resolve_state_dims(graph, wiring, shapes)
    # Idle worker threads sleep between runs: the Python work between two steps needs a core, and
    # spinning threads took it (the loop was 4x slower than bare inference on two cores,
    # scripts/bench_sequence.py). The inter-op pool only exists in parallel execution mode, which
    # mi never sets, so the intra-op switch is the whole of it.
    session = open_session(graph, runtime.without_spinning(), label=f"model {role} ({graph.display_name})")
    return SteppedModel(graph, session, wiring, role, dims)
