"""`mi fix` in the zoo sweep (issue 44): the run, and the independent checks of its plan (plain onnxruntime
and the zoo's own quantiser recipe, never mi's code)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from . import features as F
from .sweep import Run, Sweep

FIX_VARIANTS = ("qdq_u8u8", "qdq_s8s8_pc", "qop", "fp16", "fp16_io")
CNN_MODELS = ("resnet", "resnet_op11", "resnet_dynamo", "mobilenetv2", "efficientnet", "convnext", "regnet")
RECIPES = {"qdq_u8u8": dict(act="QUInt8", weight="QUInt8", per_channel=False),
           "qdq_s8s8_pc": dict(act="QInt8", weight="QInt8", per_channel=True)}


def _spec(model: str) -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from zoolib.models import SPECS

    return next(s for s in SPECS if s.name == model)


def calibration(sweep: Sweep, model: str) -> List[Dict[str, np.ndarray]]:
    """scripts/zoo.py's calibration samples of the model: the 8 after the test samples."""
    return _spec(model).inputs(8, len(F.sample_names(sweep, model)))


def calibration_folder(sweep: Sweep, model: str) -> Path:
    folder = sweep.out / model / "calib"
    if not folder.exists():
        folder.mkdir(parents=True)
        for k, feeds in enumerate(calibration(sweep, model)):
            np.savez(folder / f"c{k:02d}.npz", **feeds)
    return folder


def fix(sweep: Sweep, model: str, variant: str) -> Tuple[Run, float]:
    """`mi fix fp32 V --target cosine>=X --calibration CALIB --write-model --export`, X halfway between the
    sweep's baseline cosine and 1 (the fallback plan's target)."""
    base = F.baseline_cosine(sweep.compare(model, variant))
    target = F.halfway_target(base if base is not None else 0.99)
    folder = sweep.out / model / variant
    args = ["fix", sweep.path(model, "fp32"), sweep.path(model, variant), "--inputs", sweep.zoo / model / "data",
            "--calibration", calibration_folder(sweep, model), "--target", f"cosine>={target:.10f}",
            "--write-model", folder / "fix.onnx", "--export", folder / "fix-export.json"]
    extra = "fp16" if variant.startswith("fp16") else ""
    return sweep.mi(model, variant, "fix", args, html=False, extra=extra), target


def result(run: Run) -> Dict[str, Any]:
    return json.loads(Path(run.json_path).read_text())["results"] if run.json_path else {}


def rebuild_with_exports(sweep: Sweep, model: str, variant: str, ort: Mapping[str, Any], out: Path) -> float:
    """The variant rebuilt by the zoo's recipe with the exported nodes_to_exclude and extra_options; its worst
    output cosine against fp32 (plain onnxruntime)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from zoolib.variants import rebuild

    rebuild(variant, sweep.path(model, "fp32"), sweep.zoo / model / "_prep.onnx", out, calibration(sweep, model),
            nodes_to_exclude=list(ort.get("nodes_to_exclude") or []), extra_options=dict(ort.get("extra_options") or {}))
    feeds = F.samples(sweep, model)
    return F.worst_output_cosine(F.run_plain(sweep.path(model, "fp32"), feeds), F.run_plain(out, feeds))


def cheaper_would_do(sweep: Sweep, model: str, variant: str, plan: Mapping[str, Any], target: float,
                     scratch: Path) -> List[str]:
    """The float nodes of the plan for which a 16-bit or per-channel remedy (the other choices as planned)
    also meets the target, each rebuilt by the zoo's recipe: the Done-when of issue 44 wants none."""
    ort = plan["exports"]["onnxruntime"]
    excluded = list(ort["nodes_to_exclude"])
    overrides = dict(ort["extra_options"].get("TensorQuantOverrides") or {})
    fp32 = _fp32_inputs(sweep, model)
    found: List[str] = []
    for node in [c["fp32_node"] for c in plan["choices"] if c["remedy"] == "float"]:
        tensors = fp32.get(node)
        if tensors is None:
            continue
        activations, weight = tensors
        for name, extra in (("a16", {t: [{"quant_type": "QUInt16" if variant == "qdq_u8u8" else "QInt16"}]
                                     for t in activations}),
                            ("per-channel", {weight: [{"axis": 0, "quant_type": "QInt8", "symmetric": True}]}
                             if weight and variant == "qdq_u8u8" else None)):
            if extra is None:
                continue
            options = {"TensorQuantOverrides": {**overrides, **extra}, "UseQDQContribOps": True}
            rest = [n for n in excluded if n != node]
            cosine = rebuild_with_exports(sweep, model, variant, {"nodes_to_exclude": rest, "extra_options": options},
                                          scratch / f"{name}.onnx")
            if cosine >= target:
                found.append(f"{node}: {name} reads {cosine:.7f} >= {target:.7f}")
    return found


def _fp32_inputs(sweep: Sweep, model: str) -> Dict[str, Tuple[List[str], str]]:
    """node -> (its float activation inputs and outputs, its weight initializer or '') in the fp32 model."""
    import onnx

    graph = onnx.load(str(sweep.path(model, "fp32")), load_external_data=False).graph
    inits = {t.name for t in graph.initializer}
    out: Dict[str, Tuple[List[str], str]] = {}
    for node in graph.node:
        acts = [t for t in [*node.input, *node.output] if t and t not in inits]
        weight = node.input[1] if node.op_type in ("Conv", "Gemm", "MatMul") and len(node.input) > 1 \
            and node.input[1] in inits else ""
        out[node.name] = (acts, weight)
    return out
