#!/usr/bin/env python3
"""Benchmark `mi compare --layers all` against the inference floor and the tools users compare it with.

For torchvision ResNet-50 and MobileNetV2 (random init) and a transformer encoder, each fp32 vs int8
QDQ (onnxruntime quantize_static) and fp32 vs fp16 (onnxconverter_common), with 8 and 64 samples,
side by side in one invocation, every measurement a separate process (wall time and peak RSS are
per process, from os.wait4):

  floor       plain onnxruntime inference of both models over the samples (sessions + runs)
  mi          python -m inspector_cli compare A B --inputs DIR --layers all --json out.json
  polygraphy  polygraphy run A --onnxrt --onnx-outputs mark all --save-outputs, then B with
              --load-outputs (its layer-by-layer comparison); slow: by default only MobileNetV2
              int8 with 8 samples (--polygraphy all runs it everywhere)
  qdq_debug   onnxruntime.quantization.qdq_loss_debug: augment both models, collect activations,
              match them, compute the errors (int8 pairs, smallest sample count only: it holds every
              activation of every sample, 64 samples of ResNet-50 would need ~25 GB)

Models and samples are built once and cached in bench-out/ (see bench_models.py). Wall times are
the minimum over --repeat runs (the machine is shared); peak RSS is the maximum.

    python scripts/bench_compare.py [--models mobilenet_v2,resnet50,encoder] [--kinds int8,fp16]
                                    [--samples 8,64] [--repeat 3] [--polygraphy default|all|none]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import benchlib  # noqa: E402


def measure(cmd: List[str], *, cwd: Path = ROOT, log: Optional[Path] = None) -> Tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one process; its output goes to `log`."""
    got = benchlib.measure(cmd, cwd=cwd, env={"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "")})
    if log:
        log.write_text(got["output"])
    return got["wall"], got["rss_mib"], got["code"]


# ---- workers (run in their own process) ----------------------------------------------------------
def worker_floor(a: str, b: str, data: str) -> None:
    import numpy as np
    import onnxruntime as ort

    sessions = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]) for p in (a, b)]
    for path in sorted(glob.glob(os.path.join(data, "*.npz"))):
        with np.load(path) as f:
            feeds = {k: f[k] for k in f.files}
        for session in sessions:
            session.run(None, feeds)


def worker_qdq_debug(a: str, b: str, data: str, out: str) -> None:
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader
    from onnxruntime.quantization.qdq_loss_debug import (collect_activations, compute_activation_error,
                                                         create_activation_matching,
                                                         modify_model_output_intermediate_tensors)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.paths = iter(sorted(glob.glob(os.path.join(data, "*.npz"))))

        def get_next(self):  # type: ignore[no-untyped-def]
            path = next(self.paths, None)
            if path is None:
                return None
            with np.load(path) as f:
                return {k: f[k] for k in f.files}

    folder = Path(out).parent
    aug_a, aug_b = str(folder / "qdqdebug_a.onnx"), str(folder / "qdqdebug_b.onnx")
    modify_model_output_intermediate_tensors(a, aug_a)
    modify_model_output_intermediate_tensors(b, aug_b)
    float_acts = collect_activations(aug_a, Reader())
    qdq_acts = collect_activations(aug_b, Reader())
    matched = create_activation_matching(qdq_acts, float_acts)
    errors = compute_activation_error(matched)
    pairs = sum(1 for v in errors.values() if "xmodel_err" in v)
    Path(out).write_text(json.dumps({"pairs": pairs}))


