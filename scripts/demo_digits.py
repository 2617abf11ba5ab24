#!/usr/bin/env python3
"""The demo's model pair, on real data: a small CNN trained on scikit-learn's bundled 8x8 digits.

    python scripts/demo_digits.py build OUT_DIR      # quantise the shipped fp32 model to int8, write samples
    python scripts/demo_digits.py accuracy OUT_DIR   # top-1 accuracy of both models on the held-out labels
    python scripts/demo_digits.py kernels OUT_DIR    # the int8 model on onnxruntime's two kernel paths, and
                                                     # the same without reduce_range (full-range weights)
    python scripts/demo_digits.py train FP32_FILE    # retrain the shipped fp32 model (needs torch: dev extra)

Float training differs from one CPU to the next (its kernels round differently), so the trained
fp32 model ships with the project (scripts/demo_data/digits_fp32.onnx, 40 KB, built by `train`):
only the quantisation runs on the user's machine. Nothing is downloaded: load_digits() reads 1,797
labelled images shipped inside scikit-learn.

The quantisation is onnxruntime's quantize_static, int8 QDQ with the usual settings (per-channel
weights, asymmetric MinMax activations, BatchNorm folded by quant_pre_process) and 7-bit weights
(reduce_range=True, onnxruntime's advice for x86 CPUs without VNNI), but with one range set by hand:
the activation after the second depthwise-separable block (/15/Relu_output_0) clips at a third of
its calibrated maximum, as a stale TensorQuantOverrides entry or a calibration set that misses the
bright digits would. Its effect (several points of top-1 accuracy, one layer's own error) is the
same on every CPU: with 7-bit weights onnxruntime's int8 sums are exact everywhere. With full-range
weights they are not on x86 with AVX2 and no VNNI, whose kernels add pairs of uint8 x int8 products
in a saturating int16 (255 * 127 * 2 > 32767): there the first layer already diverges (`kernels`
shows it). Needs the `demo` extra (scikit-learn).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SEED = 0
HELD_OUT = 360        # the last 360 images (20 %) are never seen in training or calibration
CALIBRATION = 64      # training images used to calibrate the int8 ranges
EPOCHS = 8
SHIPPED = Path(__file__).resolve().parent / "demo_data" / "digits_fp32.onnx"
CLIPPED = "/15/Relu_output_0"   # the activation whose range is set by hand (too small)
CLIP = 3.0                      # ... to 1/CLIP of its calibrated maximum


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, held-out images, held-out labels); images NCHW float32 in [0, 1]."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(labels))  # a fixed shuffle: classes mixed in both parts
    images, labels = images[order], labels[order]
    return images[:-HELD_OUT], labels[:-HELD_OUT], images[-HELD_OUT:], labels[-HELD_OUT:]


def build_model():  # -> torch.nn.Module (torch imported lazily: `accuracy` does not need it)
    """A MobileNet-style CNN: depthwise-separable blocks with BatchNorm, 9k parameters."""
    from torch import nn

    def block(c_in: int, c_out: int) -> list:
        return [nn.Conv2d(c_in, c_in, 3, padding=1, groups=c_in, bias=False), nn.BatchNorm2d(c_in), nn.ReLU(),
                nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]

    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        *block(16, 32), nn.MaxPool2d(2),
        *block(32, 64), nn.MaxPool2d(2),
        *block(64, 64),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    )


def train(images: np.ndarray, labels: np.ndarray):
    """Adam, batch 32, a fixed number of epochs; one thread and deterministic kernels for identical weights."""
    import torch

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = build_model()
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = torch.from_numpy(images), torch.from_numpy(labels)
    generator = torch.Generator().manual_seed(SEED)
    model.train()
    for _ in range(EPOCHS):
        for idx in torch.randperm(len(y), generator=generator).split(32):
            optimiser.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            optimiser.step()
    return model.eval()


def export(model, path: Path) -> None:
    """ONNX with a dynamic batch axis (TorchScript exporter: no onnxscript needed)."""
    import warnings

    import torch

    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the legacy exporter is what we want here
    torch.onnx.export(model, torch.zeros(1, 1, 8, 8), str(path), input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17, dynamo=False)


def activation_max(model: Path, tensor: str, images: np.ndarray) -> float:
    """The largest value `tensor` takes on `images` (what MinMax calibration would find)."""
    import onnx
    import onnxruntime as ort

    proto = onnx.load(str(model))
    proto.graph.output.append(onnx.ValueInfoProto(name=tensor))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return float(session.run([tensor], {"image": images})[0].max())


def quantise(fp32: Path, int8: Path, calibration: np.ndarray, reduce_range: bool = True) -> None:
    """int8 QDQ: BatchNorm folded, per-channel 7-bit weights (full 8 bits without `reduce_range`), asymmetric
    MinMax activations; CLIPPED's range too small."""
    import logging

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    logging.getLogger().setLevel(logging.ERROR)  # quantize_static logs advice through the root logger
    prep = int8.with_name("model_prep.onnx")
    quant_pre_process(str(fp32), str(prep), skip_symbolic_shape=True)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._batches = iter(np.split(calibration, len(calibration) // 16))

        def get_next(self) -> dict | None:
            batch = next(self._batches, None)
            return None if batch is None else {"image": batch}

    # uint8 with zero point 0 over [0, max / CLIP]: everything above a third of the range saturates
    scale = activation_max(prep, CLIPPED, calibration) / CLIP / 255
    overrides = {CLIPPED: [{"scale": np.array(scale, np.float32), "zero_point": np.array(0, np.uint8)}]}
    quantize_static(str(prep), str(int8), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=reduce_range,
                    extra_options={"TensorQuantOverrides": overrides})
    prep.unlink()


def train_and_export(path: Path) -> None:
    """Retrain the shipped fp32 model (torch: the dev extra); commit the file it writes."""
    train_x, train_y, _, _ = load_split()
    path.parent.mkdir(parents=True, exist_ok=True)
    export(train(train_x, train_y), path)
    print(f"trained on {len(train_y)} digits -> {path} ({path.stat().st_size:,} bytes)")


def build(out: Path) -> None:
    """Copy the shipped fp32 model, quantise it, and write the held-out samples (one .npz each) and their labels."""
    import shutil

    train_x, train_y, test_x, test_y = load_split()
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SHIPPED, out / "digits_fp32.onnx")
    quantise(out / "digits_fp32.onnx", out / "digits_int8.onnx", train_x[:CALIBRATION])
    data = out / "heldout"
    data.mkdir(exist_ok=True)
    for i, image in enumerate(test_x):
        np.savez(data / f"digit_{i:03d}.npz", image=image[None])
    np.save(out / "heldout_labels.npy", test_y)
    # the same labels as `mi compare --labels` reads them: sample file, class index
    (out / "heldout_labels.csv").write_text(
        "sample,label\n" + "".join(f"digit_{i:03d}.npz,{int(label)}\n" for i, label in enumerate(test_y)))
    print(f"fp32 model trained on {len(train_y)} digits (shipped), int8 calibrated on {CALIBRATION}, "
          f"{len(test_y)} held out in {data}/")


def accuracy(out: Path) -> None:
    """Print each model's top-1 accuracy on the held-out labels."""
    import onnxruntime as ort

    _, _, test_x, test_y = load_split()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    for name in ("digits_fp32.onnx", "digits_int8.onnx"):
        session = ort.InferenceSession(str(out / name), options, providers=["CPUExecutionProvider"])
        predicted = session.run(None, {"image": test_x})[0].argmax(axis=1)
        correct = int((predicted == test_y).sum())
        print(f"{name}: top-1 accuracy {correct / len(test_y):.1%} ({correct}/{len(test_y)} held-out digits)")


def kernels(out: Path) -> None:
    """The int8 model run by onnxruntime's fused int8 kernels and by its reference QDQ path (no graph
    optimisation: DequantizeLinear -> float op -> QuantizeLinear): what differs between CPUs' kernels.
    Then the same for the model quantised with full-range weights (written as digits_int8_fullrange.onnx)."""
    import onnxruntime as ort

    train_x, _, test_x, test_y = load_split()
    fullrange = out / "digits_int8_fullrange.onnx"
    quantise(out / "digits_fp32.onnx", fullrange, train_x[:CALIBRATION], reduce_range=False)
    for title, model in (("7-bit weights (the demo's)", out / "digits_int8.onnx"), ("full-range weights", fullrange)):
        print(title)
        logits = {}
        for label, level in (("fused int8 kernels", ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
                             ("reference QDQ path", ort.GraphOptimizationLevel.ORT_DISABLE_ALL)):
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.graph_optimization_level = level
            session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            logits[label] = session.run(None, {"image": test_x})[0]
            correct = int((logits[label].argmax(axis=1) == test_y).sum())
            print(f"  {label}: top-1 {correct}/{len(test_y)}")
        a, b = logits.values()
        print(f"  logits max |diff| {np.abs(a - b).max():.4g}; predictions that differ: "
              f"{int((a.argmax(1) != b.argmax(1)).sum())}")


if __name__ == "__main__":
    commands = {"build": build, "accuracy": accuracy, "kernels": kernels, "train": train_and_export}
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        sys.exit(__doc__.split("\n\n")[1])
    commands[sys.argv[1]](Path(sys.argv[2]))
