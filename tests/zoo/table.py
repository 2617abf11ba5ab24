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
from typing import Dict, List, Tuple

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


def feature_table(folder: Path) -> str:
    """Markdown table of the feature commands (exit code, seconds) with the fallback plan's outcome: found,
    nodes kept, target, the written model's cosine re-run alone elsewhere, the exclude list's delta."""
    runs, facts = _load(folder)
    head = ["model", "variant", *FEATURES, "plan", "target", "recheck alone", "exclude-list delta"]
    rows: List[str] = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(runs):
        cmds, f = runs[key], facts.get(key, {})
        if not any(c in cmds for c in FEATURES):
            continue
        cells = [f"{cmds[c][0]} ({cmds[c][1]:.1f}s)" if c in cmds else "-" for c in FEATURES]
        found = f.get("fallback_found")
        plan = "-" if found is None else f"{'found' if found else 'NOT found'} ({f.get('fallback_nodes', 0)})"
        target = f"{f['fallback_target']:.7f}" if f.get("fallback_target") is not None else "-"
        recheck = f"{f['recheck_cosine']:.7f}" if f.get("recheck_cosine") is not None else "-"
        delta = f"{f['exclude_delta']:+.1e}" if f.get("exclude_delta") is not None else "-"
        rows.append("| " + " | ".join([*key, *cells, plan, target, recheck, delta]) + " |")
    return "\n".join(rows)


def table(folder: Path) -> str:
    """Markdown table from runs.jsonl and facts.json in `folder`."""
    runs, facts = _load(folder)
    head = ["model", "variant", *COMMANDS, "paired / unpaired A / B", "isolated", "worst abs dcos", "first divergence",
            "negligible", "name clashes"]
    rows: List[str] = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(runs):
        cmds, f = runs[key], facts.get(key, {})
        if not any(c in cmds for c in COMMANDS):
            continue
        cells = [f"{cmds[c][0]} ({cmds[c][1]:.1f}s)" if c in cmds else "-" for c in COMMANDS]
        paired = f"{f['paired']} / {f['unpaired_a']} / {f['unpaired_b']}" if "paired" in f else "-"
        share = f"{f['isolated_share']:.0%}" if f.get("isolated_share") is not None else "-"
        delta = f"{f['worst_delta']:.1e}" if f.get("worst_delta") is not None else "-"
        first = f"`{f['first_divergence'][-40:]}`" if f.get("first_divergence") else "-"
        excused = str(f["excused"]) if f.get("excused") is not None else "-"
        clashes = f"{f['name_clashes']} of {f['names_checked']}" if f.get("names_checked") is not None else "-"
        rows.append("| " + " | ".join([*key, *cells, paired, share, delta, first, excused, clashes]) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--features"]
    folder = Path(args[0] if args else "test-artifacts/zoo")
    print(feature_table(folder) if "--features" in sys.argv else table(folder))