# ---- tools --------------------------------------------------------------------------------------
def run_mi(a: Path, b: Path, data: Path, work: Path) -> Tuple[float, float, int, str]:
    out = work / "mi.json"
    wall, rss, code = measure([sys.executable, "-m", "inspector_cli", "compare", str(a), str(b), "--inputs", str(data),
                               "--layers", "all", "--json", str(out)], log=work / "mi.log")
    pairs, note = -1, f"exit {code}"
    if out.exists():
        layers = json.loads(out.read_text())["results"]["layers"]
        pairs = len(layers["layers"])
        aliases = sum(v for k, v in layers["skipped"].items() if k.startswith("same values as another"))
        note = f"B {layers['capture']['capture_b']}; " + ",".join(f"{k}={v}" for k, v in layers["pairing"].items())
        if aliases:
            note += f"; +{aliases} alias(es) (Flatten/Reshape of a compared tensor) not repeated"
    return wall, rss, pairs, note


def run_floor(a: Path, b: Path, data: Path, work: Path) -> Tuple[float, float, int, str]:
    wall, rss, code = measure([sys.executable, __file__, "--worker", "floor", str(a), str(b), str(data)])
    return wall, rss, 0, "" if code == 0 else f"exit {code}"


def run_qdq_debug(a: Path, b: Path, data: Path, work: Path) -> Tuple[float, float, int, str]:
    out = work / "qdqdebug.json"
    wall, rss, code = measure([sys.executable, __file__, "--worker", "qdq_debug", str(a), str(b), str(data), str(out)],
                              log=work / "qdqdebug.log")
    pairs = json.loads(out.read_text())["pairs"] if out.exists() else -1
    note = "" if code == 0 else f"exit {code}: " + _last_error(work / "qdqdebug.log")
    return wall, rss, pairs, note


def _last_error(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:60] if lines else ""


def worker_poly_inputs(data: str, out: str) -> None:
    """Polygraphy's --load-inputs file (its own JSON format) holding the benchmark's samples."""
    import numpy as np
    from polygraphy.json import save_json

    feeds = []
    for path in sorted(glob.glob(os.path.join(data, "*.npz"))):
        with np.load(path) as f:
            feeds.append({k: f[k] for k in f.files})
    save_json(feeds, out)


def run_polygraphy(a: Path, b: Path, data: Path, work: Path) -> Tuple[float, float, int, str]:
    inputs = work / "poly_inputs.json"
    if not inputs.exists():
        measure([sys.executable, __file__, "--worker", "poly_inputs", str(data), str(inputs)])
    poly = str(Path(sys.executable).parent / "polygraphy")
    saved = work / "poly_a_outputs.json"
    wall_a, rss_a, code_a = measure([poly, "run", str(a), "--onnxrt", "--onnx-outputs", "mark", "all",
                                     "--load-inputs", str(inputs), "--save-outputs", str(saved)], log=work / "poly_a.log")
    wall_b, rss_b, code_b = measure([poly, "run", str(b), "--onnxrt", "--onnx-outputs", "mark", "all",
                                     "--load-inputs", str(inputs), "--load-outputs", str(saved)], log=work / "poly_b.log")
    log = (work / "poly_b.log").read_text(errors="replace")
    compared = len(set(re.findall(r"Comparing Output: '([^']+)'", log)))
    passed = re.search(r"Passed: (\d+)/(\d+) iterations", log)
    note = f"save A + run B vs saved (exit {code_a}/{code_b})" + (f"; passed {passed.group(1)}/{passed.group(2)}" if passed else "")
    saved.unlink(missing_ok=True)
    return wall_a + wall_b, max(rss_a, rss_b), compared, note


