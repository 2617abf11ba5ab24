#!/usr/bin/env python3
"""Memory benchmark on a model past 2 GB: wall and peak RSS of each command against plain onnxruntime.

The model is scripts/zoolib/bigmodel.py's Llama decoder (fp32, 2.43 GB of external data, and its
int4 MatMulNBits variant), built on demand and cached under --cache. Every command runs in a fresh
process (scripts/benchlib.measure: peak RSS from os.wait4 of the child). The floors, measured in the
same run: plain onnxruntime, session + one forward of the sample, in a fresh process, for the fp32
model alone (floor 1: validate, inspect, probe, nan-bisect) and for both models in one process
(floor 2: compare). For `compare --layers all --max-memory B`, the bound checked is
floor 2 + B + the documented overhead (docs/memory.md). Floor 3, for `compare --decode`: the KV-cache
decoder (bigmodel.ensure_decoder, optimum-exported) fp32 and int4 sessions in one process, each
decoding 16 greedy steps from the same prompt.

    python scripts/bench_memory.py                       # ~/.cache/model-inspector, about 10 minutes
    python scripts/bench_memory.py --only compare        # rows whose label contains 'compare'
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchlib import measure  # noqa: E402
from zoolib import bigmodel  # noqa: E402

OVERHEAD_MIB = 256
"""The fixed overhead of `compare --layers` over floor 2 + budget (docs/memory.md)."""

FLOOR_CODE = """
import sys, numpy as np, onnxruntime as ort
feed = dict(np.load(sys.argv[1], allow_pickle=False))
sessions = []  # kept: both models' sessions alive together, as compare holds them
for path in sys.argv[2:]:
    sessions.append(ort.InferenceSession(path, providers=['CPUExecutionProvider']))
    sessions[-1].run(None, feed)
"""

DECODE_STEPS = 16
"""Tokens `compare --decode` generates on the KV-cache decoder (after a prompt of bigmodel.SEQUENCE)."""

FLOOR_DECODE_CODE = """
import json, sys, numpy as np, onnxruntime as ort
prompt, steps = json.load(open(sys.argv[1]))[0], int(sys.argv[2])
for path in sys.argv[3:]:  # both sessions alive together, each decoding greedily, present fed to past
    globals().setdefault('sessions', []).append(ort.InferenceSession(path, providers=['CPUExecutionProvider']))
for s in sessions:
    inputs = {i.name: i for i in s.get_inputs()}
    outputs = [o.name for o in s.get_outputs()]
    past = {n: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for n, i in inputs.items() if n.startswith('past')}
    fed, done = list(prompt), 0
    for _ in range(steps):
        feed = {'input_ids': np.array([fed], np.int64), 'attention_mask': np.ones((1, done + len(fed)), np.int64),
                'position_ids': np.arange(done, done + len(fed), dtype=np.int64)[None], **past}
        result = dict(zip(outputs, s.run(None, {k: v for k, v in feed.items() if k in inputs})))
        done += len(fed)
        past = {n: result[n.replace('past_key_values', 'present')] for n in past}
        fed = [int(np.argmax(result['logits'][0, -1]))]
