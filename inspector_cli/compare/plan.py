"""What a comparison runs: both graphs opened, their inputs and outputs paired, the samples found;
and one sample run on both models (`run_pair`)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from ..core.inputs import SampleSet, adapt_feeds, open_samples
from ..core.io_match import NameMatching, match_names, rename_feeds
from ..core.modelhead import ModelHead, read_model_head
from ..core.runner import Session
from ..core.types import TensorInfo
from ..diff.gates import check_gate_targets
from ..errors import InputDataError, UsageError
from .config import CompareConfig

if TYPE_CHECKING:  # core.graph imports onnx: an outputs-only comparison of two files never needs it
    from ..core.graph import ModelGraph
    from ..core.model_arg import ModelArg
else:
    ModelArg = Any


@dataclass(frozen=True)
class FileModel:
    """A model file known by its header alone (`core/modelhead.py`): what an outputs-only comparison
    needs of a `ModelGraph` (path, names, input and output types) without onnx or the graph."""

    path: Path
    head: ModelHead

    @property
    def display_name(self) -> str:
        return str(self.path)

    @property
    def inputs(self) -> List[TensorInfo]:
        return list(self.head.inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        return list(self.head.outputs)

    @property
    def input_names(self) -> List[str]:
        return [t.name for t in self.head.inputs]

    @property
    def output_names(self) -> List[str]:
        return [t.name for t in self.head.outputs]


AnyGraph = Union["ModelGraph", FileModel]


def split_map(config: CompareConfig, graph_a: AnyGraph) -> Tuple[Tuple[str, str], ...]:
    """The --map entries naming inputs or outputs of A; others name intermediate tensors (--layers)."""
    io_names = set(graph_a.output_names) | set(graph_a.input_names)
    io_map = tuple((a, b) for a, b in config.output_map if a in io_names)
    rest = [a for a, _ in config.output_map if a not in io_names]
    if rest and config.layers is None:
        raise UsageError(f"--map {rest[0]}=...: '{rest[0]}' is not an output or input of {graph_a.display_name}",
                         hint="intermediate tensors are paired only with --layers")
    return io_map


@dataclass
class ComparePlan:
    """What a comparison will run: both graphs, their pairings and the samples."""

    graph_a: "ModelGraph"
    graph_b: "ModelGraph"
    """Loaded graphs; `FileModel`s for an outputs-only comparison planned by `plan_from_files`."""
    outputs: NameMatching
    inputs: NameMatching
    samples: SampleSet


def plan_comparison(model_a: ModelArg, model_b: ModelArg, config: CompareConfig) -> ComparePlan:
    """Load both models, pair their inputs and outputs, and find the samples (no inference yet)."""
    from ..core.model_arg import as_graph
    from ..core.refusals import require_loadable

    graph_a, graph_b = as_graph(model_a, lazy=True), as_graph(model_b, lazy=True)
    require_loadable(graph_a, config.runtime_a)  # before any work: onnxruntime refuses the file itself
    require_loadable(graph_b, config.runtime_of_b)
    return _plan(graph_a, graph_b, config)


def plan_from_files(model_a: ModelArg, model_b: ModelArg, config: CompareConfig) -> Optional[ComparePlan]:
    """`plan_comparison` for two model files read by their headers only (no onnx, no graph), for an
    outputs-only comparison; None when either header cannot be read exactly (then plan as usual).
    Same pairings, samples and errors as `plan_comparison` for files that load."""
    if not all(isinstance(m, (str, os.PathLike)) for m in (model_a, model_b)):
        return None
    files = []
    for model in (model_a, model_b):
        head = read_model_head(model)
        if head is None:
            return None
        files.append(FileModel(Path(model), head))
    from ..core.filehash import prefetch

    for file in files:  # for the result's ModelRef, on a daemon thread (large files only)
        prefetch(file.path)
    return _plan(files[0], files[1], config)  # type: ignore[arg-type]


def _plan(graph_a: "ModelGraph", graph_b: "ModelGraph", config: CompareConfig) -> ComparePlan:
    io_map = split_map(config, graph_a)
    outputs = match_names(graph_a.outputs, graph_b.outputs, io_map, what="output")
    if not outputs.pairs:
        raise InputDataError(
            f"no output of {graph_a.display_name} ({', '.join(graph_a.output_names)}) could be paired "
            f"with an output of {graph_b.display_name} ({', '.join(graph_b.output_names)})",
            hint="pair them with --map A_NAME=B_NAME")
    check_gate_targets(config.gates, [p.a for p in outputs.pairs])
    inputs = match_names(graph_a.inputs, graph_b.inputs, io_map, what="input", allow_map_unknown=True)
    if inputs.unmatched_a or inputs.unmatched_b:
        raise InputDataError(
            f"the models' inputs do not correspond: {graph_a.display_name} has "
            f"{', '.join(graph_a.input_names)}; {graph_b.display_name} has {', '.join(graph_b.input_names)}",
            hint="pair them with --map A_INPUT=B_INPUT")
    samples = open_samples(config.inputs, graph_a.inputs, config.synthetic, config.reader_options)
    return ComparePlan(graph_a, graph_b, outputs, inputs, samples)


def run_pair(session_a: Session, session_b: Session, plan: ComparePlan, feeds: Dict, sample_id: str,
             outputs_a: Optional[Sequence[str]] = None, outputs_b: Optional[Sequence[str]] = None
             ) -> Tuple[Dict, Dict, List[str]]:
    """Run one sample on both models (B's feeds renamed and float-cast as B expects)."""
    names_a = list(outputs_a) if outputs_a is not None else [p.a for p in plan.outputs.pairs]
    names_b = list(outputs_b) if outputs_b is not None else [p.b for p in plan.outputs.pairs]
    out_a = session_a.run(feeds, names_a, sample=sample_id)
    feeds_b, cast_notes = adapt_feeds(rename_feeds(feeds, plan.inputs.pairs), session_b.input_dtypes)
    out_b = session_b.run(feeds_b, names_b, sample=sample_id)
    return out_a, out_b, cast_notes


