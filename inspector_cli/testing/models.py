"""Small real models built with onnx.helper, for the demo, the tests and the benchmarks.

`build_cnn` makes a ResNet-style classifier (Conv-BN-ReLU stem, residual blocks, global pool,
Gemm, Softmax) with seeded random weights; `quantize_qdq` turns any float model into its int8 QDQ
version with onnxruntime.quantization.quantize_static, calibrated on seeded samples.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(array.astype(np.float32) if array.dtype == np.float64 else array, name))
        return name

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, prefix: str = "conv") -> str:
        n = self.name(prefix)
        fan_in = c_in * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), size=(c_out, c_in, k, k))
        b = self.rng.normal(0, 0.01, size=(c_out,))
        self.nodes.append(helper.make_node(
            "Conv", [x, self.const(f"{n}.weight", w), self.const(f"{n}.bias", b)], [f"{n}_out"], name=n,
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        return f"{n}_out"

    def bn(self, x: str, c: int) -> str:
        n = self.name("bn")
        scale = self.rng.uniform(0.5, 1.5, size=(c,))
        bias = self.rng.normal(0, 0.1, size=(c,))
        mean = self.rng.normal(0, 0.1, size=(c,))
        var = self.rng.uniform(0.5, 1.5, size=(c,))
        self.nodes.append(helper.make_node(
            "BatchNormalization",
            [x, self.const(f"{n}.scale", scale), self.const(f"{n}.bias", bias),
             self.const(f"{n}.mean", mean), self.const(f"{n}.var", var)],
            [f"{n}_out"], name=n, epsilon=1e-5))
        return f"{n}_out"

    def op(self, op_type: str, inputs: Sequence[str], **attrs: object) -> str:
        n = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [f"{n}_out"], name=n, **attrs))
        return f"{n}_out"


def build_cnn(*, seed: int = 0, channels: Tuple[int, ...] = (16, 32), blocks: int = 1, classes: int = 10,
              image: int = 32, batch: Optional[int] = 1, opset: int = 17, softmax: bool = True) -> onnx.ModelProto:
    """A ResNet-style image classifier: input 'input' [N,3,H,W] float32, output 'probs' [N, classes]."""
    b = _Builder(seed)
    x = b.op("Relu", [b.bn(b.conv("input", 3, channels[0], 3, prefix="stem"), channels[0])])
    c_in = channels[0]
    for stage, c_out in enumerate(channels):
        for block in range(blocks):
            stride = 2 if (stage > 0 and block == 0) else 1
            y = b.op("Relu", [b.bn(b.conv(x, c_in, c_out, 3, stride), c_out)])
            y = b.bn(b.conv(y, c_out, c_out, 3), c_out)
            skip = x if (stride == 1 and c_in == c_out) else b.bn(b.conv(x, c_in, c_out, 1, stride, "down"), c_out)
            x = b.op("Relu", [b.op("Add", [y, skip])])
            c_in = c_out
    pooled = b.op("GlobalAveragePool", [x])
    flat = b.op("Flatten", [pooled], axis=1)
    w = b.rng.normal(0, np.sqrt(1.0 / c_in), size=(classes, c_in))
    logits_inputs = [flat, b.const("fc.weight", w), b.const("fc.bias", b.rng.normal(0, 0.01, size=(classes,)))]
    b.nodes.append(helper.make_node("Gemm", logits_inputs, ["logits"], name="fc", transB=1))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])]
    if softmax:
        b.nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1))
        outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, classes])]
    graph = helper.make_graph(b.nodes, "mini_resnet",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])],
                              outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="mi-testing")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def image_samples(count: int, shape: Sequence[int] = (1, 3, 32, 32), seed: int = 1,
                  name: str = "input") -> List[Dict[str, np.ndarray]]:
    """Seeded image-like samples (smooth patterns plus noise, roughly normalised)."""
    rng = np.random.default_rng(seed)
    samples = []
    h, w = shape[-2], shape[-1]
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    for _ in range(count):
        base = np.stack([np.sin(rng.uniform(1, 4) * xx + rng.uniform(0, 3)) * np.cos(rng.uniform(1, 4) * yy)
                         for _ in range(shape[-3])])
        arr = base[None] + rng.normal(0, 0.3, size=(shape[0], *base.shape))
        samples.append({name: arr.astype(np.float32)})
    return samples


def save_samples(samples: Sequence[Dict[str, np.ndarray]], folder: Path, prefix: str = "sample") -> List[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, feeds in enumerate(samples):
        path = folder / f"{prefix}_{i:04d}.npz"
        np.savez(path, **feeds)
        paths.append(path)
    return paths


def quantize_qdq(float_path: Path, out_path: Path, calibration: Sequence[Dict[str, np.ndarray]], *,
                 per_channel: bool = True, op_types: Optional[Sequence[str]] = None,
                 preprocess: bool = True, reduce_range: bool = False) -> Path:
    """int8 QDQ model from `float_path` with onnxruntime.quantization.quantize_static.

    `preprocess` runs onnxruntime's recommended quant_pre_process first (BatchNorm folding, shape
    inference), as users do before quantising. `reduce_range`: 7-bit weights, whose products x86
    CPUs without VNNI sum exactly (core/fingerprint.u8s8_saturates): the same arithmetic on every CPU.
    """
    import logging

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    logging.getLogger().setLevel(logging.ERROR)  # quantize_static logs advice through the root logger
    source = float_path
    if preprocess:
        source = out_path.with_name(out_path.stem + "_prep.onnx")
        quant_pre_process(str(float_path), str(source), skip_symbolic_shape=True)

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it: Iterator[Dict[str, np.ndarray]] = iter(calibration)

        def get_next(self) -> Optional[Dict[str, np.ndarray]]:
            return next(self._it, None)

    quantize_static(str(source), str(out_path), _Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=per_channel,
                    op_types_to_quantize=list(op_types) if op_types else None, reduce_range=reduce_range)
    if source != float_path:
        source.unlink()
    return out_path


def build_pair(folder: Path, *, seed: int = 0, calibration_count: int = 16, **cnn_args: object) -> Tuple[Path, Path]:
    """fp32 CNN and its int8 QDQ quantisation, saved in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "model_fp32.onnx"
    onnx.save(build_cnn(seed=seed, **cnn_args), fp32)  # type: ignore[arg-type]
    image = int(cnn_args.get("image", 32))  # type: ignore[call-overload]
    calib = image_samples(calibration_count, (1, 3, image, image), seed=seed + 100)
    int8 = quantize_qdq(fp32, folder / "model_int8.onnx", calib)
    return fp32, int8