"""


def _prompt(folder: Path) -> Path:
    rng = np.random.default_rng(1)
    path = folder / "prompt.json"
    path.write_text(json.dumps([rng.integers(3, bigmodel.RECIPE["vocab_size"], bigmodel.SEQUENCE).tolist()]))
    return path


def _sample(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    path = folder / "sample.npz"
    np.savez(path, input_ids=rng.integers(0, bigmodel.RECIPE["vocab_size"], (1, bigmodel.SEQUENCE), dtype=np.int64),
             attention_mask=np.ones((1, bigmodel.SEQUENCE), dtype=np.int64))
    return path


def _commands(fp32: Path, int4: Path, sample: Path, work: Path) -> List[Tuple[str, int, Optional[int], List[str]]]:
    """(label, floor 1 or 2, budget in bytes or None, mi arguments)."""
    mi = [sys.executable, "-m", "inspector_cli"]
    inputs = ["--inputs", str(sample)]
    rows: List[Tuple[str, int, Optional[int], List[str]]] = [
        ("validate", 1, None, [*mi, "validate", str(fp32)]),
        ("inspect", 1, None, [*mi, "inspect", str(fp32)]),
        ("compare (outputs)", 2, None, [*mi, "compare", str(fp32), str(int4), *inputs]),
        ("compare --layers all (default budget)", 2, None, [*mi, "compare", str(fp32), str(int4), *inputs,
                                                            "--layers", "all"]),
    ]
    for text, size in (("1G", 1 << 30), ("256M", 256 << 20), ("64M", 64 << 20)):
        rows.append((f"compare --layers all --max-memory {text}", 2, size,
                     [*mi, "compare", str(fp32), str(int4), *inputs, "--layers", "all", "--max-memory", text]))
    rows += [
        ("probe --select all", 1, None, [*mi, "probe", str(fp32), *inputs, "--select", "all",
                                         "--json", str(work / "probe.json")]),
        ("nan-bisect", 1, None, [*mi, "nan-bisect", str(fp32), *inputs]),
    ]
    return rows


def _decoder(cache: Path) -> Optional[Dict[str, Path]]:
    """The KV-cache decoder pair (bigmodel.ensure_decoder), or None with the reason printed: it needs an
    optimum venv ($MI_ZOO_OPTIMUM_PYTHON, docs/zoo.md) the first time."""
    try:
        return bigmodel.ensure_decoder(cache)
    except Exception as exc:  # decoders.Unavailable, or the export failed: the other rows still run
        print(f"compare --decode: not measured ({exc})")
        return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "model-inspector")
    parser.add_argument("--only", help="run only the rows whose label contains this text")
    args = parser.parse_args(argv)
    paths = bigmodel.ensure(args.cache)
    fp32, int4 = paths["fp32"], paths["int4"]
    with tempfile.TemporaryDirectory(prefix="mi-bench-memory-") as tmp:
        work = Path(tmp)
        sample = _sample(work)
        floors: Dict[int, Dict[str, float]] = {
            1: measure([sys.executable, "-c", FLOOR_CODE, str(sample), str(fp32)]),
            2: measure([sys.executable, "-c", FLOOR_CODE, str(sample), str(fp32), str(int4)]),
        }
        for key, floor in floors.items():
            if floor["code"] != 0:
                print(f"floor {key} failed: {floor['output'][-400:]}", file=sys.stderr)
                return 1
        data_gib = fp32.with_name("model.onnx.data").stat().st_size / 2**30
        print(f"model: {fp32} ({data_gib:.2f} GiB external data) vs {int4}; sample 1x{bigmodel.SEQUENCE} tokens")
        print(f"floor 1 (onnxruntime, fp32 session + one forward): {floors[1]['wall']:.1f} s, "
              f"{floors[1]['rss_mib']:.0f} MiB peak RSS")
        print(f"floor 2 (both models, one process):                 {floors[2]['wall']:.1f} s, "
              f"{floors[2]['rss_mib']:.0f} MiB peak RSS")
        decoder = _decoder(args.cache)
        if decoder is not None:
            prompt = _prompt(work)
            floors[3] = measure([sys.executable, "-c", FLOOR_DECODE_CODE, str(prompt), str(DECODE_STEPS),
                                 str(decoder["fp32"]), str(decoder["int4"])])
            if floors[3]["code"] != 0:
                print(f"floor 3 failed: {floors[3]['output'][-400:]}", file=sys.stderr)
                return 1
            print(f"floor 3 (KV-cache decoder fp32 + int4, one process, {DECODE_STEPS} greedy steps each): "
                  f"{floors[3]['wall']:.1f} s, {floors[3]['rss_mib']:.0f} MiB peak RSS")
        print()
        print("| command | floor | exit | wall s | wall x floor | peak RSS MiB | RSS x floor | bound MiB |")
        print("|---|---|---|---|---|---|---|---|")
        rows = _commands(fp32, int4, sample, work)
        if decoder is not None:
            rows.append(("compare --decode (KV-cache decoder)", 3, None,
                         [sys.executable, "-m", "inspector_cli", "compare", str(decoder["fp32"]), str(decoder["int4"]),
                          "--decode", "--prompt", str(prompt), "--steps", str(DECODE_STEPS)]))
        for label, key, budget, cmd in rows:
            if args.only and args.only not in label:
                continue
            got = measure(cmd)
            floor = floors[key]
            bound = "" if budget is None else f"{floor['rss_mib'] + budget / 2**20 + OVERHEAD_MIB:.0f}"
            print(f"| {label} | {key} | {got['code']} | {got['wall']:.1f} | {got['wall'] / floor['wall']:.2f}x "
                  f"| {got['rss_mib']:.0f} | {got['rss_mib'] / floor['rss_mib']:.2f}x | {bound} |", flush=True)
            if got["code"] not in (0, 1):
                print(f"    {got['output'].strip().splitlines()[-1:] or ['(no output)']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
