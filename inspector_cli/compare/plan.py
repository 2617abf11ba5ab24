"""What a comparison runs: both graphs opened, their inputs and outputs paired, the samples found;
and one sample run on both models (`run_pair`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..core.graph import ModelGraph
from ..core.inputs import SampleSet, adapt_feeds, open_samples
from ..core.io_match import NameMatching, match_names, rename_feeds
from ..core.model_arg import ModelArg, as_graph
from ..core.runner import Session
from ..diff.gates import check_gate_targets
from ..errors import InputDataError, UsageError
from .config import CompareConfig

def split_map(config: CompareConfig, graph_a: ModelGraph) -> Tuple[Tuple[str, str], ...]:
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

    graph_a: ModelGraph
    graph_b: ModelGraph
    outputs: NameMatching
    inputs: NameMatching
    samples: SampleSet


def plan_comparison(model_a: ModelArg, model_b: ModelArg, config: CompareConfig) -> ComparePlan:
    """Load both models, pair their inputs and outputs, and find the samples (no inference yet)."""
    graph_a, graph_b = as_graph(model_a, lazy=True), as_graph(model_b, lazy=True)
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


