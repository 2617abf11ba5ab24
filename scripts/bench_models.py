#!/usr/bin/env python3
"""Models and samples of the `mi compare --layers` benchmark, built once and cached in bench-out/.

torchvision ResNet-50 and MobileNetV2 (random init) and a small transformer encoder, exported with
torch.onnx.export(..., dynamo=False); each gets an int8 QDQ version (onnxruntime quantize_static,
after quant_pre_process, as onnxruntime recommends) and an fp16 version (onnxconverter_common,
keep_io_types). Samples are seeded npz files shared by every tool of the benchmark.

    python scripts/bench_models.py [OUT_DIR]      # builds everything that is missing
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple

if TYPE_CHECKING:
    import onnx

MODELS = ("mobilenet_v2", "resnet50", "encoder")
INPUT_SHAPES: Dict[str, Tuple[int, ...]] = {
    "mobilenet_v2": (1, 3, 224, 224),
    "resnet50": (1, 3, 224, 224),
    "encoder": (1, 128, 256),
}
CALIBRATION_SAMPLES = 8


def _torch_model(name: str):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    if name in ("mobilenet_v2", "resnet50"):
        return getattr(_torchvision_models(), name)(weights=None).eval()
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True,
                                             dropout=0.0)
    return torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).eval()


def _torchvision_models():  # type: ignore[no-untyped-def]
    """torchvision.models (only the CNNs need it; optional: docs/zoo.md). The torchvision wheel of
    the registry is built against CUDA torch: with the machine's CPU torch (2.13.0) its compiled
    operators (nms, roi_align: detection only) do not load and `import torchvision` fails. The
    architectures are plain Python, so they are then imported without the package's __init__
    (torchvision 0.28.0 pairs with torch 2.13.0; same modules, same parameters)."""
    try:
        import torchvision

        return torchvision.models
    except (ImportError, RuntimeError, OSError):
        import importlib
        import importlib.util
        import types

        spec = importlib.util.find_spec("torchvision")
        if spec is None or not spec.submodule_search_locations:
            raise
        for key in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[key]  # the half-imported package of the failed attempt
        package = types.ModuleType("torchvision")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["torchvision"] = package
        return importlib.import_module("torchvision.models")


def export_fp32(name: str, path: Path) -> Path:
    import torch

    model = _torch_model(name)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused fast path has no ONNX export
    example = torch.randn(*INPUT_SHAPES[name])
    with torch.no_grad():
        torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=17,
                          input_names=["input"], output_names=["output"])
    return path


def samples(name: str, count: int, seed: int = 1) -> "List[Dict[str, object]]":
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = INPUT_SHAPES[name]
    if name == "encoder":
        return [{"input": rng.normal(0, 1, size=shape).astype(np.float32)} for _ in range(count)]
    # images normalised like ImageNet inputs: smooth structure plus noise
    out = []
    for _ in range(count):
        base = rng.normal(0, 1, size=(shape[0], shape[1], 28, 28))
        up = np.repeat(np.repeat(base, 8, axis=2), 8, axis=3)
        out.append({"input": (up + rng.normal(0, 0.3, size=shape)).astype(np.float32)})
    return out


def quantize(fp32: Path, out: Path, calibration: "List[Dict[str, object]]") -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    logging.getLogger().setLevel(logging.ERROR)
    prep = out.with_name(out.stem + "_prep.onnx")
    quant_pre_process(str(fp32), str(prep), skip_symbolic_shape=True)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it: "Iterator[Dict[str, object]]" = iter(calibration)

        def get_next(self) -> "Optional[Dict[str, object]]":
            return next(self.it, None)

    quantize_static(str(prep), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    prep.unlink()
    return out


def to_fp16(fp32: Path, out: Path) -> Path:
    import onnx
    from onnxconverter_common import float16

    model = float16.convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True)
    _fix_casts(model)
    onnx.save(model, str(out))
    return out


def _fix_casts(model) -> None:  # type: ignore[no-untyped-def]
    """onnxconverter_common declares the output of an existing Cast-to-float as float16 but leaves
    the Cast's `to` at float (onnxruntime then refuses the model): make the Cast agree."""
    import onnx

    fp16 = {v.name for v in model.graph.value_info if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16}
    for node in model.graph.node:
        if node.op_type == "Cast" and node.output[0] in fp16:
            for attr in node.attribute:
                if attr.name == "to" and attr.i == onnx.TensorProto.FLOAT:
                    attr.i = onnx.TensorProto.FLOAT16


