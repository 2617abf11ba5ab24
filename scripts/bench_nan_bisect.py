#!/usr/bin/env python
"""Benchmark of `mi nan-bisect` against plain inference and Polygraphy's expose-everything.

Part 1: torchvision ResNet-50 (random init, exported with torch.onnx.export(dynamo=False)), one
weight of a conv near the end set to Inf, one sample. Side by side, each in its own process:

  floor        plain onnxruntime inference of the sample
  mi budget    mi nan-bisect with --max-memory a quarter of what exposing every tensor needs
  mi           mi nan-bisect, no budget (exposing everything fits: one run)
  polygraphy   polygraphy run --onnxrt --onnx-outputs mark all --validate

Wall time and peak RSS (os.wait4) per process, and the origin each finds. Targets: mi under the
budget locates the origin in <= 3x the floor's wall time, with <= 1.5x its peak RSS, and finds the
same origin as exposing everything.

Part 2: 1,000 samples of a small CNN (5% of them fail) with --workers 1 and --workers 2.
Target: --workers 2 has >= 1.7x the throughput of --workers 1; both write the same JSONL.

Usage: python scripts/bench_nan_bisect.py [--workdir DIR] [--repeat 3] [--samples 1000]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import benchlib  # noqa: E402
from benchlib import steady_rate  # noqa: E402


def run_measured(cmd: List[str], cwd: Path = ROOT, watch: Optional[Path] = None) -> Tuple[float, float, int, str]:
    """(wall seconds, peak RSS MiB, exit code, output or JSONL progress) of one process."""
    got = benchlib.measure(cmd, cwd=cwd, watch=watch)
    return got["wall"], got["rss_mib"], got["code"], (got["seen"] if watch is not None else got["output"])


EXPORT = """
import sys, pathlib, numpy as np, onnx, torch, torchvision
from onnx import numpy_helper
folder = pathlib.Path(sys.argv[1])
torch.manual_seed(0)
net = torchvision.models.resnet50(weights=None).eval()
clean = folder / "resnet50.onnx"
torch.onnx.export(net, torch.randn(1, 3, 224, 224), str(clean), dynamo=False, opset_version=17,
                  input_names=["input"], output_names=["logits"])
proto = onnx.load(str(clean))
victim = [n for n in proto.graph.node if n.op_type == "Conv"][-3]
for i, tensor in enumerate(proto.graph.initializer):
    if tensor.name == victim.input[1]:
        value = numpy_helper.to_array(tensor).copy()
        value[0, 0, 0, 0] = np.inf
        proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(value, tensor.name))
onnx.save(proto, str(folder / "resnet50_inf.onnx"))
clean.unlink()
(folder / "victim.txt").write_text(victim.name)
"""

def build_resnet50(folder: Path) -> Tuple[Path, Path, Path, str]:
    """ResNet-50 with one Inf weight in layer4's last block; a sample (.npz and Polygraphy JSON)."""
    model, sample, poly_inputs = folder / "resnet50_inf.onnx", folder / "sample.npz", folder / "inputs.json"
    if not model.exists():
        # torch runs in its own process: this one stays small (it launches the measured processes)
        subprocess.run([sys.executable, "-c", EXPORT, str(folder)], check=True)
    if not sample.exists():
        from polygraphy.json import save_json

        x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        np.savez(sample, input=x)
        save_json([{"input": x}], str(poly_inputs))
    return model, sample, poly_inputs, (folder / "victim.txt").read_text()


FLOOR = ("import sys, numpy as np, onnxruntime as ort\n"
         "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
         "x = np.load(sys.argv[2])['input']\n"
         "y = s.run(None, {'input': x})[0]\n"
         "print('nonfinite outputs:', int((~np.isfinite(y)).sum()))\n")


def producer_of(model: Path, tensor: str) -> str:
    from inspector_cli.core.graph import load_model

    graph = load_model(model)
    node = graph.producer.get(tensor)
    return node.name if node else f"? ({tensor})"


def polygraphy_origin(model: Path, output: str) -> str:
    marker = "FAILED | Errors detected in output: "
    for line in output.splitlines():
        if marker in line:
            return producer_of(model, line.split(marker, 1)[1].strip())
    return "(none)"


def mi_origin(document: Path) -> Tuple[str, Dict]:
    results = json.loads(document.read_text())["results"]
    records = results.get("records") or []
    origin = records[0]["origin"]["node"] if records and records[0].get("origin") else "(none)"
    return origin, results


