"""Golden mode: one model against saved reference outputs (`mi compare MODEL --golden DIR`).

DIR holds either ONNX model-zoo test sets (`test_data_set_N/input_K.pb` and `output_K.pb`: the
K-th output, or the output named in the TensorProto) or `.npz` files each holding one sample's
inputs and reference outputs, keyed by name. The saved outputs play the reference (A); the model
runs as the candidate (B) and the usual per-output metrics and gates apply.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

from ..core.elemtypes import ML_DTYPE_NAMES, adopt
from ..core.graph import ModelGraph
from ..core.input_formats import load_npz, read_proto_value
from ..core.inputs import check_feeds
from ..core.runner import open_session
from ..core.types import TensorMap
from ..diff.engine import TensorTracker
from ..diff.gates import check_gate_targets
from ..diff.tolerance import ToleranceTally
from ..errors import InputDataError
from ..progress import Progress, no_progress
from ..results.base import Finding, ModelRef, Severity
from ..results.compare import CompareResult
from .config import CompareConfig
from .outputs import gate_outcomes, output_diff, tracker_findings
from ..core.model_arg import as_graph

GoldenSample = Tuple[str, TensorMap, TensorMap]


def _value_kinds(graph: ModelGraph) -> Dict[str, str]:
    """Each graph input's and output's ONNX type kind: tensor, sequence, map, optional."""
    return {v.name: v.kind for v in [*graph.inputs, *graph.outputs]}


def _zoo_sample(folder: Path, graph: ModelGraph) -> GoldenSample:
    kinds = _value_kinds(graph)

    def by_index(prefix: str, names: List[str]) -> TensorMap:
        found: TensorMap = {}
        # only input_K.pb / output_K.pb: a stray input_x.pb is not a numbered tensor (and int() on it a crash)
        files = sorted((p for p in folder.glob(f"{prefix}_*.pb") if p.stem.split("_")[-1].isdigit()),
                       key=lambda p: int(p.stem.split("_")[-1]))
        for path in files:
            index = int(path.stem.split("_")[-1])
            guess = names[index] if index < len(names) else ""
            name, value = read_proto_value(path, kinds.get(guess, "tensor"))
            if name not in names:
                if index >= len(names):
                    raise InputDataError(f"{path}: the model has only {len(names)} {prefix}s")
                name = names[index]
            found[name] = value
        return found

    inputs = by_index("input", graph.input_names)
    outputs = by_index("output", graph.output_names)
    if not outputs:
        raise InputDataError(f"{folder}: no output_K.pb files", hint="golden mode needs saved outputs")
    return folder.name, inputs, outputs


def _npz_sample(path: Path, graph: ModelGraph) -> GoldenSample:
    arrays = load_npz(path)  # a bad file is exit 3 naming it
    inputs = {k: v for k, v in arrays.items() if k in graph.input_names}
    types = {o.name: o.elem_type for o in graph.outputs}
    # a saved bfloat16/float8/int4 output: np.load gives void items, read as the output's type
    outputs = {k: _typed(v, types.get(k, 0)) for k, v in arrays.items() if k in graph.output_names}
    if not outputs:
        raise InputDataError(f"{path}: no array named like an output of the model ({', '.join(graph.output_names)})",
                             hint="save the reference outputs under the model's output names")
    return path.name, inputs, outputs


def _typed(value: np.ndarray, elem_type: int) -> np.ndarray:
    adopted = adopt(value, elem_type) if elem_type in ML_DTYPE_NAMES else None
    return adopted if adopted is not None else value


def golden_samples(folder: "str | os.PathLike[str]", graph: ModelGraph) -> List[Path]:
    root = Path(folder)
    if (root / "output_0.pb").exists() or any(root.glob("input_*.pb")):
        return [root]
    sets = sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith("test_data_set_")),
                  key=lambda p: int(p.name.rsplit("_", 1)[-1]) if p.name.rsplit("_", 1)[-1].isdigit() else 0)
    files = sorted(root.glob("*.npz"))
    if not sets and not files:
        raise InputDataError(f"{root}: no test_data_set_N folders and no .npz files",
                             hint="expected the ONNX model-zoo layout or .npz files with inputs and outputs")
    return sets or files


def iter_golden(paths: List[Path], graph: ModelGraph) -> Iterator[GoldenSample]:
    for path in paths:
        sample = _zoo_sample(path, graph) if path.is_dir() else _npz_sample(path, graph)
        check_feeds(sample[1], graph.inputs, sample[0])
        yield sample


def compare_golden(model: "str | os.PathLike[str] | ModelGraph", config: CompareConfig,
                   progress: Progress = no_progress) -> CompareResult:
    """Run `model` on the golden inputs and compare its outputs with the saved ones."""
    assert config.golden is not None
    graph = as_graph(model, lazy=True)
    check_gate_targets(config.gates, graph.output_names)
    paths = golden_samples(config.golden, graph)
    session = open_session(graph, config.runtime_a, label=graph.display_name)
    trackers: Dict[str, TensorTracker] = {}
    tolerances: Dict[str, ToleranceTally] = {}
    count = 0
    for count, (sample, feeds, reference) in enumerate(iter_golden(paths, graph), start=1):
        got = session.run(feeds, list(reference), sample=sample)
        for name, expected in reference.items():
            tracker = trackers.setdefault(name, TensorTracker(name, name, gates=list(config.gates), topk=config.topk,
                                                              keep_per_sample=config.per_sample))
            tracker.add(sample, expected, got[name])
            if config.tolerance is not None:
                tolerances.setdefault(name, ToleranceTally(*config.tolerance)).add(sample, expected, got[name])
        progress(count, len(paths), sample)
    findings: List[Finding] = []
    for name in graph.output_names:
        if name not in trackers:
            findings.append(Finding(rule="MI803", severity=Severity.WARNING, tensor=name,
                                    message=f"output '{name}' has no saved reference in {config.golden}"))
    gates = []
    for tracker in trackers.values():
        findings.extend(tracker_findings(tracker, golden=True))
        tally = tolerances.get(tracker.name)
        if tally is not None and tally.outside:
            findings.append(Finding(rule="MI806", severity=Severity.ERROR, tensor=tracker.name,
                                    message=tally.message(tracker.name)))
        gates.extend(gate_outcomes(tracker))
    golden_ref = ModelRef(path=str(config.golden), role="reference (golden outputs)")
    return CompareResult(
        models=[golden_ref, ModelRef.of(graph, "candidate")], config=config.to_dict(),
        runtime=config.runtime_a.to_dict(), inputs={"source": str(config.golden), "count": count, "synthetic": None,
                                                    "inputs": [], "notes": []},
        outputs=[output_diff(t, "golden") for t in trackers.values()], gates=gates, findings=findings,
        samples=count)
