"""Export a zoo spec to ONNX as users do (dynamic axes, the chosen opset and exporter) and check it runs."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from .models import Spec


def export(spec: Spec, path: Path, sample: Dict[str, np.ndarray]) -> Dict[str, object]:
    """Write `spec`'s fp32 model to `path`; return facts for the manifest (exporter, opset, torch-vs-ORT error)."""
    import onnx

    if spec.exporter == "optimum":  # in optimum's own venv (zoolib/decoders.py)
        from . import decoders
        return decoders.export(spec.recipe, path, sample)
    built = spec.build()
    if isinstance(built, onnx.ModelProto):  # skl2onnx already made the graph
        onnx.save(built, str(path))
        return {"exporter": spec.exporter, "opset": spec.opset}
    import torch

    names = list(sample)
    args = tuple(torch.from_numpy(np.asarray(sample[n])) for n in names)
    with torch.no_grad():
        expected = built(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    kwargs = dict(input_names=names, output_names=list(spec.output_names), opset_version=spec.opset,
                  dynamic_axes=spec.dynamic or None)
    if spec.exporter == "dynamo":
        # the wrapper's forward(*args) is one tuple argument for torch.export: dynamic shapes nest likewise
        auto = torch.export.Dim.AUTO
        shapes = (tuple({axis: auto for axis in spec.dynamic.get(n, {})} for n in names),)
        kwargs.pop("dynamic_axes")
        torch.onnx.export(built, args, str(path), dynamo=True, external_data=False, dynamic_shapes=shapes, **kwargs)
    else:
        torch.onnx.export(built, args, str(path), dynamo=False, do_constant_folding=True, **kwargs)
    got = run(path, sample)
    error = max(_max_abs(g, e) for g, e in zip(got, expected))
    return {"exporter": spec.exporter, "opset": spec.opset, "torch_vs_ort_max_abs": error}


def refuse_degenerate(path: Path, samples: Sequence[Dict[str, np.ndarray]], names: Sequence[str]) -> None:
    """Raise when a float output of the model at `path` is the same for every sample (within 1e-6).

    A random-init network whose activations vanish through its depth (the zoo's MobileNetV2 and
    EfficientNet before He init: logits ~1e-25 and exactly 0) makes every comparison trivially perfect;
    such a member tests nothing and must not be built. Sequence, map and integer outputs are not checked.
    """
    runs = [run(path, sample) for sample in samples]
    for position in range(len(runs[0])):
        name = names[position] if position < len(names) else f"output #{position}"
        values = [r[position] for r in runs]
        if not all(isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in values):
            continue
        if len({v.shape for v in values}) > 1:
            continue
        spread = max(float(np.max(np.abs(v.astype(np.float64) - values[0]))) for v in values[1:])
        if spread <= 1e-6:
            raise ValueError(f"{path.name}: output {name!r} is the same for all {len(values)} samples "
                             f"(spread {spread:.3g}, max |value| {float(np.max(np.abs(values[0]))):.3g}): "
                             "a degenerate model (vanishing random-init activations?); fix its init")


def refusal(path: Path, expected: str) -> str:
    """onnxruntime's error loading the model at `path`, which must contain `expected` (a member built to be
    refused that loads, or is refused for another reason, is no test of how mi handles the refusal)."""
    import onnxruntime as ort
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own exception types
        message = str(exc).splitlines()[0]
        if expected in message:
            return message
        raise ValueError(f"{path.name}: onnxruntime refuses it, but not with {expected!r}: {message}") from exc
    raise ValueError(f"{path.name}: onnxruntime loads it; expected a refusal ({expected!r})")


def _max_abs(got: object, expected: object) -> float:
    """Largest |onnxruntime - torch| of one output; a list output (an ONNX sequence) element by element."""
    if isinstance(expected, (list, tuple)):
        if len(got) != len(expected):  # type: ignore[arg-type]
            return float("inf")
        return max((_max_abs(g, e) for g, e in zip(got, expected)), default=0.0)  # type: ignore[call-overload]
    return float(np.max(np.abs(np.asarray(got, np.float64) - expected.numpy())))  # type: ignore[attr-defined]


def run(path: Path, sample: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """Plain onnxruntime run of one sample (inputs cast to the model's float type, as mi does)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {}
    for i in session.get_inputs():
        x = np.asarray(sample[i.name])
        if i.type == "tensor(float16)":
            x = x.astype(np.float16)
        feed[i.name] = x
    return session.run(None, feed)