def part_one(folder: Path, repeat: int) -> bool:
    model, sample, poly_inputs, victim = build_resnet50(folder)
    mi = [sys.executable, "-m", "inspector_cli", "-q", "nan-bisect", str(model), "--inputs", str(sample)]
    out_free, out_budget = folder / "mi_free.json", folder / "mi_budget.json"
    # what exposing every tensor needs, from mi's own estimate
    run_measured(mi + ["--json", str(out_free)])
    all_bytes = mi_origin(out_free)[1]["plan"]["all_exposed_bytes"]
    budget = all_bytes // 4
    approaches = [
        ("floor: plain inference", [sys.executable, "-c", FLOOR, str(model), str(sample)], None),
        (f"mi nan-bisect --max-memory {budget >> 20}M", mi + ["--max-memory", str(budget), "--json", str(out_budget)],
         out_budget),
        ("mi nan-bisect (unbudgeted)", mi + ["--json", str(out_free)], out_free),
        ("polygraphy run --onnx-outputs mark all --validate",
         [shutil.which("polygraphy") or str(Path(sys.executable).parent / "polygraphy"), "run", str(model), "--onnxrt", "--onnx-outputs", "mark", "all",
          "--validate", "--load-inputs", str(poly_inputs)], None),
    ]
    walls: List[List[float]] = [[] for _ in approaches]
    rsss: List[List[float]] = [[] for _ in approaches]
    found: List[Tuple[str, str]] = [("", "")] * len(approaches)
    for round_index in range(repeat):  # rounds: every approach once, so each ratio compares like load
        order = list(range(len(approaches)))
        for i in (order if round_index % 2 == 0 else reversed(order)):
            label, cmd, document = approaches[i]
            wall, rss, code, output = run_measured(cmd)
            walls[i].append(wall)
            rsss[i].append(rss)
            if document is not None:
                origin, results = mi_origin(document)
                record = results["records"][0] if results.get("records") else {}
                found[i] = (origin, f"{record.get('strategy', '?')}, {record.get('runs', '?')} run(s)")
            elif "polygraphy" in label:
                found[i] = (polygraphy_origin(model, output), "")
            else:
                found[i] = ("-", output.strip().splitlines()[-1] if output.strip() else "")

    def vs_floor(values: List[List[float]], i: int) -> float:
        return statistics.median(v / f for v, f in zip(values[i], values[0]))

    rows = [(label, statistics.median(walls[i]), vs_floor(walls, i), statistics.median(rsss[i]), vs_floor(rsss, i),
             *found[i]) for i, (label, _, _) in enumerate(approaches)]
    truth = rows[3][5]
    print(f"\nResNet-50 ({model.stat().st_size >> 20} MiB), Inf weight in {victim}; exposing every tensor needs "
          f"{all_bytes / 2**20:.0f} MiB; {repeat} interleaved round(s): medians, and medians of per-round ratios\n")
    header = (f"| {'approach':52} | {'wall s':>7} | {'x floor':>7} | {'peak RSS MiB':>12} | {'x floor':>7} "
              f"| origin found | notes |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for label, wall, wall_x, rss, rss_x, origin, extra in rows:
        print(f"| {label:52} | {wall:7.2f} | {wall_x:7.2f} | {rss:12.0f} | {rss_x:7.2f} | {origin} | {extra} |")
    budget_row, free_row = rows[1], rows[2]
    checks = [
        ("budgeted mi locates in <= 3x the floor's wall time", budget_row[2] <= 3, f"{budget_row[2]:.2f}x"),
        ("budgeted mi peak RSS <= 1.5x the floor's", budget_row[4] <= 1.5, f"{budget_row[4]:.2f}x"),
        ("same origin as exposing everything (polygraphy)", budget_row[5] == truth == free_row[5],
         f"{budget_row[5]} / {free_row[5]} / {truth}"),
        ("that origin is the conv with the Inf weight", truth == victim, victim),
    ]
    print()
    ok = True
    for text, passed, value in checks:
        ok &= passed
        print(f"  [{'MET' if passed else 'MISSED'}] {text}: {value}")
    return ok


def build_small(folder: Path, count: int) -> Tuple[Path, Path]:
    """A small ResNet-style CNN (96x96, 32-64-128 channels; about 5 ms per sample on one core) plus a
    check Sqrt(min(input) + 3): NaN when a pixel is below -3."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from inspector_cli.testing.models import build_cnn

    model_path, data = folder / "small_cnn96.onnx", folder / f"samples96_{count}"
    if not model_path.exists():
        model = build_cnn(seed=1, channels=(32, 64, 128), blocks=1, image=96, softmax=True)
        graph = model.graph
        graph.initializer.append(numpy_helper.from_array(np.array(3.0, np.float32), "three"))
        graph.node.extend([
            helper.make_node("ReduceMin", ["input"], ["in_min"], name="input_min", keepdims=0),
            helper.make_node("Add", ["in_min", "three"], ["shifted"], name="shift"),
            helper.make_node("Sqrt", ["shifted"], ["check"], name="check_sqrt")])
        graph.output.append(helper.make_tensor_value_info("check", TensorProto.FLOAT, []))
        onnx.save(model, str(model_path))
    if not data.exists():
        data.mkdir()
        rng = np.random.default_rng(2)
        for i in range(count):
            x = rng.normal(0, 0.4, size=(1, 3, 96, 96)).astype(np.float32)
            if i % 20 == 7:
                x[0, 1, 5, 5] = -5.0
            np.savez(data / f"x_{i:05d}.npz", input=x)
    return model_path, data


CONFIGS = [  # (workers, intra-op threads per process; None = mi's default: cores / workers)
    (0, None), (1, None), (2, None), (1, 1), (2, 1)]


def part_two(folder: Path, count: int, repeat: int) -> bool:
    """Configurations interleaved round by round, so that each round's ratios compare runs made
    under the same load from whatever else shares the machine; medians over the rounds."""
    model, data = build_small(folder, count)
    walls: Dict[Tuple[int, Optional[int]], List[float]] = {c: [] for c in CONFIGS}
    rates: Dict[Tuple[int, Optional[int]], List[float]] = {c: [] for c in CONFIGS}
    logs: Dict[Tuple[int, Optional[int]], bytes] = {}
    results: Dict[Tuple[int, Optional[int]], Dict] = {}
    for round_index in range(repeat):
        order = CONFIGS if round_index % 2 == 0 else list(reversed(CONFIGS))
        for workers, threads in order:
            extra = ["--intra-op-threads", str(threads)] if threads else []
            jsonl = folder / f"w{workers}.jsonl"
            jsonl.unlink(missing_ok=True)
            wall, rss, code, seen = run_measured([sys.executable, "-m", "inspector_cli", "-q", "nan-bisect",
                                                  str(model), "--inputs", str(data), "--workers", str(workers),
                                                  *extra, "--jsonl", str(jsonl), "--json", str(folder / "batch.json")],
                                                 watch=jsonl)
            assert code == 1, f"exit {code}"
            walls[(workers, threads)].append(wall)
            rates[(workers, threads)].append(steady_rate(seen, count))  # type: ignore[arg-type]
            logs[(workers, threads)] = jsonl.read_bytes()
            results[(workers, threads)] = json.loads((folder / "batch.json").read_text())["results"]
    cores = os.cpu_count()
    first = results[CONFIGS[0]]
    print(f"\n{count} samples of a small CNN (96x96, {model.stat().st_size >> 10} KiB), {first['nonfinite']} failing; "
          f"{cores} cores; {repeat} interleaved round(s), medians\n")
    print("| workers | intra-op threads each | wall s (whole process) | samples/s (whole) "
          "| samples/s (steady, 10-90%) | failing | origin group |")
    print("|---|---|---|---|---|---|---|")
    for workers, threads in CONFIGS:
        res = results[(workers, threads)]
        wall, rate = statistics.median(walls[(workers, threads)]), statistics.median(rates[(workers, threads)])
        label = "0 (in-process)" if workers == 0 else str(workers)
        default = f"default ({max(1, (cores or 1) // workers)})" if workers else "default (onnxruntime)"
        group = res["groups"][0]
        print(f"| {label} | {threads or default} | {wall:.2f} | {count / wall:.0f} | {rate:.0f} | "
              f"{res['nonfinite']} | {group['node']}: {group['samples']} |")

    def ratio(a: Tuple[int, Optional[int]], b: Tuple[int, Optional[int]], steady: bool) -> float:
        """Median over rounds of (throughput of b) / (throughput of a)."""
        if steady:
            return statistics.median(rb / ra for ra, rb in zip(rates[a], rates[b]))
        return statistics.median(wa / wb for wa, wb in zip(walls[a], walls[b]))

    whole, steady = ratio((1, 1), (2, 1), False), ratio((1, 1), (2, 1), True)
    same = len(set(logs.values())) == 1
    print()
    print("  --workers 2 vs --workers 1, one intra-op thread per worker (like for like), median of per-round ratios:")
    print(f"  [{'MET' if whole >= 1.7 else 'MISSED'}] throughput >= 1.7x, whole process: {whole:.2f}x")
    print(f"  [{'MET' if steady >= 1.7 else 'MISSED'}] throughput >= 1.7x, steady state: {steady:.2f}x")
    print(f"  (default threads, where one worker already has every core: whole "
          f"{ratio((1, None), (2, None), False):.2f}x, steady {ratio((1, None), (2, None), True):.2f}x)")
    print(f"  [{'MET' if same else 'MISSED'}] identical JSONL for every configuration")
    return whole >= 1.7 and same


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "mi-bench-nan-bisect")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--skip", choices=["resnet", "batch"], action="append", default=[])
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    ok = True
    if "resnet" not in args.skip:
        ok &= part_one(args.workdir, args.repeat)
    if "batch" not in args.skip:
        ok &= part_two(args.workdir, args.samples, args.repeat)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
