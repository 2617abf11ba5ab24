#!/usr/bin/env python3
"""Speed of light (issue 16): every mi command as a ratio to its floor, measured side by side in one run.

Every figure is a whole process (scripts/benchlib.py: launcher + os.wait4). A row runs its floor and
its command alternately, N times (paired runs); the ratio is the median of the per-run ratios. The
marginal cost per sample is fitted from 8 and 64 samples: (t64 - t8) / (floor64 - floor8).

Floors (public tools only, scripts/bench_speed_work.py): plain onnxruntime inference of both models
(compare rows) or of one (probe, nan-bisect); check_model(full_check=True) + one session (validate).
The naive script (expose every tensor, numpy diff, streamed) is a reference row. With --before DIR
(a checkout of an older mi, e.g. `git archive main | tar -x -C DIR`), each mi command also runs from
there in the same pairs: the "before" column.

    python scripts/bench_speed.py [--quick] [--repeat 3] [--models mobilenet_v2,resnet50,encoder]
                                  [--before DIR] [--check | --write-baseline] [--json OUT]

--check exits 1 when a ratio is more than 15% above scripts/bench_baseline.json, or when a dependency's
import is over its budget (`--parts imports [--python VENV/bin/python]` measures only those; issue 34).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import benchlib  # noqa: E402

WORK = [sys.executable, str(ROOT / "scripts" / "bench_speed_work.py")]
BASELINE = ROOT / "scripts" / "bench_baseline.json"
TOLERANCE = 1.15
Cmd = List[str]


def mi(root: Path, *args: object) -> Cmd:
    """mi ARGS, imported from the checkout `root` (first on sys.path, before the editable install)."""
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from inspector_cli.cli import main; main()"
    return [sys.executable, "-c", code, *map(str, args)]


def run(cmd: Cmd) -> Dict[str, float]:
    got = benchlib.measure(cmd)
    if got["code"] not in (0, 1):
        raise SystemExit(f"failed ({got['code']}): {' '.join(cmd)}\n{got['output'][-1500:]}")
    return got


class Bench:
    """Collects rows; each row is measured against its floor in paired runs."""

    def __init__(self, repeat: int, before: Optional[Path], save: Optional[Path] = None,
                 only: Sequence[str] = ()) -> None:
        self.repeat, self.before, self.save, self.only = repeat, before, save, tuple(only)
        self.rows: List[Dict[str, object]] = []

    def skip(self, key: str) -> bool:
        """Whether --only leaves this row out."""
        return bool(self.only) and not any(part in key for part in self.only)

    def add(self, row: Dict[str, object]) -> None:
        """Keep a row (and write every row so far to --json: a long run interrupted keeps its figures)."""
        self.rows.append(row)
        if self.save is not None:
            self.save.write_text(json.dumps({"rows": self.rows}, indent=1, default=str))

    def paired(self, key: str, floors: Dict[int, Cmd], tool: Callable[[Path, int], Cmd], target: str,
               whole_max: Optional[float], sample_max: Optional[float], rss: bool = False, mi_row: bool = True) -> None:
        """Ratios of `tool(root, n)` to `floors[n]`: whole process at the smallest n, per sample between sizes."""
        if self.skip(key):
            return
        roots = {"now": ROOT} if self.before is None or not mi_row else {"now": ROOT, "before": self.before}
        walls: Dict[str, Dict[int, List[float]]] = {k: {n: [] for n in floors} for k in ["floor", *roots]}
        cpus: Dict[str, Dict[int, List[float]]] = {k: {n: [] for n in floors} for k in ["floor", *roots]}
        rsss: Dict[str, List[float]] = {k: [] for k in ["floor", *roots]}
        ratios: Dict[str, List[float]] = {k: [] for k in roots}
        small = min(floors)
        for _ in range(self.repeat):
            for n, floor_cmd in floors.items():
                got = run(floor_cmd)
                walls["floor"][n].append(got["wall"])
                cpus["floor"][n].append(got["cpu"])
                if n == small:
                    rsss["floor"].append(got["rss_mib"])
                for label, root in roots.items():
                    mine = run(tool(root, n))
                    walls[label][n].append(mine["wall"])
                    cpus[label][n].append(mine["cpu"])
                    if n == small:
                        ratios[label].append(mine["wall"] / got["wall"])
                        rsss[label].append(mine["rss_mib"])
        row: Dict[str, object] = {"key": key, "target": target, "whole_max": whole_max, "sample_max": sample_max,
                                  "floor_s": statistics.median(walls["floor"][small])}
        for label in ["floor", *roots]:
            row[f"{label}_walls"] = {n: statistics.median(v) for n, v in walls[label].items()}
            row[f"{label}_cpus"] = {n: statistics.median(v) for n, v in cpus[label].items()}
        for label in roots:
            row[f"{label}_whole"] = statistics.median(ratios[label])
            row[f"{label}_cpu_whole"] = row[f"{label}_cpus"][small] / row["floor_cpus"][small]  # type: ignore[index]
            row[f"{label}_s"] = statistics.median(walls[label][small])
            if len(floors) > 1:
                big = max(floors)
                med = {k: {n: statistics.median(v) for n, v in walls[k].items()} for k in ("floor", label)}
                row[f"{label}_sample"] = (med[label][big] - med[label][small]) / (med["floor"][big] - med["floor"][small])
                # CPU seconds (user + system) move much less with the machine's load than wall time
                c = {k: row[f"{k}_cpus"] for k in ("floor", label)}
                row[f"{label}_cpu_sample"] = (c[label][big] - c[label][small]) / (c["floor"][big] - c["floor"][small])  # type: ignore[index]
            if rss:
                row[f"{label}_rss"] = max(rsss[label]) / max(rsss["floor"])
                row[f"{label}_rss_mib"], row["floor_rss_mib"] = max(rsss[label]), max(rsss["floor"])
        self.add(row)
        print(f"  {key}: {row['now_whole']:.2f}x" + (f", per sample {row['now_sample']:.2f}x" if "now_sample" in row
                                                    else ""), file=sys.stderr, flush=True)

    def absolute(self, key: str, tool: Callable[[Path], Cmd], target: str, seconds_max: Optional[float],
                 extra: Optional[Dict[str, object]] = None) -> Dict[str, float]:
        """Median wall seconds of a command without a floor (help, graph-size rows)."""
        if self.skip(key):
            return {"now_s": float("nan")}
        roots = {"now": ROOT} if self.before is None else {"now": ROOT, "before": self.before}
        row: Dict[str, object] = {"key": key, "target": target, "seconds_max": seconds_max, **(extra or {})}
        walls: Dict[str, List[float]] = {label: [] for label in roots}
        cpus: Dict[str, List[float]] = {label: [] for label in roots}
        for _ in range(self.repeat):  # with --before, the two alternate: a pair sees the same load
            for label, root in roots.items():
                got = run(tool(root))
                walls[label].append(got["wall"])
                cpus[label].append(got["cpu"])
        for label in roots:
            row[f"{label}_s"] = statistics.median(walls[label])
            row[f"{label}_cpu_s"] = statistics.median(cpus[label])
        if "before" in roots:
            row["paired_ratio"] = statistics.median(n / b for n, b in zip(walls["now"], walls["before"]))
        self.add(row)
        print(f"  {key}: {row['now_s']:.3f} s", file=sys.stderr, flush=True)
        return row  # type: ignore[return-value]


def model_rows(bench: Bench, name: str, paths: Dict[str, Path], kinds: Sequence[str], counts: Sequence[int],
               work: Path, full: bool, nan: bool) -> None:
    """Compare (outputs, layers, naive) per pair; probe, nan-bisect and validate on the fp32 model."""
    fp32 = paths["fp32"]
    data = {n: paths[f"data{n}"] for n in counts}
    out = work / "out.json"
    for kind in kinds:
        other = paths[kind]
        floors = {n: [*WORK, "floor", fp32, other, data[n]] for n in counts}
        base = f"{name}/{kind}"
        bench.paired(f"{base}/compare-outputs", floors,
                     lambda r, n: mi(r, "-q", "compare", fp32, other, "--inputs", data[n], "--json", out),
                     "<=1.10x, <=1.02x/sample", 1.10, 1.02)
        bench.paired(f"{base}/compare-layers", floors,
                     lambda r, n: mi(r, "-q", "compare", fp32, other, "--inputs", data[n], "--layers", "all", "--json",
                                     out), "<=1.3x, <=1.15x/sample, RSS <=1.6x", 1.3, 1.15, rss=True)
        if full and "data256" in paths:
            big = {256: [*WORK, "floor", fp32, other, paths["data256"]]}
            bench.paired(f"{base}/compare-layers-256", big,
                         lambda r, n: mi(r, "-q", "compare", fp32, other, "--inputs", paths["data256"], "--layers",
                                         "all", "--json", out), "RSS flat 8->256", None, None, rss=True)
        # what exposing every layer costs onnxruntime alone (no diff): the floor under any `--layers all`
        # that reads every tensor from the session
        bench.paired(f"{base}/expose-all", floors, lambda r, n: [*WORK, "exposed", fp32, other, data[n]],
                     "reference", None, None, mi_row=False)
        # whole process only: the naive script is slow (float64 copies of every tensor)
        bench.paired(f"{base}/naive-script", {min(counts): floors[min(counts)]},
                     lambda r, n: [*WORK, "naive", fp32, other, data[n]], "reference", None, None, mi_row=False)
    floors1 = {n: [*WORK, "floor", fp32, data[n]] for n in counts}
    for k in (1, 10):
        names = json.loads(subprocess.run([*WORK, "pick", fp32, str(k)], capture_output=True, text=True,
                                          check=True).stdout)
        select = [x for nm in names for x in ("--select", nm)]
        bench.paired(f"{name}/probe-{k}", floors1,
                     lambda r, n, s=select: mi(r, "-q", "probe", fp32, "--inputs", data[n], *s, "--no-history",
                                               "--json", out), "<=1.15x, <=1.05x/sample", 1.15, 1.05)
    bench.paired(f"{name}/probe-all", floors1,
                 lambda r, n: mi(r, "-q", "probe", fp32, "--inputs", data[n], "--no-history", "--json", out),
                 "<=2x/sample", None, 2.0)
    if nan:
        nan_rows(bench, name, fp32, data[max(counts)], work)
    bench.paired(f"{name}/validate", {0: [*WORK, "checker", fp32]},
                 lambda r, n: mi(r, "-q", "validate", fp32, "--json", out), "<=1.5x", 1.5, None)


def nan_rows(bench: Bench, name: str, fp32: Path, source: Path, work: Path) -> None:
    """nan-bisect over 100 samples, clean and with one bad sample: per-sample cost and the bad sample's."""
    sets = {}
    for label, bad in (("clean", "0"), ("bad", "1")):
        folder = work / f"{name}_nan100_{label}"
        if not folder.exists():
            subprocess.run([*WORK, "nan_data", fp32, source, folder, "100", bad], check=True)
        sets[label] = folder
    first10 = work / f"{name}_nan10_clean"
    if not first10.exists():
        first10.mkdir()
        for path in sorted(sets["clean"].iterdir())[:10]:
            (first10 / path.name).symlink_to(path)
    floors = {10: [*WORK, "floor", fp32, first10], 100: [*WORK, "floor", fp32, sets["clean"]]}
    clean = {10: first10, 100: sets["clean"]}
    bench.paired(f"{name}/nan-bisect-clean", floors,
                 lambda r, n: mi(r, "-q", "nan-bisect", fp32, "--inputs", clean[n], "--json", work / "nb.json"),
                 "<=1.05x/sample", None, 1.05)
    bench.paired(f"{name}/nan-bisect-bad", {100: floors[100]},
                 lambda r, n: mi(r, "-q", "nan-bisect", fp32, "--inputs", sets["bad"], "--json", work / "nb.json"),
                 "origin <=3 inferences", None, None)
    if bench.skip(f"{name}/nan-bisect-clean") or bench.skip(f"{name}/nan-bisect-bad"):
        return
    clean_row, bad_row = bench.rows[-2], bench.rows[-1]
    floor_per_sample = bad_row["floor_walls"][100] / 100.0  # type: ignore[index]
    for label in ("now", "before"):
        if f"{label}_walls" in bad_row:
            # the bad sample's extra cost over the clean data set, in plain inferences of one sample
            extra = bad_row[f"{label}_walls"][100] - clean_row[f"{label}_walls"][100]  # type: ignore[index]
            bad_row[f"{label}_inferences"] = extra / floor_per_sample


