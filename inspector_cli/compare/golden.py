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

from ..core.graph import ModelGraph
from ..core.input_formats import numpy_file_error
from ..core.inputs import check_feeds
from ..core.runner import open_session
from ..core.types import TensorMap
from ..diff.engine import TensorTracker
from ..diff.gates import check_gate_targets
from ..errors import InputDataError
from ..progress import Progress, no_progress
from ..results.base import Finding, ModelRef, Severity
from ..results.compare import CompareResult
from .config import CompareConfig
from .outputs import gate_outcomes, output_diff, tracker_findings
from ..core.model_arg import as_graph

GoldenSample = Tuple[str, TensorMap, TensorMap]


def _read_pb(path: Path, kind: str = "tensor_type") -> Tuple[str, Any]:
    """One saved value: a TensorProto, or for a sequence / map output (`kind`, the output's ONNX type
    field) a SequenceProto / MapProto, read as onnxruntime returns it (a list, a dict)."""
    import onnx
    from onnx import numpy_helper

    proto_type, read = {"sequence_type": (onnx.SequenceProto, numpy_helper.to_list),
                        "map_type": (onnx.MapProto, numpy_helper.to_dict)}.get(kind, (onnx.TensorProto, numpy_helper.to_array))
    proto = proto_type()
    try:
        proto.ParseFromString(path.read_bytes())
        return proto.name, read(proto)
    except Exception as exc:  # protobuf and numpy_helper raise several types
        raise InputDataError(f"{path}: not an ONNX {proto_type.__name__} ({type(exc).__name__})") from exc


def _output_kinds(graph: ModelGraph) -> Dict[str, str]:
    """Each graph output's ONNX type field: tensor_type, sequence_type, map_type, optional_type."""
    return {o.name: o.type.WhichOneof("value") or "tensor_type" for o in graph.model.graph.output}


def _zoo_sample(folder: Path, graph: ModelGraph) -> GoldenSample:
    kinds = _output_kinds(graph)

    def by_index(prefix: str, names: List[str]) -> TensorMap:
        found: TensorMap = {}
        # only input_K.pb / output_K.pb: a stray input_x.pb is not a numbered tensor (and int() on it a crash)
        files = sorted((p for p in folder.glob(f"{prefix}_*.pb") if p.stem.split("_")[-1].isdigit()),
                       key=lambda p: int(p.stem.split("_")[-1]))
        for path in files:
            index = int(path.stem.split("_")[-1])
            guess = names[index] if index < len(names) else ""
            name, value = _read_pb(path, kinds.get(guess, "tensor_type") if prefix == "output" else "tensor_type")
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
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # BadZipFile, zlib.error, bad CRC, pickled object arrays...: a bad file, exit 3
        raise numpy_file_error(path, exc, ".npz") from exc
    inputs = {k: v for k, v in arrays.items() if k in graph.input_names}
    outputs = {k: v for k, v in arrays.items() if k in graph.output_names}
    if not outputs:
        raise InputDataError(f"{path}: no array named like an output of the model ({', '.join(graph.output_names)})",
                             hint="save the reference outputs under the model's output names")
    return path.name, inputs, outputs


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
    count = 0
    for count, (sample, feeds, reference) in enumerate(iter_golden(paths, graph), start=1):
        got = session.run(feeds, list(reference), sample=sample)
        for name, expected in reference.items():
            tracker = trackers.setdefault(name, TensorTracker(name, name, gates=list(config.gates), topk=config.topk,
                                                              keep_per_sample=config.per_sample))
            tracker.add(sample, expected, got[name])
        progress(count, len(paths), sample)
    findings: List[Finding] = []
    for name in graph.output_names:
        if name not in trackers:
            findings.append(Finding(rule="MI803", severity=Severity.WARNING, tensor=name,
                                    message=f"output '{name}' has no saved reference in {config.golden}"))
    gates = []
    for tracker in trackers.values():
        findings.extend(tracker_findings(tracker, golden=True))
        gates.extend(gate_outcomes(tracker))
    golden_ref = ModelRef(path=str(config.golden), role="reference (golden outputs)")
    return CompareResult(
        models=[golden_ref, ModelRef.of(graph, "candidate")], config=config.to_dict(),
        runtime=config.runtime_a.to_dict(), inputs={"source": str(config.golden), "count": count, "synthetic": None,
                                                    "inputs": [], "notes": []},
        outputs=[output_diff(t, "golden") for t in trackers.values()], gates=gates, findings=findings,
        samples=count)
