#!/usr/bin/env python3
"""Dump the `compare --layers all` pairing of zoo models, to check that a speed change keeps it identical.

    .venv/bin/python scripts/pairing_dump.py OUT.json [ZOO_DIR] [--models bert,resnet] [--extra A.onnx B.onnx]
    diff <(python -m json.tool before.json) <(python -m json.tool after.json)

For every model of the zoo (default ~/.cache/mi-zoo/zoo-full, read only) the fp32 model is paired with
each of its variants exactly as `compare --layers all` plans it (`plan_comparison` + `layer_pairs`):
every pair with its views, method, confidence and evidence, every unpaired tensor with its reason, the
skipped counts, and both semantic graphs (canonical tensors, chains, quantisation) and tensor types.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Dict, List


def _sem(sem: object) -> Dict[str, object]:
    return {
        "canon": sorted(sem.canon.items()),  # type: ignore[attr-defined]
        "kinds": sorted((k, sorted(v)) for k, v in sem.kinds.items()),  # type: ignore[attr-defined]
        "static": sorted(sem.static),  # type: ignore[attr-defined]
        "quant_of": sorted((k, dataclasses.astuple(v)) for k, v in sem.quant_of.items()),  # type: ignore[attr-defined]
        "chains": [[c.index, [n.name for n in c.nodes], c.tensors, list(c.inputs), list(c.extra_outputs), c.kind]
                   for c in sem.chains],  # type: ignore[attr-defined]
        "types": sorted((k, v.elem_type, list(v.shape) if v.shape is not None else None)
                        for k, v in sem.graph.all_tensor_info().items()),  # type: ignore[attr-defined]
    }


def dump_pair(a: str, b: str, data: str = "") -> Dict[str, object]:
    """The planned pairing of A and B as plain JSON-able data."""
    from inspector_cli.compare.config import CompareConfig, LayerConfig
    from inspector_cli.compare.layers import layer_pairs
    from inspector_cli.compare.plan import plan_comparison

    plan = plan_comparison(a, b, CompareConfig(layers=LayerConfig(), inputs=(data,) if data else ()))
    sa, sb, matching, pairs, skipped = layer_pairs(plan, LayerConfig(), ())
    return {
        "pairs": [dataclasses.asdict(p) for p in matching.pairs],
        "kept": [p.a for p in pairs],
        "unpaired_a": [dataclasses.astuple(u) for u in matching.unpaired_a],
        "unpaired_b": [dataclasses.astuple(u) for u in matching.unpaired_b],
        "notes": matching.notes,
        "skipped": sorted(skipped.items()),
        "sem_a": _sem(sa),
        "sem_b": _sem(sb),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("zoo", nargs="?", default=str(Path.home() / ".cache/mi-zoo/zoo-full"))
    parser.add_argument("--models", default="")
    parser.add_argument("--extra", nargs=2, action="append", default=[])
    args = parser.parse_args()
    wanted = set(filter(None, args.models.split(",")))
    jobs: List[tuple] = []
    for folder in sorted(Path(args.zoo).iterdir()):
        fp32 = folder / "fp32.onnx"
        if not fp32.exists() or (wanted and folder.name not in wanted):
            continue
        for variant in sorted(folder.glob("*.onnx")):
            if not variant.name.startswith("_"):
                data = folder / "data"
                jobs.append((str(fp32), str(variant), str(data) if data.is_dir() else ""))
    jobs.extend((a, b, "") for a, b in args.extra)
    result: Dict[str, object] = {}
    for a, b, data in jobs:
        try:
            result[f"{a} | {b}"] = dump_pair(a, b, data)
        except Exception as exc:  # a pair the planner refuses: its error is part of the behaviour
            result[f"{a} | {b}"] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"{a} | {b}", file=sys.stderr)
    Path(args.out).write_text(json.dumps(result, indent=0, sort_keys=True, default=str))


if __name__ == "__main__":
    main()
