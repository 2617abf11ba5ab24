#!/usr/bin/env python3
"""The cost of one more sample (issue 45): mi against plain onnxruntime on the same inputs, at data-set scale.

For each model (torchvision MobileNetV2 and ResNet-50, fp32 vs int8 QDQ, bench_models.py) and row,
every count (8, 64, 512 samples) runs mi and its floor as whole processes, paired and interleaved
(floor, mi[, mi before] for each count, then the next repetition), so drift in the machine's load
hits both sides of a ratio alike:

  compare-outputs   mi -q compare A B --inputs DIR --json OUT           floor: plain inference of A and B
  compare-layers    ... --layers all                                      floor: the same
  probe-all         mi -q probe A --inputs DIR --select all --no-history  floor: plain inference of A

`--baselines` adds, on the two rows that read every tensor, plain onnxruntime with every tensor exposed as
an output (`exposed`: no statistic) and the same plus one numpy pass over each float tensor (`exposed+1
pass`): what any tool that reads every tensor spends at least, reported as their own ratios to the floor.

Figures per row: the whole-process ratio at each count (median of the pairs), the marginal cost of a
sample between counts, (mi(n2) - mi(n1)) / (floor(n2) - floor(n1)), in wall and CPU seconds (the
median over repetitions of each repetition's own marginal: its four runs ran minutes apart at
most), mi's peak RSS at each count (flat in the count: memory bounded), and the load average
during the row. Then one in-process run of mi and of the floor at --phase-count samples
(scripts/bench_phases.py) splits a sample's time into sample read, feed, run A, run B, copies out of
onnxruntime, metrics and bookkeeping, with each session's thread settings against the floor's.

    python scripts/bench_sample_cost.py [--models mobilenet_v2,resnet50] [--rows outputs,layers,probe]
        [--counts 8,64,512] [--repeat 3] [--before DIR] [--out DIR] [--json OUT] [--phase-count 64] [--baselines]

The floors use public tools only (numpy + onnxruntime, default session options, CPU provider).
Models and samples come from bench_models.py in --out (built there if missing: torchvision needs a
venv of its own, docs/zoo.md "torchvision"; `--models-python` names it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import benchlib  # noqa: E402

FLOOR = [sys.executable, str(ROOT / "scripts" / "bench_speed_work.py"), "floor"]
PHASES = [sys.executable, str(ROOT / "scripts" / "bench_phases.py")]
# Lower bounds beside mi for the rows that read every tensor (--baselines): onnxruntime with every tensor
# exposed and nothing computed, and the same plus one numpy pass over each float tensor.
BASELINES = {"exposed": [sys.executable, str(ROOT / "scripts" / "bench_speed_work.py"), "exposed"],
             "exposed+1 pass": [sys.executable, str(ROOT / "scripts" / "bench_speed_work.py"), "exposed_read"]}
TARGETS = {"compare-outputs": 1.05, "compare-layers": 1.5, "probe-all": 2.0}
PHASE_ORDER = ("sample read", "feed", "run A", "run B", "run", "copies out of onnxruntime", "metrics",
               "statistics: min/max/zeros, bookkeeping", "statistics: histogram", "statistics: moments",
               "statistics: channels", "bookkeeping", "waiting for the metrics thread")


def mi_cmd(root: Path, *args: object) -> List[str]:
    """mi ARGS imported from the checkout `root` (first on sys.path), as `mi` itself starts."""
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from inspector_cli.cli import main; main()"
    return [sys.executable, "-c", code, *map(str, args)]


def row_args(row: str, a: Path, b: Path, data: Path, out: Path) -> List[object]:
    if row == "compare-outputs":
        return ["-q", "compare", a, b, "--inputs", data, "--json", out]
    if row == "compare-layers":
        return ["-q", "compare", a, b, "--inputs", data, "--layers", "all", "--json", out]
    return ["-q", "probe", a, "--inputs", data, "--select", "all", "--no-history", "--json", out]


def floor_models(row: str, a: Path, b: Path) -> List[Path]:
    return [a] if row == "probe-all" else [a, b]


def measure(cmd: List[str]) -> Dict[str, Any]:
    load = os.getloadavg()[0]
    got = benchlib.measure(cmd)
    if got["code"] not in (0, 1):
        raise SystemExit(f"failed ({got['code']}): {' '.join(map(str, cmd))}\n{got['output'][-1500:]}")
    got["load"] = (load + os.getloadavg()[0]) / 2
    got.pop("output", None)
    got.pop("seen", None)
    return got


def paired_row(key: str, row: str, paths: Dict[str, Path], counts: Sequence[int], repeat: int,
               roots: Dict[str, Path], work: Path, baselines: bool = False) -> Dict[str, Any]:
    """Every count's floor and mi run(s) (and with `baselines`, BASELINES' runs for the rows that read every
    tensor), interleaved, `repeat` times; the ratios."""
    a, b = paths["fp32"], paths["int8"]
    labels = [*roots, *(BASELINES if baselines and row != "compare-outputs" else [])]
    runs: Dict[str, Dict[int, List[Dict[str, Any]]]] = {k: {n: [] for n in counts} for k in ["floor", *labels]}
    for rep in range(repeat):
        for n in counts:
            data = paths[f"data{n}"]
            runs["floor"][n].append(measure([*FLOOR, *floor_models(row, a, b), data]))
            for label, root in roots.items():
                runs[label][n].append(measure(mi_cmd(root, *row_args(row, a, b, data, work / f"{label}.json"))))
            for label in labels[len(roots):]:
                runs[label][n].append(measure([*BASELINES[label], *floor_models(row, a, b), data]))
            print(f"  {key} rep {rep + 1} n={n}: floor {runs['floor'][n][-1]['wall']:.2f} s, "
                  + ", ".join(f"{k} {runs[k][n][-1]['wall']:.2f} s" for k in labels)
                  + f" (load {runs['floor'][n][-1]['load']:.1f})", file=sys.stderr, flush=True)
    out: Dict[str, Any] = {"key": key, "row": row, "target": TARGETS[row], "counts": list(counts), "repeat": repeat,
                           "load": [min(r["load"] for k in runs for n in counts for r in runs[k][n]),
                                    max(r["load"] for k in runs for n in counts for r in runs[k][n])],
                           "runs": runs}
    for label in labels:
        fig: Dict[str, Any] = {}
        for n in counts:
            pairs = list(zip(runs["floor"][n], runs[label][n]))
            fig[f"whole_{n}"] = statistics.median(m["wall"] / f["wall"] for f, m in pairs)
            fig[f"cpu_whole_{n}"] = statistics.median(m["cpu"] / f["cpu"] for f, m in pairs)
            fig[f"wall_{n}"] = statistics.median(m["wall"] for _, m in pairs)
            fig[f"floor_wall_{n}"] = statistics.median(f["wall"] for f, _ in pairs)
            fig[f"rss_{n}"] = max(m["rss_mib"] for _, m in pairs)
            fig[f"floor_rss_{n}"] = max(f["rss_mib"] for f, _ in pairs)
        for lo, hi in zip(counts, counts[1:]):
            for what in ("wall", "cpu"):
                per_rep = []
                for i in range(repeat):
                    floor = runs["floor"][hi][i][what] - runs["floor"][lo][i][what]
                    mine = runs[label][hi][i][what] - runs[label][lo][i][what]
                    if floor > 0:
                        per_rep.append(mine / floor)
                fig[f"{'' if what == 'wall' else 'cpu_'}sample_{lo}_{hi}"] = statistics.median(per_rep) if per_rep else None
                # milliseconds per sample of each side (medians of the repetitions)
                for side in ("floor", label):
                    ms = statistics.median((runs[side][hi][i][what] - runs[side][lo][i][what]) / (hi - lo) * 1e3
                                           for i in range(repeat))
                    fig[f"{'floor' if side == 'floor' else 'mi'}_{what}_ms_{lo}_{hi}"] = ms
        out[label] = fig
    return out


def phases(row: str, paths: Dict[str, Path], count: int, root: Path, work: Path) -> Dict[str, Any]:
    """In-process breakdown of `count` samples: mi's phases and the floor's, ms per sample."""
    a, b, data = paths["fp32"], paths["int8"], paths[f"data{count}"]
    got: Dict[str, Any] = {}
    for side, cmd in (("floor", [*PHASES, "floor", *floor_models(row, a, b), data]),
                      ("mi", [*PHASES, "mi", *row_args(row, a, b, data, work / "phases.json")])):
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
        line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH_PHASES ")), None)
        if line is None:
            raise SystemExit(f"phases failed: {' '.join(map(str, cmd))}\n{done.stderr[-1500:]}")
        result = json.loads(line[len("BENCH_PHASES "):])
        result["per_sample_ms"] = {f"{p['phase']} [{p['thread']}]": {"wall": p["wall"] / count * 1e3,
                                                                     "cpu": p["cpu"] / count * 1e3}
                                   for p in result["phases"]}
        got[side] = result
    return got


def report(rows: Sequence[Dict[str, Any]], labels: Sequence[str]) -> str:
    from tabulate import tabulate

    def x(value: Optional[float]) -> str:
        return "" if value is None else f"{value:.2f}x"

    lines = []
    for label in labels:
        body = []
        for row in rows:
            fig = row.get(label)
            if fig is None:
                continue
            counts = row["counts"]
            marg = [f"{x(fig.get(f'sample_{lo}_{hi}'))} (CPU {x(fig.get(f'cpu_sample_{lo}_{hi}'))}; "
                    f"{fig[f'mi_wall_ms_{lo}_{hi}']:.1f} vs {fig[f'floor_wall_ms_{lo}_{hi}']:.1f} ms)"
                    for lo, hi in zip(counts, counts[1:])]
            whole = [f"{x(fig[f'whole_{n}'])} (CPU {x(fig[f'cpu_whole_{n}'])})" for n in counts]
            rss = " / ".join(f"{fig[f'rss_{n}']:.0f}" for n in counts)
            worst = max((fig.get(f"sample_{lo}_{hi}") or 0.0) for lo, hi in zip(counts, counts[1:]))
            body.append([row["key"], *marg, *whole, rss, f"{row['load'][0]:.1f}-{row['load'][1]:.1f}",
                         f"<= {row['target']}x", "met" if worst <= row["target"] else "MISSED"])
        if not body:
            continue
        counts = rows[0]["counts"]
        headers = ["row", *[f"per sample {lo}->{hi}" for lo, hi in zip(counts, counts[1:])],
                   *[f"whole {n}" for n in counts], "peak RSS MiB " + "/".join(map(str, counts)), "load", "target", ""]
        if label in BASELINES:
            lines.append(f"### {label} (plain onnxruntime, a lower bound: not mi)\n\n"
                         + tabulate(body, headers=headers, tablefmt="github", disable_numparse=True))
            continue
        lines.append(f"### {label}\n\n" + tabulate(body, headers=headers, tablefmt="github", disable_numparse=True))
    return "\n\n".join(lines)


def phase_table(key: str, got: Dict[str, Any]) -> str:
    from tabulate import tabulate

    names = sorted({k for side in got.values() for k in side["per_sample_ms"]},
                   key=lambda k: (PHASE_ORDER.index(k.split(" [")[0]) if k.split(" [")[0] in PHASE_ORDER else 99, k))
    body = [[name, *[f"{got[s]['per_sample_ms'][name]['wall']:.2f} / {got[s]['per_sample_ms'][name]['cpu']:.2f}"
                     if name in got[s]["per_sample_ms"] else "" for s in ("floor", "mi")]] for name in names]
    sessions = "; ".join(f"{s['label'].split('/')[-1] if '/' in s['label'] else s['label']}: intra-op "
                         f"{s['intra_op_threads']}, spinning {s['spinning']}, opt {s['opt_level']}"
                         for s in got["mi"]["sessions"])
    return (f"#### {key}: ms per sample, wall / CPU of that thread (exclusive of nested phases)\n\n"
            + tabulate(body, headers=["phase [thread]", "floor", "mi"], tablefmt="github", disable_numparse=True)
            + f"\n\nprocess: floor {got['floor']['wall']:.2f} s wall / {got['floor']['cpu']:.2f} s CPU, mi "
              f"{got['mi']['wall']:.2f} s / {got['mi']['cpu']:.2f} s. Sessions of mi: {sessions}; the floor's: "
              "onnxruntime defaults (intra-op threads = cores, spinning on, opt all).")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50")
    parser.add_argument("--rows", default="outputs,layers,probe", help="any of outputs, layers, probe")
    parser.add_argument("--counts", default="8,64,512")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, help="an older checkout of mi, run in the same pairs")
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "model-inspector" / "bench",
                        help="models and samples (bench_models.py), cached outside the repository")
    parser.add_argument("--models-python", default=sys.executable,
                        help="the python that builds missing models (torchvision: docs/zoo.md)")
    parser.add_argument("--json", type=Path, help="write every run and figure here")
    parser.add_argument("--phase-count", type=int, default=64, help="samples of the in-process breakdown (0: none)")
    parser.add_argument("--baselines", action="store_true",
                        help="also run onnxruntime with every tensor exposed (and + one numpy pass) for the rows "
                             "that read every tensor: the lower bounds of any such tool")
    parser.add_argument("--report", type=Path, nargs="+", help="no runs: print the tables of earlier --json files")
    args = parser.parse_args(argv)
    if args.report:
        saved = [json.loads(p.read_text()) for p in args.report]
        rows = [r for s in saved for r in s["rows"]]
        print(report(rows, ["now", "before", *BASELINES]))
        for s in saved:
            for key, got in s.get("phases", {}).items():
                print("\n" + phase_table(key, got))
        return 0
    counts = [int(n) for n in args.counts.split(",")]
    names = args.models.split(",")
    subprocess.run([args.models_python, str(ROOT / "scripts" / "bench_models.py"), str(args.out), ",".join(names),
                    ",".join(map(str, counts))], check=True)
    from bench_models import model_paths

    roots = {"now": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    for root in roots.values():  # bytecode first: a cold checkout would compile its modules in every run
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "inspector_cli")], check=True)
    work = args.out / "sample-cost"
    work.mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, Any]] = []
    breakdown: Dict[str, Any] = {}
    wanted = {"outputs": "compare-outputs", "layers": "compare-layers", "probe": "probe-all"}
    for name in names:
        paths = model_paths(args.out, name, counts)
        for short in args.rows.split(","):
            row = wanted[short]
            key = f"{name}/{row}"
            rows.append(paired_row(key, row, paths, counts, args.repeat, roots, work, args.baselines))
            if args.phase_count:
                breakdown[key] = phases(row, paths, args.phase_count, ROOT, work)
            if args.json:
                args.json.write_text(json.dumps({"rows": rows, "phases": breakdown}, indent=1, default=str))
    print(report(rows, [*roots, *(BASELINES if args.baselines else [])]))
    for key, got in breakdown.items():
        print("\n" + phase_table(key, got))
    print(f"\nload average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
