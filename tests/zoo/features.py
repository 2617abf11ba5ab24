"""The fix-it tier and the other features in the zoo sweep (issue 29 item 1): `--fallback-plan` with a
target halfway between the variant's baseline cosine and 1 (with `--write-model` and `--exclude-list`),
`--bisect-optimizers`, `--simulated`, `--labels`, `inspect --diff`, `report --diff`, `--sequence` /
`--decode` on the stateful models, and `probe` / `nan-bisect` on a copy of the fp32 model with one
weight element set to NaN. Every command runs mi from the installed wheel (`Sweep.mi`); the independent
checks (the written model re-run alone, the exclude list fed back into the quantiser) use plain
onnxruntime in the test process."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .sweep import QUANTISED, Run, Sweep

FALLBACK_VARIANTS = ("qdq_u8u8", "qdq_s8s8_pc", "qop", "fp16", "fp16_io")
BISECT_VARIANTS = QUANTISED + ("fp16", "fp16_io")
BISECT_FAST = ("qdq_u8u8", "fp16")
"""Where the issue saw --bisect-optimizers fail (int8 QDQ: ValidationError; fp16: !model_path.empty())."""
FAST_FEATURE_VARIANTS = ("fp32", "qdq_u8u8", "qop", "fp16", "renamed")
"""The variants whose feature runs the fast subset makes (CI): one of each kind the fix-it tier handles
differently; qdq_s8s8_pc, fp16_io, dynamic and int4 are MI_ZOO=full only."""
CLASSIFIER_KINDS = ("cnn", "vit")
"""Models with a task whose labels are a class index per sample (sklearn's batch of 8 rows has 8)."""
FEATURE_COMMANDS = ("fallback", "bisect-opt", "simulated", "labels", "inspect-diff", "report-diff", "sequence",
                    "decode", "probe-nan", "nan-bisect-nan")


def baseline_cosine(run: Run) -> Optional[float]:
    """The lowest data-set cosine over the outputs of a compare run (None without a JSON result)."""
    if not run.json_path:
        return None
    outputs = json.loads(Path(run.json_path).read_text())["results"]["outputs"]
    values = [o["dataset"]["cosine"] for o in outputs if (o.get("dataset") or {}).get("cosine") is not None]
    return min(values) if values else None


def halfway_target(baseline: float) -> float:
    """Halfway between the baseline cosine and 1, rounded down to 10 digits (what --target is given)."""
    return float(np.floor((baseline + 1.0) / 2.0 * 1e10) / 1e10)


def fallback(sweep: Sweep, model: str, variant: str) -> Tuple[Run, float]:
    """`compare fp32 V --fallback-plan --target cosine>=X --write-model --exclude-list`, X halfway between
    the baseline cosine of the sweep's compare run and 1; returns the run and X. fp16 variants run from the
    venv with the `fp16` extra (the plan converts the fp32 model again); see `fallback_core` for the
    core-only install."""
    base = baseline_cosine(sweep.compare(model, variant))
    target = halfway_target(base if base is not None else 0.99)
    folder = sweep.out / model / variant
    args = ["compare", sweep.path(model, "fp32"), sweep.path(model, variant), "--inputs", sweep.zoo / model / "data",
            "--fallback-plan", "--target", f"cosine>={target:.10f}", "--write-model", folder / "fixed.onnx",
            "--exclude-list", folder / "exclude.json"]
    extra = "fp16" if variant.startswith("fp16") else ""
    return sweep.mi(model, variant, "fallback", args, html=False, extra=extra), target


def fallback_core(sweep: Sweep, model: str, variant: str) -> Run:
    """`mi fix` on an fp16 variant from the core-only install: the one-line exit-2 error naming the extra
    (onnxconverter-common is not a core dependency). `mi fix`, not compare's `--fallback-plan` alias: the
    alias adds its note that it moved, a line of its own."""
    args = ["fix", sweep.path(model, "fp32"), sweep.path(model, variant), "--inputs", sweep.zoo / model / "data"]
    return sweep.mi(model, variant, "fallback-core", args, json_out=False, html=False)


def remedy_doc(run: Run) -> Dict[str, object]:
    """`results.remedy.fallback` of a fallback run's JSON ({} when there is none)."""
    if not run.json_path:
        return {}
    return (json.loads(Path(run.json_path).read_text())["results"].get("remedy") or {}).get("fallback") or {}


def feature_runs(sweep: Sweep, model: str, variant: str, kind: str, full: bool = True) -> List[Run]:
    """The feature commands that apply to this model and variant (fallback apart: see `fallback`); without
    `full` (the fast subset) --bisect-optimizers runs on BISECT_FAST only."""
    fp32, m, data = sweep.path(model, "fp32"), sweep.path(model, variant), sweep.zoo / model / "data"
    runs: List[Run] = []
    if variant in (BISECT_VARIANTS if full else BISECT_FAST):
        runs.append(sweep.mi(model, variant, "bisect-opt", ["compare", fp32, m, "--inputs", data,
                                                            "--bisect-optimizers", "--a-opt-level", "disable"],
                             html=False))
    if variant in QUANTISED:
        runs.append(sweep.mi(model, variant, "simulated", ["compare", fp32, m, "--inputs", data, "--simulated"],
                             html=False))
    if kind in CLASSIFIER_KINDS:
        labels = write_labels(sweep, model)
        runs.append(sweep.mi(model, variant, "labels", ["compare", fp32, m, "--inputs", data, "--labels", labels],
                             html=False))
    if variant != "fp32":
        runs.append(sweep.mi(model, variant, "inspect-diff", ["inspect", fp32, "--diff", m], html=False))
    if kind == "recurrent":
        runs.append(sweep.mi(model, variant, "sequence", ["compare", fp32, m, "--sequence", vad_steps(sweep, model)],
                             html=False))
    if kind == "decoder" and sweep.is_decoder(model):  # optimum's decoders: the sweep's own decode run (one
        runs.append(sweep.decode(model, variant))       # name, one result: a second "decode" run overwrote it)
    elif kind == "decoder":
        runs.append(sweep.mi(model, variant, "decode", ["compare", fp32, m, "--decode", "--prompt",
                                                        prompt_file(sweep, model), "--steps", "8"], html=False))
    # two compare runs of the same pair: the sweep's and a later one with another feature (a sequence
    # or decode result is another kind: `report --diff` refuses the pair, exit 2)
    compare = sweep.compare(model, variant)
    later = next((r for r in runs if r.command in ("simulated", "bisect-opt", "labels") and r.json_path), None)
    if compare.json_path and later is not None:
        runs.append(sweep.mi(model, variant, "report-diff", ["report", compare.json_path, later.json_path, "--diff"],
                             json_out=False, html=False))
    return runs


def write_labels(sweep: Sweep, model: str) -> Path:
    """Labels of the model's samples: the fp32 model's top-1 class (plain onnxruntime), as JSON."""
    path = sweep.out / model / "labels.json"
    if not path.exists():
        outputs = run_plain(sweep.path(model, "fp32"), samples(sweep, model))
        first = next(iter(outputs))
        labels = {name: int(np.argmax(values.reshape(-1))) for name, values in zip(sample_names(sweep, model),
                                                                                    outputs[first])}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(labels))
    return path


