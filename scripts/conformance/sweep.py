"""The conformance sweep: every backend test case through compare --golden, validate, probe, nan-bisect,
profile and inspect, held against the independent truth (truth.py).

    python scripts/conformance/sweep.py CASES OUT [--mi BIN/mi] [--batch 40] [--only NAME,...]

CASES is a folder written by backend_data.py. The commands run as users run them, batched: one
`mi run SUITE --keep-going --json` per batch of cases (six steps a case, each step's exit code and
result in the suite's JSON), so ~2,000 cases cost ~50 interpreter starts, not 12,000. A batch whose
process dies (a crash in onnxruntime) or times out is run again one case a suite, so one case cannot
hide the others. The truth runs in a process of its own with the same Python as `mi`.

Writes OUT/runs.jsonl (one record a case: truth, each step's exit code and summary, mi's golden max
abs error) and OUT/summary.json (the criteria's counts and the failing cases by class), and prints
the summary. Exit 0 when every criterion holds, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

HERE = Path(__file__).resolve().parent
COMMANDS = ("compare", "validate", "probe", "nan-bisect", "profile", "inspect")


def find_cases(root: Path, only: Optional[Iterable[str]] = None) -> List[Path]:
    wanted = set(only or ())
    cases = sorted(p.parent for p in root.glob("*/*/case.json"))
    return [c for c in cases if not wanted or c.name in wanted or f"{c.parent.name}/{c.name}" in wanted]


def _steps(index: int, case: Path) -> List[Dict[str, Any]]:
    meta = json.loads((case / "case.json").read_text())
    model, data = str(case / "model.onnx"), [str(case)]
    tag = f"c{index}"
    return [
        {"name": f"{tag}-compare", "compare": {"model-a": model, "golden": str(case), "rtol": meta["rtol"],
                                               "atol": meta["atol"]}},
        {"name": f"{tag}-validate", "validate": {"model": model}},
        {"name": f"{tag}-probe", "probe": {"model": model, "inputs": data}},
        {"name": f"{tag}-nan-bisect", "nan-bisect": {"model": model, "inputs": data}},
        {"name": f"{tag}-profile", "profile": {"model": model, "inputs": data, "runs": 1, "warmup": 0}},
        {"name": f"{tag}-inspect", "inspect": {"model": model}},
    ]


def run_batch(mi: Path, cases: List[Path], start: int, work: Path, timeout: float) -> Optional[Dict[str, Any]]:
    """One suite over `cases`; {step name: step record} or None when the process died or timed out."""
    suite = work / f"suite-{start}.json"  # JSON is YAML: no yaml dependency here
    steps = [s for i, case in enumerate(cases) for s in _steps(start + i, case)]
    suite.write_text(json.dumps({"version": 1, "steps": steps}))
    report = work / f"suite-{start}.result.json"
    report.unlink(missing_ok=True)
    try:
        proc = subprocess.run([str(mi), "-q", "run", str(suite), "--keep-going", "--json", str(report)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if not report.exists():
        return None
    document = json.loads(report.read_text())
    records = {s["name"]: s for s in document["results"]["steps"]}
    records["__stderr__"] = proc.stderr
    return records


def _golden_max_abs(record: Dict[str, Any]) -> Optional[float]:
    result = record.get("result") or {}
    outputs = (result.get("results") or {}).get("outputs") or []
    values = [((o.get("dataset") or {}).get("max_abs")) for o in outputs]
    values = [float(v) if not isinstance(v, str) else float(v) for v in values if v is not None]
    return max(values) if values else (0.0 if outputs else None)


def case_record(case: Path, index: int, steps: Dict[str, Any], truth: Dict[str, Any], stderr: str) -> Dict[str, Any]:
    record: Dict[str, Any] = {"case": f"{case.parent.name}/{case.name}", "truth": truth, "steps": {}}
    for command in COMMANDS:
        step = steps.get(f"c{index}-{command}")
        if step is None:
            record["steps"][command] = {"exit": None, "summary": "no record"}
            continue
        record["steps"][command] = {"exit": step["exit_code"], "summary": step.get("summary", "")}
        if command == "compare":
            record["mi_max_abs"] = _golden_max_abs(step)
    record["traceback"] = "Traceback (most recent call last)" in stderr
    return record


def _close(a: Optional[float], b: Optional[float]) -> bool:
    if a is None or b is None:
        return a is b
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def judge(record: Dict[str, Any]) -> List[str]:
    """The criteria this case breaks (empty: it holds every one)."""
    problems = []
    truth, steps = record["truth"], record["steps"]
    codes = {c: s["exit"] for c, s in steps.items()}
    if any(code == 4 for code in codes.values()):
        problems.append("exit 4: " + ", ".join(c for c, code in codes.items() if code == 4))
    if record.get("traceback"):
        problems.append("traceback")
    for command, step in steps.items():
        if step["exit"] == 3 and "\n" in (step["summary"] or "").strip():
            problems.append(f"{command}: exit 3 message of several lines")
    if truth.get("runs"):
        for command, code in codes.items():
            if code not in (0, 1):
                problems.append(f"{command}: exit {code} where onnxruntime runs the case: {steps[command]['summary'][:160]}")
        if codes.get("compare") in (0, 1):
            if (codes["compare"] == 0) != bool(truth["passed"]):
                problems.append(f"verdict: mi exit {codes['compare']}, truth {'pass' if truth['passed'] else 'fail'}")
            if not _close(record.get("mi_max_abs"), truth.get("max_abs")):
                problems.append(f"max abs: mi {record.get('mi_max_abs')}, truth {truth.get('max_abs')}")
    elif codes.get("compare") != 3:
        problems.append(f"compare: exit {codes.get('compare')} where onnxruntime cannot run the case ({truth.get('error')})")
    return problems


def run_truths(python: Path, cases: List[Path], out: Path) -> Dict[str, Dict[str, Any]]:
    """The truth of every case, computed by truth.py in a process of its own (mi's Python)."""
    code = ("import json, sys\nsys.path.insert(0, %r)\nimport truth\nfrom pathlib import Path\n"
            "for line in sys.stdin:\n    case = Path(line.strip())\n"
            "    try:\n        r = truth.run_case(case)\n"
            "    except Exception as e:\n        r = {'runs': None, 'error': f'truth failed: {type(e).__name__}: {e}'}\n"
            "    print(json.dumps({'case': str(case), **r}, default=str), flush=True)\n") % str(HERE)
    target = out / "truth.jsonl"
    with open(target, "w") as sink:
        subprocess.run([str(python), "-c", code], input="\n".join(map(str, cases)), stdout=sink, text=True, check=True)
    found = {}
    for line in target.read_text().splitlines():
        row = json.loads(line)
        found[row.pop("case")] = row
    return found


def sweep(root: Path, out: Path, mi: Path, batch: int, only: Optional[List[str]], timeout: float) -> Dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    work = out / "suites"
    work.mkdir(exist_ok=True)
    cases = find_cases(root, only)
    started = time.perf_counter()
    truths = run_truths(mi.parent / "python", cases, out)
    truth_seconds = time.perf_counter() - started
    records: List[Dict[str, Any]] = []
    for start in range(0, len(cases), batch):
        chunk = cases[start:start + batch]
        steps = run_batch(mi, chunk, start, work, timeout)
        results = [(start, chunk, steps)] if steps is not None else \
            [(start + i, [case], run_batch(mi, [case], start + i, work, timeout)) for i, case in enumerate(chunk)]
        for first, group, found in results:
            for i, case in enumerate(group):
                if found is None:
                    record = {"case": f"{case.parent.name}/{case.name}", "truth": truths[str(case)],
                              "steps": {c: {"exit": None, "summary": "mi run died or timed out"} for c in COMMANDS}}
                else:
                    record = case_record(case, first + i, found, truths[str(case)], found.get("__stderr__", ""))
                record["problems"] = judge(record) if found is not None else ["mi run died or timed out"]
                records.append(record)
        print(f"{min(start + batch, len(cases))}/{len(cases)} cases, {time.perf_counter() - started:.0f} s",
              file=sys.stderr, flush=True)
    with open(out / "runs.jsonl", "w") as sink:
        for record in records:
            sink.write(json.dumps(record, default=str) + "\n")
    summary = summarise(records)
    summary["seconds"] = {"truth": round(truth_seconds, 1), "total": round(time.perf_counter() - started, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def summarise(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    runs = [r for r in records if r["truth"].get("runs")]
    compared = [r for r in runs if r["steps"]["compare"]["exit"] in (0, 1)]
    verdict_agree = sum((r["steps"]["compare"]["exit"] == 0) == bool(r["truth"]["passed"]) for r in compared)
    max_abs_agree = sum(_close(r.get("mi_max_abs"), r["truth"].get("max_abs")) for r in compared)
    exit_codes: Dict[str, Dict[str, int]] = {}
    for r in records:
        for command, step in r["steps"].items():
            key = str(step["exit"])
            exit_codes.setdefault(command, {})
            exit_codes[command][key] = exit_codes[command].get(key, 0) + 1
    failing = {r["case"]: r["problems"] for r in records if r["problems"]}
    return {"cases": len(records), "onnxruntime_runs": len(runs), "onnxruntime_refuses": len(records) - len(runs),
            "truth_passes": sum(bool(r["truth"].get("passed")) for r in runs),
            "golden_compared": len(compared), "verdict_agree": verdict_agree, "max_abs_agree": max_abs_agree,
            "exit_codes": exit_codes, "failing_cases": len(failing), "failing": failing,
            "nan_same_cases": sorted(r["case"] for r in runs if r["truth"].get("nan_same"))}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mi", type=Path, default=Path(sys.executable).with_name("mi"))
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--only", default="", help="case names (or KIND/NAME), comma-separated")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per batch")
    args = parser.parse_args(argv)
    summary = sweep(args.cases, args.out, args.mi, args.batch, [s for s in args.only.split(",") if s] or None,
                    args.timeout)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("failing", "nan_same_cases")}, indent=1))
    print(f"{len(summary['nan_same_cases'])} case(s) expect NaN where onnxruntime gives NaN")
    for case, problems in sorted(summary["failing"].items()):
        print(f"{case}: {'; '.join(problems)}")
    return 0 if not summary["failing"] else 1


if __name__ == "__main__":
    sys.exit(main())
