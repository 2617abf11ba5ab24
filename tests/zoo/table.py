"""The results table of a zoo sweep (docs/zoo.md): model x variant x command with exit code and seconds,
layers paired / unpaired, share isolated, the worst |delta cos| against the recomputation, and (at the level the
truth is checked) the first divergence and the layers whose threshold crossing was excused as negligible, and the
name clashes of the drawn tables (test_distinct_row_names) out of the names checked.

    python -m tests.zoo.table [test-artifacts/zoo] [--features]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Dict, List, Tuple

COMMANDS = ("compare", "compare-disable", "probe", "probe-list", "probe-quant", "nan-bisect", "validate", "profile", "report")
FEATURES = ("fallback", "bisect-opt", "simulated", "labels", "inspect-diff", "report-diff", "sequence", "decode",
            "probe-nan", "nan-bisect-nan")
"""The feature commands of tests/zoo/test_features.py (issue 29), in the second table."""


def _load(folder: Path) -> Tuple[Dict[Tuple[str, str], Dict[str, Tuple[int, float]]], Dict[Tuple[str, str], dict]]:
    runs: Dict[Tuple[str, str], Dict[str, Tuple[int, float]]] = {}
    for line in (folder / "runs.jsonl").read_text().splitlines():
        r = json.loads(line)
        runs.setdefault((r["model"], r["variant"]), {})[r["command"]] = (r["rc"], r["seconds"])
    facts = {(f["model"], f["variant"]): f for f in json.loads((folder / "facts.json").read_text())} \
        if (folder / "facts.json").exists() else {}
    return runs, facts


def _opt(f: dict, key: str, fmt: str) -> str:
    return format(f[key], fmt) if f.get(key) is not None else "-"


def _markdown(folder: Path, commands: Tuple[str, ...], extra_head: List[str],
              extra: Callable[[dict], List[str]]) -> str:
    """One row per model and variant that ran any of `commands`: exit code (seconds) of each, then `extra(facts)`."""
    runs, facts = _load(folder)
    head = ["model", "variant", *commands, *extra_head]
    rows: List[str] = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(runs):
        cmds = runs[key]
        if any(c in cmds for c in commands):
            cells = [f"{cmds[c][0]} ({cmds[c][1]:.1f}s)" if c in cmds else "-" for c in commands]
            rows.append("| " + " | ".join([*key, *cells, *extra(facts.get(key, {}))]) + " |")
    return "\n".join(rows)


def _plan_cells(f: dict) -> List[str]:
    found = f.get("fallback_found")
    plan = "-" if found is None else f"{'found' if found else 'NOT found'} ({f.get('fallback_nodes', 0)})"
    return [plan, _opt(f, "fallback_target", ".7f"), _opt(f, "recheck_cosine", ".7f"), _opt(f, "exclude_delta", "+.1e")]


def _layer_cells(f: dict) -> List[str]:
    paired = f"{f['paired']} / {f['unpaired_a']} / {f['unpaired_b']}" if "paired" in f else "-"
    first = f"`{f['first_divergence'][-40:]}`" if f.get("first_divergence") else "-"
    clashes = f"{f['name_clashes']} of {f['names_checked']}" if f.get("names_checked") is not None else "-"
    return [paired, _opt(f, "isolated_share", ".0%"), _opt(f, "worst_delta", ".1e"), first,
            str(f["excused"]) if f.get("excused") is not None else "-", clashes]


def feature_table(folder: Path) -> str:
    """Markdown table of the feature commands (exit code, seconds) with the fallback plan's outcome: found,
    nodes kept, target, the written model's cosine re-run alone elsewhere, the exclude list's delta."""
    return _markdown(folder, FEATURES, ["plan", "target", "recheck alone", "exclude-list delta"], _plan_cells)


def table(folder: Path) -> str:
    """Markdown table from runs.jsonl and facts.json in `folder`."""
    return _markdown(folder, COMMANDS, ["paired / unpaired A / B", "isolated", "worst abs dcos", "first divergence",
                                        "negligible", "name clashes"], _layer_cells)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--features"]
    folder = Path(args[0] if args else "test-artifacts/zoo")
    print(feature_table(folder) if "--features" in sys.argv else table(folder))
