#!/usr/bin/env python3
"""The numbers of compare and probe on the zoo, written by one checkout and diffed against another's (issue 45).

    python scripts/zoo_results_diff.py run OUT_DIR [--root CHECKOUT] [--zoo /work/zoo] [--models a,b]
                                               [--variants qdq_u8u8,fp16] [--jit MODE]
    python scripts/zoo_results_diff.py diff BEFORE_DIR AFTER_DIR

`run` writes, for every zoo model (fp32 against each variant), the JSON of `mi compare` (outputs only
and `--layers all`) and of `mi probe --select all` on the fp32 model and each variant, run from
CHECKOUT (first on sys.path; default: this one), with MI_JIT=MODE (`always` forces the compiled
kernels on these small data sets, `0` the numpy path). `diff` compares every number of every file
(floats by their exact value), leaving out what differs between two runs of the same code: the
creation time, the fingerprint, the capture budget (a share of the memory free at the time) and
wall times. Exit 1 when anything else differs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
VOLATILE = {"created", "fingerprint", "budget_bytes", "seconds", "run_seconds", "build_seconds", "duration_s",
            "elapsed_s", "wall_s"}


def _mi(root: Path, args: List[str], env: dict) -> int:
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from inspector_cli.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode


def run(out: Path, root: Path, zoo: Path, models: List[str], variants_wanted: List[str], jit: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MI_JIT": jit}
    for folder in sorted(p for p in zoo.iterdir() if (p / "fp32.onnx").is_file()):
        if models and folder.name not in models:
            continue
        data = folder / "data"
        variants = sorted(p for p in folder.glob("*.onnx") if not p.name.startswith("_") and p.stem != "fp32"
                          and (not variants_wanted or p.stem in variants_wanted))
        jobs: List[Tuple[str, List[str]]] = []
        for model in [folder / "fp32.onnx", *variants]:
            jobs.append((f"{folder.name}.{model.stem}.probe", ["-q", "probe", str(model), "--select", "all",
                                                                "--no-history"] + (["--inputs", str(data)] if data.is_dir() else [])))
        for variant in variants:
            base = ["-q", "compare", str(folder / "fp32.onnx"), str(variant)] + (["--inputs", str(data)] if data.is_dir() else [])
            jobs.append((f"{folder.name}.{variant.stem}.outputs", base))
            jobs.append((f"{folder.name}.{variant.stem}.layers", base + ["--layers", "all"]))
        for name, args in jobs:
            target = out / f"{name}.json"
            code = _mi(root, [*args, "--json", str(target)], env)
            (out / f"{name}.exit").write_text(f"{code}\n")
            print(f"{name}: exit {code}", file=sys.stderr, flush=True)
    return 0


def _walk(a: Any, b: Any, path: str, out: List[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key in VOLATILE:
                continue
            if key not in a or key not in b:
                out.append(f"{path}/{key}: only in {'after' if key not in a else 'before'}")
            else:
                _walk(a[key], b[key], f"{path}/{key}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} vs {len(b)} items")
        for index, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{path}[{index}]", out)
    elif a != b and not (isinstance(a, float) and isinstance(b, float) and a != a and b != b):
        out.append(f"{path}: {a!r} vs {b!r}")


def diff(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    problems: List[str] = []
    numbers = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            problems.append(f"{name}: only in {'after' if not a.exists() else 'before'}")
            continue
        if name.endswith(".exit"):
            if a.read_text() != b.read_text():
                problems.append(f"{name}: exit {a.read_text().strip()} vs {b.read_text().strip()}")
            continue
        x, y = json.loads(a.read_text()), json.loads(b.read_text())
        numbers += json.dumps(x).count(",")
        found: List[str] = []
        _walk(x, y, "", found)
        problems.extend(f"{name}{line}" for line in found)
    results = sum(1 for n in names if n.endswith(".json"))
    for line in problems[:50]:
        print(line)
    print(f"{results} results compared ({numbers} values): {len(problems)} difference(s)")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("run")
    one.add_argument("out", type=Path)
    one.add_argument("--root", type=Path, default=ROOT)
    one.add_argument("--zoo", type=Path, default=Path("/work/zoo"))
    one.add_argument("--models", default="")
    one.add_argument("--variants", default="", help="variants to compare with fp32 (default: every one)")
    one.add_argument("--jit", default="auto", help="MI_JIT for the runs: auto, always, 0")
    two = sub.add_parser("diff")
    two.add_argument("before", type=Path)
    two.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.what == "run":
        return run(args.out, args.root.resolve(), args.zoo, [m for m in args.models.split(",") if m],
                   [v for v in args.variants.split(",") if v], args.jit)
    return diff(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