def vad_steps(sweep: Sweep, model: str) -> Path:
    """The model's samples as one sequence: an .npz of the step inputs with a leading time axis (the
    state inputs are fed back by mi; a scalar input, the sample rate, becomes shape [T])."""
    path = sweep.out / model / "steps.npz"
    if not path.exists():
        found = samples(sweep, model)
        state = {k for k in found[0] if "state" in k}
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **{k: np.stack([s[k] for s in found]) for k in found[0] if k not in state})
    return path


def prompt_file(sweep: Sweep, model: str) -> Path:
    """The first sample's input_ids as a JSON prompt for --decode."""
    path = sweep.out / model / "prompt.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([int(x) for x in samples(sweep, model)[0]["input_ids"].reshape(-1)]))
    return path


def nan_model(sweep: Sweep, model: str) -> Tuple[Path, str, str, List[str]]:
    """A copy of the fp32 model with element 0 of the first float weight of a Conv/MatMul/Gemm set to NaN;
    returns (path, the consumer node's name, the weight's name, the consumer's outputs)."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(sweep.path(model, "fp32")))
    inits = {i.name: i for i in proto.graph.initializer}
    node = next((n for n in proto.graph.node if n.op_type in ("Conv", "MatMul", "Gemm") and len(n.input) > 1
                 and n.input[1] in inits and inits[n.input[1]].data_type == onnx.TensorProto.FLOAT), None)
    if node is None:  # a tree ensemble (sklearn_zipmap): its thresholds are attributes, no weight to poison
        import pytest
        pytest.skip(f"{model}: no float Conv/MatMul/Gemm weight to set to NaN")
    init = inits[node.input[1]]
    weight = numpy_helper.to_array(init).copy()
    weight.flat[0] = np.nan
    init.CopyFrom(numpy_helper.from_array(weight, init.name))
    path = sweep.out / model / "nan" / "fp32_nan.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(proto, str(path))
    return path, node.name, init.name, list(node.output)


def nan_runs(sweep: Sweep, model: str) -> Tuple[Run, Run, str, str, List[str]]:
    """`probe --select all --break-on nan` and `nan-bisect` on the NaN copy: (probe, nan-bisect, consumer
    node, weight, the consumer's outputs)."""
    path, node, weight, outputs = nan_model(sweep, model)
    data = sweep.zoo / model / "data"
    probe = sweep.mi(model, "fp32", "probe-nan", ["probe", path, "--inputs", data, "--select", "all", "--break-on",
                                                  "nan", "--no-history"], html=False)
    bisect = sweep.mi(model, "fp32", "nan-bisect-nan", ["nan-bisect", path, "--inputs", data], html=False)
    return probe, bisect, node, weight, outputs


# ---- plain onnxruntime, for the independent checks
def sample_names(sweep: Sweep, model: str) -> List[str]:
    return [f.name for f in sorted((sweep.zoo / model / "data").glob("*.npz"))]


def samples(sweep: Sweep, model: str) -> List[Dict[str, np.ndarray]]:
    """The model's test samples as saved (what `mi --inputs data/` reads)."""
    found = []
    for f in sorted((sweep.zoo / model / "data").glob("*.npz")):
        with np.load(f, allow_pickle=False) as z:
            found.append({k: z[k] for k in z.files})
    return found


def run_plain(model: "Path | bytes", feeds: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, List[np.ndarray]]:
    """Outputs by name over the samples, from a plain onnxruntime session (default options); float inputs
    are cast to the type the model declares (an fp16 model is fed float16)."""
    import onnxruntime as ort

    session = ort.InferenceSession(model if isinstance(model, bytes) else str(model),
                                   providers=["CPUExecutionProvider"])
    types = {i.name: i.type for i in session.get_inputs()}
    outputs: Dict[str, List[np.ndarray]] = {o.name: [] for o in session.get_outputs()}
    for sample in feeds:
        cast = {k: (v.astype(np.float16) if types.get(k) == "tensor(float16)" and v.dtype == np.float32 else v)
                for k, v in sample.items() if k in types}
        for name, value in zip(outputs, session.run(None, cast)):
            outputs[name].append(value if isinstance(value, (list, dict)) else np.asarray(value))
    return outputs


def float_values(value: object) -> Optional[np.ndarray]:
    """One output value as a flat float64 vector, independently of mi: a float tensor raveled, a sequence's
    tensors one after another, a ZipMap's list of maps as each map's values in key order; None for what a
    cosine does not apply to (integer and string tensors)."""
    if isinstance(value, dict):
        return np.array([value[k] for k in sorted(value)], np.float64)
    if isinstance(value, list):
        parts = [float_values(v) for v in value]
        if any(p is None for p in parts):
            return None
        return np.concatenate(parts) if parts else np.zeros(0)
    array = np.asarray(value)
    return array.astype(np.float64).reshape(-1) if array.dtype.kind == "f" else None


def dataset_cosine(a: Sequence[object], b: Sequence[object]) -> float:
    """Cosine of all samples' values at once (mi's data-set value), in float64; NaN when either holds a
    non-finite value (never equal to a finite value); 0 when the two differ in structure (a sequence of
    another length)."""
    xs, ys = [float_values(v) for v in a], [float_values(v) for v in b]
    if any(u is None or w is None or u.size != w.size for u, w in zip(xs, ys)):
        return 0.0
    x, y = np.concatenate(xs), np.concatenate(ys)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return float("nan")
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    return float(np.dot(x, y) / denominator) if denominator else float(np.array_equal(x, y))


def worst_output_cosine(reference: Mapping[str, List[np.ndarray]], other: Mapping[str, List[np.ndarray]]) -> float:
    """The lowest data-set cosine over the float outputs both models have (sequences and maps of floats
    included: `float_values`)."""
    values = [dataset_cosine(reference[name], other[name]) for name in reference
              if name in other and float_values(reference[name][0]) is not None]
    return min(values)


def recheck_alone(sweep: Sweep, model: str, written: Path, scratch: Path) -> float:
    """The written model copied alone into `scratch` (another folder), loaded there by plain onnxruntime
    and compared against fp32: the worst output cosine."""
    scratch.mkdir(parents=True, exist_ok=True)
    alone = scratch / "fixed.onnx"
    shutil.copy(written, alone)
    feeds = samples(sweep, model)
    return worst_output_cosine(run_plain(sweep.path(model, "fp32"), feeds), run_plain(alone, feeds))


def reproduce_exclude_list(sweep: Sweep, model: str, variant: str, exclude: Mapping[str, object],
                           out: Path) -> float:
    """The variant rebuilt with the zoo's own recipe (scripts/zoolib/variants.py) and the plan's exclude list
    (`nodes_to_exclude` for quantize_static, `node_block_list` for the fp16 converter); its worst output
    cosine against fp32 with plain onnxruntime."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from zoolib.models import SPECS
    from zoolib.variants import rebuild

    spec = next(s for s in SPECS if s.name == model)
    count = len(sample_names(sweep, model))
    calib = spec.inputs(8, count)  # scripts/zoo.py's calibration samples: the 8 after the test samples
    rebuild(variant, sweep.path(model, "fp32"), sweep.zoo / model / "_prep.onnx", out, calib,
            nodes_to_exclude=list(exclude.get("nodes_to_exclude") or []),
            node_block_list=list(exclude.get("node_block_list") or []))
    feeds = samples(sweep, model)
    return worst_output_cosine(run_plain(sweep.path(model, "fp32"), feeds), run_plain(out, feeds))

