#!/usr/bin/env python3
"""Benchmark `mi compare --decode` (issue 30) on the zoo's KV-cache decoders: fp32 vs int8
(`dynamic`) of gpt2_optimum and llama_optimum, 100 greedy steps from the first zoo prompt, against a
plain loop that runs both onnxruntime sessions the same way (present fed to past, attention_mask
and position_ids derived, argmax of the last position's logits, each model its own tokens).

Both are whole processes (interpreter start, imports, session creation, the steps), timed through
benchlib's launcher, alternating A/B for --repeat rounds. Reported per model: wall and CPU seconds
of each (minimum), the minima's ratio and the median of the back-to-back pairs' ratios, peak RSS,
and the per-step cost of each: the slope between a --short (10-step) and the full run's minima.

    python scripts/bench_decode.py ZOO_DIR [--steps 100] [--short 10] [--repeat 5] [--models gpt2_optimum llama_optimum]
    python scripts/bench_decode.py --plain A.onnx B.onnx PROMPT.json STEPS     (the plain loop alone)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import benchlib  # noqa: E402

OUT = ROOT / "bench-out" / "decode"
BYTECODE = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(OUT / "pycache")}
"""Both processes import from bytecode caches, as an installed mi does (a checkout run with
PYTHONDONTWRITEBYTECODE=1 compiled ~90 modules each start: 0.2 s)."""


def plain(a: str, b: str, prompt_file: str, steps: int) -> int:
    """Greedy-decode A and B side by side in plain onnxruntime; print both token lists."""
    import numpy as np
    import onnxruntime as ort

    prompt = json.loads(Path(prompt_file).read_text())
    prompt = prompt[0] if prompt and isinstance(prompt[0], list) else prompt
    tokens: List[List[int]] = []
    sessions = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]) for p in (a, b)]
    states = []
    for s in sessions:
        dtype = np.float16 if any(i.type == "tensor(float16)" for i in s.get_inputs()) else np.float32
        cache = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), dtype) for i in s.get_inputs()
                 if i.name.startswith("past_key_values.")}
        states.append({"cache": cache, "fed": list(prompt), "past": 0, "outputs": [o.name for o in s.get_outputs()],
                       "inputs": {i.name for i in s.get_inputs()}})
        tokens.append([])
    for _ in range(steps):
        for s, st, toks in zip(sessions, states, tokens):
            fed, past = st["fed"], st["past"]
            feed = {"input_ids": np.array([fed], np.int64), **st["cache"]}
            if "attention_mask" in st["inputs"]:
                feed["attention_mask"] = np.ones((1, past + len(fed)), np.int64)
            if "position_ids" in st["inputs"]:
                feed["position_ids"] = np.arange(past, past + len(fed), dtype=np.int64)[None]
            result = dict(zip(st["outputs"], s.run(None, feed)))
            st["past"] = past + len(fed)
            st["cache"] = {k: result[k.replace("past_key_values.", "present.")] for k in st["cache"]}
            toks.append(int(np.argmax(result["logits"][0, -1])))
            st["fed"] = [toks[-1]]
    print(json.dumps(tokens))
    return 0


def _commands(folder: Path, prompt: Path, steps: int) -> Dict[str, List[object]]:
    a, b = folder / "fp32.onnx", folder / "dynamic.onnx"
    return {"mi": [sys.executable, "-m", "inspector_cli", "compare", a, b, "--decode", "--prompt", prompt,
                   "--steps", str(steps)],
            "plain": [sys.executable, str(Path(__file__).resolve()), "--plain", a, b, prompt, str(steps)]}


def bench(zoo: Path, model: str, steps: int, short: int, repeat: int) -> Dict[str, object]:
    """Whole-process figures at `steps`, and the per-step cost (the slope between `short` and `steps`
    steps: start-up, imports and session creation cancel out)."""
    folder = zoo / model
    prompt = OUT / f"{model}_prompt.json"
    prompt.write_text(json.dumps(json.loads((folder / "prompts.json").read_text())[0]))
    runs: Dict[str, List[Dict[str, object]]] = {"mi": [], "plain": [], "mi_short": [], "plain_short": []}
    for cmd in _commands(folder, prompt, short).values():  # warm-up: writes the bytecode caches
        benchlib.measure(cmd, env=BYTECODE)
    for _ in range(repeat):
        for suffix, count in (("", steps), ("_short", short)):
            for name, cmd in _commands(folder, prompt, count).items():
                m = benchlib.measure(cmd, env=BYTECODE)
                if m["code"] not in (0, 1):
                    raise SystemExit(f"{name} exited {m['code']}: {m['output'][-400:]}")
                runs[name + suffix].append(m)
    report: Dict[str, object] = {"model": model, "steps": steps, "repeat": repeat, "pair": "fp32 vs dynamic"}
    for key in ("wall", "cpu"):  # CPU time: less disturbed by the other processes on the cores
        for name in ("mi", "plain"):
            slope = (min(r[key] for r in runs[name]) - min(r[key] for r in runs[name + "_short"])) / (steps - short)
            report[f"{name}_{key}_ms_per_step"] = round(1000 * slope, 3)
        report[f"{key}_per_step_ratio"] = round(report[f"mi_{key}_ms_per_step"]  # type: ignore[operator]
                                                / report[f"plain_{key}_ms_per_step"], 3)
    for key in ("wall", "cpu"):
        mi_v, pl_v = [r[key] for r in runs["mi"]], [r[key] for r in runs["plain"]]
        report[f"mi_{key}_s"], report[f"plain_{key}_s"] = round(min(mi_v), 3), round(min(pl_v), 3)
        report[f"{key}_ratio_min"] = round(min(mi_v) / min(pl_v), 3)
        report[f"{key}_ratio_median_pairs"] = round(statistics.median(m / p for m, p in zip(mi_v, pl_v)), 3)
    report["mi_rss_mib"] = round(max(r["rss_mib"] for r in runs["mi"]), 1)
    report["plain_rss_mib"] = round(max(r["rss_mib"] for r in runs["plain"]), 1)
    return report


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--plain":
        return plain(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("zoo", type=Path)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--short", type=int, default=10, help="the short run for the per-step slope")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=["gpt2_optimum", "llama_optimum"])
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    reports = [bench(args.zoo.resolve(), m, args.steps, args.short, args.repeat) for m in args.models]
    for r in reports:
        print(json.dumps(r))
    (OUT / "results.json").write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
