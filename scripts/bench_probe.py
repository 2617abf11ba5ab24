#!/usr/bin/env python3
"""Benchmark of `mi probe --select all` on a ResNet-50 against plain inference, side by side.

    python scripts/bench_probe.py [OUT_DIR] [--repeat N]

Builds torchvision's resnet50 (random init, exported with torch.onnx.export(dynamo=False)) and 32
random samples, then runs each case in its own subprocess (whole-process wall time; peak RSS from
wait4's rusage):

- plain:   onnxruntime inference of the samples (session + runs), nothing else;
- capture: `core.capture.run_capture` exposing every tensor, with a no-op consumer (the floor of
           any probe that copies tensors out of onnxruntime);
- probe:   `mi probe MODEL --select all` (statistics of every tensor, JSON written), with rank-exact
           percentiles (default) and with `--hist-sample 16384` (approximate percentiles).

Targets: probe (32 samples) <= 2x plain (32 samples); probe's peak RSS for 32 samples within 10%
of that for 4.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import benchlib  # noqa: E402

PLAIN = """
import sys, glob, numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
for f in sorted(glob.glob(sys.argv[2] + "/*.npz")):
    with np.load(f) as d:
        s.run(None, {"input": d["input"]})
"""

CAPTURE = """
import sys
from inspector_cli.core.capture import CaptureTarget, estimate_sizes, plan_capture, run_capture
from inspector_cli.core.graph import load_model
from inspector_cli.core.inputs import discover_samples
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.core.select import select_tensors
g = load_model(sys.argv[1])
names = select_tensors(g, ["all"])
samples = discover_samples([sys.argv[2]], g.inputs)
plan = plan_capture(estimate_sizes(g, names, {"input": (1, 3, 224, 224)}))
target = CaptureTarget(g, RuntimeConfig(), [[names[i] for i in c] for c in plan.chunks])
run_capture([target], samples, lambda sid, c, outs: None)
"""


def build(out: Path) -> Path:
    model = out / "resnet50.onnx"
    if not model.exists():
        import torch
        import torchvision

        net = torchvision.models.resnet50(weights=None).eval()
        torch.onnx.export(net, torch.randn(1, 3, 224, 224), str(model), dynamo=False, input_names=["input"],
                          output_names=["logits"], opset_version=17)
    import numpy as np

    for count in (4, 32):
        folder = out / f"data{count}"
        if not folder.is_dir():
            folder.mkdir(parents=True)
            rng = np.random.default_rng(0)
            for i in range(count):
                np.savez(folder / f"s{i:03d}.npz", input=rng.standard_normal((1, 3, 224, 224), dtype=np.float32))
    return model


def measure(argv: list) -> tuple:
    """(wall seconds, peak RSS MiB, CPU seconds) of one subprocess."""
    got = benchlib.measure(argv)
    if got["code"] not in (0, 1):
        raise SystemExit(f"failed: {' '.join(map(str, argv))}\n{got['output'][-2000:]}")
    return got["wall"], got["rss_mib"], got["cpu"]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 2
    if "--repeat" in sys.argv:
        args = [a for a in args if a != str(repeat)]
    out = Path(args[0] if args else "bench-out/probe")
    out.mkdir(parents=True, exist_ok=True)
    model = build(out)
    py = sys.executable
    cases = [
        ("plain inference", 32, [py, "-c", PLAIN, model, out / "data32"]),
        ("capture every tensor, no statistics", 32, [py, "-c", CAPTURE, model, out / "data32"]),
        ("mi probe --select all", 32, [py, "-m", "inspector_cli", "-q", "probe", model, "--inputs", out / "data32",
                                       "--select", "all", "--no-history", "--json", out / "probe32.json"]),
        ("mi probe --select all --hist-sample 16384", 32,
         [py, "-m", "inspector_cli", "-q", "probe", model, "--inputs", out / "data32", "--select", "all",
          "--hist-sample", "16384", "--no-history", "--json", out / "probe32s.json"]),
        ("plain inference", 4, [py, "-c", PLAIN, model, out / "data4"]),
        ("mi probe --select all", 4, [py, "-m", "inspector_cli", "-q", "probe", model, "--inputs", out / "data4",
                                      "--select", "all", "--no-history", "--json", out / "probe4.json"]),
    ]
    results = {}
    for _ in range(repeat):  # interleaved, best of `repeat`: the machine is shared
        for label, n, argv in cases:
            wall, rss, cpu = measure([str(a) for a in argv])
            best = results.get((label, n))
            results[(label, n)] = (min(wall, best[0]), max(rss, best[1]), min(cpu, best[2])) if best else (wall, rss, cpu)
    plain32 = results[("plain inference", 32)][0]
    probe_rss4 = results[("mi probe --select all", 4)][1]
    print(f"ResNet-50 (torchvision, random init), batch 1, {os.cpu_count()} CPUs, best of {repeat}")
    cpu32 = results[("plain inference", 32)][2]
    print(f"{'case':42s} {'samples':>7s} {'wall s':>7s} {'x plain':>7s} {'CPU s':>6s} {'x plain':>7s} {'peak RSS MiB':>12s}")
    for (label, n), (wall, rss, cpu) in results.items():
        print(f"{label:42s} {n:7d} {wall:7.2f} {wall / plain32:7.2f} {cpu:6.2f} {cpu / cpu32:7.2f} {rss:12.0f}")
    probe32 = results[("mi probe --select all", 32)]
    capture32 = results[("capture every tensor, no statistics", 32)][0]
    print(f"statistics cost: {probe32[0] - capture32:.2f} s over 32 samples "
          f"({(probe32[0] - capture32) / 32 * 1e3:.0f} ms per sample)")
    ok_time = probe32[0] <= 2 * plain32
    ok_rss = probe32[1] <= 1.10 * probe_rss4
    print(f"target wall <= 2x plain: {probe32[0] / plain32:.2f}x -> {'met' if ok_time else 'MISSED'}")
    print(f"target RSS(32) within 10% of RSS(4): {probe32[1] / probe_rss4 - 1:+.1%} -> {'met' if ok_rss else 'MISSED'}")


if __name__ == "__main__":
    main()
