#!/usr/bin/env python3
"""Benchmark sequence mode (issue 19) on a small streaming model: a VAD-like step (512-sample audio
chunk -> two dense layers -> GRU(128) with state I/O -> speech probability), fp32 vs int8
(onnxruntime quantize_dynamic), exported from torch.

  overhead   per-step time of `run_sequence` (outputs and state compared every step, decision,
             gates, running summaries) over a plain Python loop that runs both onnxruntime sessions
             step by step and feeds the states back; 1,000 steps, steady state (session creation
             excluded from both; mi's reading of the steps from the .npz included), --repeat
             alternating runs. Target <= 1.15x. Reported: the minima's ratio, the median of the
             back-to-back pairs' ratios (wall time), and the same two for CPU time (this process and
             onnxruntime's threads: less sensitive to other processes competing for the cores).
  one-model  (--one-model) the same for `mi nan-bisect --sequence`'s scan (one model, every
             output checked for NaN/Inf) and `mi probe --sequence --select op:GRU` (statistics of
             the GRU's outputs each step), against a plain loop of the one model.
  rss        peak RSS of a whole process running the comparison over 100 and 10,000 steps read
             from one .npz with a time axis, with the JSONL journal on (os.wait4 through
             benchlib's launcher). Target: within 5%.

    python scripts/bench_sequence.py [--steps 1000] [--repeat 5] [--rss-steps 100,10000] [--one-model]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402

OUT = ROOT / "bench-out" / "sequence"
CHUNK, HIDDEN = 512, 128


def build(folder: Path, steps: int) -> Dict[str, Path]:
    """The fp32 model, its int8 version and an .npz of `steps` audio chunks (cached)."""
    folder.mkdir(parents=True, exist_ok=True)
    fp32, int8, data = folder / "vad.onnx", folder / "vad_int8.onnx", folder / f"chunks_{steps}.npz"
    if not fp32.exists():
        import torch

        torch.manual_seed(0)

        class Vad(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.front = torch.nn.Sequential(torch.nn.Linear(CHUNK, 256), torch.nn.ReLU(),
                                                 torch.nn.Linear(256, HIDDEN), torch.nn.ReLU())
                self.gru = torch.nn.GRU(HIDDEN, HIDDEN, batch_first=True)
                self.head = torch.nn.Linear(HIDDEN, 1)

            def forward(self, x, state):  # type: ignore[no-untyped-def]
                y, state_n = self.gru(self.front(x)[:, None], state)
                return torch.sigmoid(self.head(y[:, -1])), state_n

        torch.onnx.export(Vad().eval(), (torch.randn(1, CHUNK), torch.zeros(1, 1, HIDDEN)), str(fp32),
                          input_names=["x", "state"], output_names=["prob", "stateN"], opset_version=17, dynamo=False)
    if not int8.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    if not data.exists():
        rng = np.random.default_rng(1)
        np.savez(data, x=(rng.standard_normal((steps, 1, CHUNK)) * 0.3).astype(np.float32))
    return {"fp32": fp32, "int8": int8, "data": data}


def plain_loop(paths: Dict[str, Path], chunks: np.ndarray, spinning: bool, models: Tuple[str, ...] = ("fp32", "int8")
               ) -> Tuple[float, float]:
    """(wall, CPU) seconds per step of the bare loop: the sessions of `models`, states fed back,
    nothing else. `spinning` False uses the session options mi uses for sequences (idle threads do
    not spin)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sessions = [ort.InferenceSession(str(paths[k]), options, providers=["CPUExecutionProvider"]) for k in models]
    states = [np.zeros((1, 1, HIDDEN), np.float32) for _ in sessions]
    start, cpu = time.perf_counter(), time.process_time()
    for x in chunks:
        for i, session in enumerate(sessions):
            _, states[i] = session.run(["prob", "stateN"], {"x": x, "state": states[i]})
    return (time.perf_counter() - start) / len(chunks), (time.process_time() - cpu) / len(chunks)


def mi_loop(paths: Dict[str, Path], steps: int) -> Tuple[float, float]:
    """(wall, CPU) seconds per step of a whole run_sequence call (the sessions opened before)."""
    from inspector_cli.sequence import SequenceConfig, open_stepped, run_sequence

    config = SequenceConfig(steps=steps)
    a = open_stepped(paths["fp32"], (), config.runtime, "A")
    b = open_stepped(paths["int8"], (), config.runtime, "B")
    start, cpu = time.perf_counter(), time.process_time()
    result = run_sequence(a, b, paths["data"], config)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    assert result.steps == steps, result.steps
    return wall / steps, used / steps


def scan_loop(paths: Dict[str, Path], steps: int) -> Tuple[float, float]:
    """(wall, CPU) seconds per step of the one-model scan `mi nan-bisect --sequence` runs first
    (run_sequence with no model B: every output checked for NaN/Inf each step; the session opened before)."""
    from inspector_cli.sequence import SequenceConfig, open_stepped, run_sequence

    config = SequenceConfig(steps=steps)
    a = open_stepped(paths["fp32"], (), config.runtime, "A")
    start, cpu = time.perf_counter(), time.process_time()
    result = run_sequence(a, None, paths["data"], config)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    assert result.steps == steps and result.nonfinite is None, result.steps
    return wall / steps, used / steps