def scale_rows(bench: Bench, sizes: Sequence[int], work: Path) -> None:
    """Generated encoders of 5k/20k/50k nodes: seconds per 1,000 nodes, and the 50k planning time."""
    out = work / "scale.json"
    per_k: Dict[str, Dict[int, float]] = {}
    for size in sizes:
        fp32, fp16, data = work / f"big{size}_fp32.onnx", work / f"big{size}_fp16.onnx", work / f"big{size}_data"
        if not fp16.exists():
            print(f"generating a {size}-node model ...", file=sys.stderr, flush=True)
            subprocess.run([*WORK, "big", str(size), work], check=True, capture_output=True)
        commands = {
            "validate": lambda r: mi(r, "-q", "validate", fp32, "--json", out),
            "compare-layers": lambda r: mi(r, "-q", "compare", fp32, fp16, "--inputs", data, "--layers", "all",
                                           "--json", out),
            "probe-list": lambda r: mi(r, "-q", "probe", fp32, "--list", "--json", out),
            "profile": lambda r: mi(r, "-q", "profile", fp32, "--inputs", data, "--json", out),
        }
        for what, command in commands.items():
            row = bench.absolute(f"scale/{what}/{size}", command, "per 1k nodes at 50k <=1.2x that at 5k", None,
                                 {"nodes": size})
            per_k.setdefault(what, {})[size] = row["now_s"] / size * 1000
            row["per_1k_s"] = per_k[what][size]
        if size == max(sizes):
            plans = [json.loads(subprocess.run([*WORK, "plan", fp32, fp16], capture_output=True, text=True,
                                               check=True).stdout)["seconds"] for _ in range(bench.repeat)]
            bench.add({"key": f"scale/compare-planning/{size}", "target": "<5 s", "seconds_max": 5.0,
                               "now_s": statistics.median(plans)})
    for what, values in per_k.items():
        if len(values) > 1:
            bench.add({"key": f"scale/{what}/linearity", "target": "<=1.2x", "whole_max": 1.2,
                               "now_whole": values[max(values)] / values[min(values)]})