TOOLS = {"floor": run_floor, "mi": run_mi, "polygraphy": run_polygraphy, "qdq_debug": run_qdq_debug}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs="+")
    parser.add_argument("--models", default="mobilenet_v2,resnet50,encoder")
    parser.add_argument("--kinds", default="int8,fp16,int8renamed",
                        help="int8renamed: the QDQ model with all names changed (8 samples, MobileNetV2 only unless "
                             "--samples/--models say otherwise)")
    parser.add_argument("--samples", default="8,64")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--polygraphy", choices=("default", "all", "none"), default="default")
    parser.add_argument("--qdq-debug", choices=("all", "none"), default="all")
    parser.add_argument("--out", default=str(ROOT / "bench-out"))
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        {"floor": worker_floor, "qdq_debug": worker_qdq_debug, "poly_inputs": worker_poly_inputs}[kind](*rest)
        return
    # This process stays small (no numpy, onnx or torch): a forked child's peak RSS starts at its
    # parent's size on Linux, so everything heavy happens in subprocesses.
    from bench_models import model_paths

    counts = tuple(int(n) for n in args.samples.split(","))
    names = tuple(args.models.split(","))
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_models.py"), args.out, ",".join(names),
                    ",".join(map(str, counts))], check=True)
    built = {name: model_paths(Path(args.out), name, counts) for name in names}
    rows: List[Dict[str, object]] = []
    for name, paths in built.items():
        for kind in args.kinds.split(","):
            for count in counts:
                work = Path(args.out) / "runs" / f"{name}_{kind}_{count}"
                work.mkdir(parents=True, exist_ok=True)
                if kind == "int8renamed" and (count != min(counts) or name != names[0]):
                    continue  # a pairing demonstration: one size is enough
                a, b, data = paths["fp32"], paths[kind], paths[f"data{count}"]
                tools = ["floor", "mi"]
                if kind.startswith("int8") and args.qdq_debug == "all" and count == min(counts):
                    tools.append("qdq_debug")  # it keeps every activation of every sample: 8x more at 64
                if args.polygraphy == "all" or (args.polygraphy == "default" and (name, kind, count) == ("mobilenet_v2", "int8", 8)):
                    tools.append("polygraphy")
                for tool in tools:
                    repeats = 1 if tool in ("polygraphy",) else args.repeat
                    results = [TOOLS[tool](a, b, data, work) for _ in range(repeats)]
                    wall = min(r[0] for r in results)
                    rows.append({"model": name, "pair": f"fp32 vs {kind}", "samples": count, "tool": tool, "wall": wall,
                                 "rss": max(r[1] for r in results), "pairs": results[-1][2], "note": results[-1][3]})
                    print(f"{name} {kind} {count} {tool}: {wall:.2f} s {rows[-1]['rss']:.0f} MiB", file=sys.stderr, flush=True)
    print_table(rows)


def print_table(rows: List[Dict[str, object]]) -> None:
    from tabulate import tabulate

    floors = {(r["model"], r["pair"], r["samples"]): r for r in rows if r["tool"] == "floor"}
    mi8 = {(r["model"], r["pair"]): r for r in rows if r["tool"] == "mi" and r["samples"] == min(
        x["samples"] for x in rows)}
    table = []
    for r in rows:
        floor = floors[(r["model"], r["pair"], r["samples"])]
        x_wall, x_rss = float(r["wall"]) / float(floor["wall"]), float(r["rss"]) / float(floor["rss"])
        target = ""
        if r["tool"] == "mi":
            base = mi8.get((r["model"], r["pair"]))
            flat = float(r["rss"]) / float(base["rss"]) if base else 1.0
            target = ("time " + ("met" if x_wall <= 1.5 else "MISSED") + ", RSS " + ("met" if x_rss <= 2.0 else "MISSED")
                      + (f", RSS vs 8 samples {flat:.2f}x " + ("met" if flat <= 1.10 else "MISSED") if base is not r else ""))
        table.append([r["model"], r["pair"], r["samples"], r["tool"], f"{float(r['wall']):.2f}", f"{x_wall:.2f}x",
                      f"{float(r['rss']):.0f}", f"{x_rss:.2f}x", r["pairs"] if r["tool"] != "floor" else "", target,
                      r["note"]])
    print(tabulate(table, headers=["model", "pair", "N", "tool", "wall s", "x floor", "peak RSS MiB", "x floor RSS",
                                   "pairs", "targets (mi: <=1.5x time, <=2x RSS, flat RSS)", "note"],
                   tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