def renamed(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy of `model` with every node and inner tensor renamed (n0.., t0..), as another
    quantisation tool would name them. The one definition: tests/remedy imports it from here
    (scripts/ stays runnable on its own; tests already load scripts/ modules, e.g. gen_docs)."""
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    keep = {i.name for i in model.graph.input} | {o.name for o in model.graph.output}
    names: Dict[str, str] = {}

    def new(name: str) -> str:
        return name if not name or name in keep else names.setdefault(name, f"t{len(names)}")

    for index, node in enumerate(model.graph.node):
        node.name = f"n{index}"
        node.input[:] = [new(x) for x in node.input]
        node.output[:] = [new(x) for x in node.output]
    for tensor in model.graph.initializer:
        tensor.name = new(tensor.name)
    del model.graph.value_info[:]
    return model


def renamed_qdq(int8: Path, out: Path) -> Path:
    """The int8 QDQ model `renamed`: onnxruntime's qdq_loss_debug matches by its own name suffixes."""
    import onnx

    onnx.save(renamed(onnx.load(str(int8))), str(out))
    return out


def save_samples(name: str, folder: Path, count: int) -> Path:
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    existing = sorted(folder.glob("*.npz"))
    if len(existing) == count:
        return folder
    for old in existing:
        old.unlink()
    for i, feeds in enumerate(samples(name, count, seed=1)):
        np.savez(folder / f"s{i:03d}.npz", **feeds)
    return folder


def model_paths(out: Path, name: str, counts=(8, 64)) -> Dict[str, Path]:  # type: ignore[no-untyped-def]
    """Where the models and sample folders of one network live (no imports, no building)."""
    paths = {"fp32": out / f"{name}_fp32.onnx", "int8": out / f"{name}_int8.onnx", "fp16": out / f"{name}_fp16.onnx",
             "int8renamed": out / f"{name}_int8renamed.onnx"}
    paths.update({f"data{count}": out / f"{name}_data{count}" for count in counts})
    return paths


def prepare(out: Path, names=MODELS, counts=(8, 64)) -> Dict[str, Dict[str, Path]]:  # type: ignore[no-untyped-def]
    """Paths of fp32 / int8 / fp16 models and sample folders per model, building what is missing."""
    out.mkdir(parents=True, exist_ok=True)
    built: Dict[str, Dict[str, Path]] = {}
    for name in names:
        paths = model_paths(out, name, counts)
        if not paths["fp32"].exists():
            print(f"exporting {name} ...", file=sys.stderr)
            export_fp32(name, paths["fp32"])
        if not paths["int8"].exists():
            print(f"quantising {name} (quantize_static, {CALIBRATION_SAMPLES} calibration samples) ...", file=sys.stderr)
            quantize(paths["fp32"], paths["int8"], samples(name, CALIBRATION_SAMPLES, seed=100))
        if not paths["int8renamed"].exists():
            renamed_qdq(paths["int8"], paths["int8renamed"])
        if not paths["fp16"].exists():
            print(f"converting {name} to fp16 ...", file=sys.stderr)
            to_fp16(paths["fp32"], paths["fp16"])
        for count in counts:
            paths[f"data{count}"] = save_samples(name, out / f"{name}_data{count}", count)
        built[name] = paths
    return built


if __name__ == "__main__":
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):  # not an output folder
        print(__doc__.strip())
        sys.exit(0)
    names = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else MODELS
    counts = tuple(int(n) for n in sys.argv[3].split(",")) if len(sys.argv) > 3 else (8, 64)
    prepare(Path(sys.argv[1] if len(sys.argv) > 1 else "bench-out"), names, counts)