def external_rows(bench: Bench, work: Path) -> None:
    """validate of a model with 192 MiB of external weights: wall and peak RSS against checker + session."""
    model = work / "external.onnx"
    if not model.exists():
        subprocess.run([*WORK, "external", model], check=True)
    bench.paired("external/validate", {0: [*WORK, "checker", model]},
                 lambda r, n: mi(r, "-q", "validate", model, "--json", work / "external.json"),
                 "<=1.5x, RSS <= floor + 1.2x largest tensor (48 MiB)", 1.5, None, rss=True)


def import_rows(bench: Bench, python: str) -> List[str]:
    """`import X` of every runtime dependency alone (median of --repeat fresh processes, `-X importtime`),
    against benchlib.IMPORT_BUDGETS: the lines of those over budget."""
    measured = {}
    for module in benchlib.IMPORT_BUDGETS:
        if bench.skip(f"import/{module}"):
            continue
        benchlib.import_time(module, python=python, repeat=1)  # warm the file cache
        got = benchlib.import_time(module, python=python, repeat=max(bench.repeat, 5))
        measured[module] = got["seconds"]
        bench.add({"key": f"import/{module}", "target": f"<{benchlib.IMPORT_BUDGETS[module]:.2f} s",
                   "seconds_max": benchlib.IMPORT_BUDGETS[module], "now_s": got["seconds"],
                   "slowest": f"{got['slowest']} {got['slowest_s'] * 1000:.0f} ms"})
        print(f"  import {module}: {got['seconds'] * 1000:.0f} ms (slowest: {got['slowest']})", file=sys.stderr)
    return benchlib.over_budget(measured)