def probe_loop(paths: Dict[str, Path], steps: int) -> Tuple[float, float]:
    """(wall, CPU) seconds per step of `mi probe --sequence --select 'op:GRU'` (the workflow, so
    the probe's own session, opened inside, is included: its share falls with the steps)."""
    from inspector_cli.probe.config import ProbeConfig
    from inspector_cli.sequence import SequenceConfig
    from inspector_cli.workflows.sequence import probe_sequence

    start, cpu = time.perf_counter(), time.process_time()
    probe_sequence(str(paths["fp32"]), paths["data"], SequenceConfig(steps=steps), ProbeConfig(select=("op:GRU",)),
                   per_step=False)
    return (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps


def ratios(report: Dict[str, object], name: str, runs: list, plain: list) -> None:
    """The row `name`: minimum per step and paired-median ratio to `plain`, wall and CPU."""
    for index, clock in enumerate(("wall", "cpu")):
        m, q = [run[index] for run in runs], [run[index] for run in plain]
        report[f"{clock}_{name}_us_per_step"] = round(min(m) * 1e6, 1)
        report[f"{clock}_{name}_ratio_paired_median"] = round(float(np.median([x / y for x, y in zip(m, q)])), 3)


RSS_SCRIPT = """
import sys
from pathlib import Path
from inspector_cli.sequence import SequenceConfig, run_sequence
steps = int(sys.argv[3])
result = run_sequence(sys.argv[1], sys.argv[2], sys.argv[4], SequenceConfig(steps=steps, journal=Path(sys.argv[5])))
assert result.steps == steps, result.steps
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rss-steps", default="100,10000")
    parser.add_argument("--one-model", action="store_true",
                        help="also time nan-bisect --sequence's scan and probe --sequence against a one-model loop")
    args = parser.parse_args()
    rss_steps = [int(s) for s in args.rss_steps.split(",")]
    paths = build(OUT, max(rss_steps + [args.steps]))
    with np.load(paths["data"]) as archive:
        chunks = archive["x"][: args.steps].copy()
    plain, quiet, mi, one, scan, probe = [], [], [], [], [], []
    mi_loop(paths, 20)  # warm the imports and the allocator once
    if args.one_model:
        probe_loop(paths, 20)
    for _ in range(args.repeat):
        plain.append(plain_loop(paths, chunks, spinning=True))
        quiet.append(plain_loop(paths, chunks, spinning=False))
        mi.append(mi_loop(paths, args.steps))
        if args.one_model:
            one.append(plain_loop(paths, chunks, spinning=False, models=("fp32",)))
            scan.append(scan_loop(paths, args.steps))
            probe.append(probe_loop(paths, args.steps))
    report: Dict[str, object] = {"steps": args.steps, "repeats": args.repeat}
    for index, clock in enumerate(("wall", "cpu")):
        p, q, m = ([run[index] for run in runs] for runs in (plain, quiet, mi))
        report.update({
            f"{clock}_plain_default_us_per_step": round(min(p) * 1e6, 1),
            f"{clock}_plain_same_options_us_per_step": round(min(q) * 1e6, 1),
            f"{clock}_mi_us_per_step": round(min(m) * 1e6, 1),
            f"{clock}_ratio_of_minima": round(min(m) / min(q), 3),
            # Each repeat runs the plain loop and mi back to back: on a loaded machine the ratio of
            # one pair is steadier than the ratio of two minima taken at different moments.
            f"{clock}_ratio_paired_median": round(float(np.median([x / y for x, y in zip(m, q)])), 3)})
    report["target_ratio"] = 1.15
    if args.one_model:  # against the plain loop of the one model (same session options)
        for index, clock in enumerate(("wall", "cpu")):
            report[f"{clock}_plain_one_model_us_per_step"] = round(min(run[index] for run in one) * 1e6, 1)
        ratios(report, "nan_bisect_scan", scan, one)
        ratios(report, "probe_gru", probe, one)
    rss = {}
    for steps in rss_steps:
        journal = OUT / f"journal_{steps}.jsonl"
        run = benchlib.measure([sys.executable, "-c", RSS_SCRIPT, str(paths["fp32"]), str(paths["int8"]), str(steps),
                                str(paths["data"]), str(journal)])
        if run["code"] != 0:
            raise SystemExit(run["output"])
        rss[steps] = run["rss_mib"]
        report[f"rss_mib_{steps}"] = round(run["rss_mib"], 1)
        report[f"wall_s_{steps}"] = round(run["wall"], 2)
    low, high = rss[rss_steps[0]], rss[rss_steps[-1]]
    report["rss_growth"] = round(high / low - 1, 4)
    report["target_rss_growth"] = 0.05
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
