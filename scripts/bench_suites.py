"""Benchmark: `mi run` against the shell-script way, and image preprocessing against torchvision.

1. A gate of N compare steps on the ResNet-style fp32/int8 pair: one `mi run` process versus N
   `mi compare` processes (what a CI shell script does). Wall time per whole process, median of
   --repeat runs.
2. Decoding and preprocessing JPEGs (ImageNet spec: resize 256, crop 224, 1/255, mean/std): mi's
   image reader versus torchvision's classic transform on the same files, and the largest
   difference between the two tensors.

    python scripts/bench_suites.py [--steps 4] [--repeat 3] [--images 32]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(cmd, repeat: int, env=None) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=False, capture_output=True, cwd=ROOT, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_suite(folder: Path, steps: int, repeat: int) -> list:
    from inspector_cli.testing.models import build_pair, image_samples, save_samples

    fp32, int8 = build_pair(folder, softmax=False, calibration_count=16)
    save_samples(image_samples(8, seed=3), folder / "data")
    body = "".join(f"  - name: s{i}\n    compare: {{model-a: {fp32}, model-b: {int8}, inputs: {folder / 'data'}, "
                   f"min-cosine: 0.9}}\n" for i in range(steps))
    (folder / "suite.yaml").write_text("version: 1\nsteps:\n" + body)
    mi = [sys.executable, "-m", "inspector_cli"]
    script = " && ".join(" ".join(mi + ["compare", str(fp32), str(int8), "--inputs", str(folder / "data"),
                                        "--min-cosine", "0.9"]) for _ in range(steps))
    one_run = timed(mi + ["run", str(folder / "suite.yaml")], repeat)
    separate = timed(["bash", "-c", script], repeat)
    return [(f"{steps} compare steps: one `mi run`", one_run, 1.0),
            (f"{steps} compare steps: {steps} `mi compare` processes", separate, separate / one_run)]


def bench_images(folder: Path, count: int) -> list:
    from PIL import Image

    from inspector_cli.core.graph import ModelGraph
    from inspector_cli.core.images import read_image
    from inspector_cli.core.preprocess import parse_spec, resolve_spec

    sys.path.insert(0, str(ROOT / "tests"))
    from tests.fixtures.helpers import affine_model

    rng = np.random.default_rng(0)
    images = []
    for i in range(count):
        path = folder / f"img{i}.jpg"
        base = rng.integers(0, 256, (375 // 25, 500 // 25, 3), dtype=np.uint8)
        Image.fromarray(base).resize((500, 375)).save(path, quality=90)
        images.append(path)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    specs = ModelGraph.from_proto(affine_model(shape=(1, 3, 224, 224))).inputs
    spec, _ = resolve_spec(parse_spec({"resize": 256, "center-crop": 224, "scale": "1/255", "mean": mean,
                                       "std": std}), specs)
    options = {"preprocess": spec.to_dict()}
    read_image(images[0], specs, options)  # warm-up: first-call costs are not the pipeline's
    start = time.perf_counter()
    ours = [read_image(p, specs, options)["x"] for p in images]
    mi_time = time.perf_counter() - start
    rows = [(f"{count} JPEGs 500x375 -> 224: mi image reader", mi_time, 1.0)]
    try:
        from torchvision import transforms
    except ImportError:
        return rows + [("torchvision: not installed", float("nan"), float("nan"))]
    pipeline = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                   transforms.Normalize(mean, std)])
    pipeline(Image.open(images[0]).convert("RGB"))  # warm-up
    start = time.perf_counter()
    theirs = [pipeline(Image.open(p).convert("RGB")).numpy() for p in images]
    tv_time = time.perf_counter() - start
    worst = max(float(np.abs(a[0] - b).max()) for a, b in zip(ours, theirs))
    rows.append((f"{count} JPEGs: torchvision Resize/CenterCrop/ToTensor/Normalize (max diff {worst:.1e})",
                 tv_time, tv_time / mi_time))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--images", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = bench_suite(Path(tmp), args.steps, args.repeat) + bench_images(Path(tmp), args.images)
    from tabulate import tabulate

    print(tabulate([(name, f"{seconds:.3f}", f"{ratio:.2f}x") for name, seconds, ratio in rows],
                   headers=["what", "wall s", "vs mi"], tablefmt="github"))


if __name__ == "__main__":
    main()