def help_rows(bench: Bench) -> None:
    bench.absolute("help/mi", lambda r: mi(r, "--help"), "<0.15 s", 0.15)
    bench.absolute("help/compare", lambda r: mi(r, "compare", "--help"), "<0.3 s", 0.3)


def verdict(row: Dict[str, object]) -> str:
    checks = []
    for limit, value in (("whole_max", "now_whole"), ("sample_max", "now_sample"), ("seconds_max", "now_s")):
        if row.get(limit) is not None and value in row:
            checks.append(float(row[value]) <= float(row[limit]))  # type: ignore[arg-type]
    if "now_inferences" in row:
        checks.append(float(row["now_inferences"]) <= 3.0)  # type: ignore[arg-type]
    return "" if not checks else ("met" if all(checks) else "MISSED")


def table(rows: Sequence[Dict[str, object]]) -> str:
    from tabulate import tabulate

    def f(row: Dict[str, object], key: str, unit: str = "x") -> str:
        value = row.get(key)
        return "" if value is None else f"{float(value):.3f} s" if unit == "s" else f"{float(value):.2f}{unit}"  # type: ignore[arg-type]

    body = [[r["key"], f(r, "now_whole"), f(r, "before_whole"), f(r, "now_sample"), f(r, "before_sample"),
             f(r, "now_cpu_whole"), f(r, "before_cpu_whole"), f(r, "now_cpu_sample"), f(r, "before_cpu_sample"),
             f(r, "now_rss"), f(r, "before_rss"), f(r, "now_s", "s"), f(r, "before_s", "s"),
             f(r, "now_inferences", "") or f(r, "per_1k_s", "s"), r["target"], verdict(r)] for r in rows]
    return tabulate(body, headers=["row", "whole x floor", "before", "per sample x", "before", "CPU whole x",
                                   "before", "CPU/sample x", "before", "RSS x", "before",
                                   "wall", "before", "bad: inferences / s per 1k nodes", "target", ""],
                    tablefmt="github", disable_numparse=True)


def ratios(rows: Sequence[Dict[str, object]]) -> Dict[str, float]:
    """The figures --check guards: every ratio and absolute time of the current code."""
    out = {}
    for row in rows:
        if row.get("target") == "reference":
            continue  # the naive script is not ours to guard
        for key in ("now_whole", "now_sample", "now_cpu_whole", "now_cpu_sample", "now_rss", "now_inferences"):
            if row.get(key) is not None:
                out[f"{row['key']}:{key[4:]}"] = round(float(row[key]), 4)  # type: ignore[arg-type]
        if row.get("seconds_max") is not None:
            out[f"{row['key']}:seconds"] = round(float(row["now_s"]), 4)  # type: ignore[arg-type]
    return out


def check(current: Dict[str, float]) -> int:
    if not BASELINE.is_file():
        print(f"--check: no {BASELINE.name}; write one with --write-baseline", file=sys.stderr)
        return 2
    baseline = json.loads(BASELINE.read_text())["ratios"]
    # a non-positive marginal ratio is noise (the larger run was faster): nothing to guard
    worse = [(k, baseline[k], v) for k, v in current.items()
             if k in baseline and baseline[k] > 0 and v > baseline[k] * TOLERANCE]
    for key, old, new in worse:
        print(f"REGRESSION {key}: {new:.3f} vs baseline {old:.3f} (> {TOLERANCE:.2f}x)")
    print(f"--check: {len(worse)} regression(s) among {len(set(current) & set(baseline))} figures")
    return 1 if worse else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="MobileNetV2 fp32 vs int8, 1 run, 5k nodes only")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="mobilenet_v2,resnet50,encoder")
    parser.add_argument("--kinds", default="int8,fp16")
    parser.add_argument("--sizes", default="5000,20000,50000")
    parser.add_argument("--nan-models", default="mobilenet_v2,encoder",
                        help="models of the nan-bisect rows (100 samples each: ResNet-50 is slow)")
    parser.add_argument("--rss-256", action="store_true", help="also compare --layers over 256 samples (RSS)")
    parser.add_argument("--parts", default="imports,models,external,scale,help")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose packages the imports part measures (e.g. a venv of other versions)")
    parser.add_argument("--before", type=Path, help="an older checkout of mi, measured in the same pairs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--only", default="", help="run only rows whose key contains one of these (comma-separated)")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--report", type=Path, nargs="+", help="no runs: the table (and --check/--write-baseline) "
                        "from rows saved by earlier --json runs")
    parser.add_argument("--write-baseline", action="store_true")
    args = parser.parse_args(argv)
    if args.report:
        return finish([row for path in args.report for row in json.loads(path.read_text())["rows"]], args)
    if args.parts == "imports":  # no models needed
        bench = Bench(args.repeat, None, args.json, [part for part in args.only.split(",") if part])
        return finish(bench.rows, args, import_rows(bench, args.python))
    if args.quick:
        args.repeat, args.models, args.kinds, args.sizes = 1, "mobilenet_v2", "int8", "5000"
    counts = (8, 64) + ((256,) if args.rss_256 else ())
    names = args.models.split(",")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_models.py"), str(args.out), ",".join(names),
                    ",".join(map(str, counts))], check=True)
    from bench_models import model_paths

    # Bytecode caches first: with PYTHONDONTWRITEBYTECODE set (as in some CI and sandbox shells) every
    # mi process would compile ~65 modules from source (~0.3 s), a cost no installed copy pays.
    for root in [ROOT, *([args.before] if args.before else [])]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(root) / "inspector_cli")], check=True)
    bench = Bench(args.repeat, args.before.resolve() if args.before else None, args.json,
                  [part for part in args.only.split(",") if part])
    work = args.out / "speed"
    work.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    over = import_rows(bench, args.python) if "imports" in parts else []
    if "help" in parts:
        help_rows(bench)
    if "models" in parts:
        for name in names:
            model_rows(bench, name, model_paths(args.out, name, counts), args.kinds.split(","), (8, 64), work,
                       args.rss_256, name in args.nan_models.split(","))
    if "external" in parts:
        external_rows(bench, work)
    if "scale" in parts:
        scale_rows(bench, [int(s) for s in args.sizes.split(",")], work)
    return finish(bench.rows, args, over)


def finish(rows: List[Dict[str, object]], args: argparse.Namespace, over: Sequence[str] = ()) -> int:
    """Print the table; write the figures; --write-baseline, --check (also fails on an import over budget)."""
    print(table(rows))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for line in over:
        print(line)
    current = ratios(rows)
    if args.json and not args.report:
        args.json.write_text(json.dumps({"rows": rows, "ratios": current}, indent=1, default=str))
    if args.write_baseline:
        BASELINE.write_text(json.dumps({"note": "bench_speed.py --write-baseline", "ratios": current}, indent=1) + "\n")
    return max(check(current), 1 if over else 0) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
