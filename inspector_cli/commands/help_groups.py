"""Which group each option of each command is shown in, by `--help` and by docs/commands/ (issue 32).

Pure data (no imports): `commands/_help.py` draws the help from it, `scripts/gen_docs.py` the
reference pages, and tests/cli/test_help_groups.py checks that every option of every command is in
exactly one group, so a new option cannot be left out.

Per command (its path, as typed): the groups in the order shown, each with its options (long flag)
in the order shown, the common case first: the group used most leads (probe's Tensors, profile's
Measurement, compare's and nan-bisect's Inputs), the shared groups keep the order a user thinks in
(CANONICAL below), a command's own groups stand between them. `--help` is not listed: it closes the
last group of every command.
"""
from __future__ import annotations

from typing import Dict, Tuple

Groups = Tuple[Tuple[str, Tuple[str, ...]], ...]

INPUTS = ("--inputs", "--samples", "--seed", "--val-range", "--shape")
DECODING = ("--preprocess", "--preprocess-set", "--raw-dtype", "--raw-shape")
RUNTIME = ("--providers", "--opt-level", "--intra-op-threads", "--custom-op-lib", "--device", "--provider-option",
           "--ep-library", "--ep-policy")
RUNS_MODEL = (*RUNTIME, "--rename-duplicate-nodes")
"""The runtime group of the commands that run a model (validate reports duplicate names instead)."""
SCALE_OUT = ("--workers", "--executor", "--address", "--worker-memory")
REPORTS = ("--json", "--format", "--html", "--junit", "--model-explorer")
SEQUENCE = ("--sequence", "--state", "--init-state", "--steps", "--chunk")
FALLBACK = ("--fallback-plan", "--target", "--max-nodes", "--max-runs", "--write-model", "--exclude-list")

CANONICAL = ("Inputs", "Gates", "Layers", "Fix-it", "Sequence and decode", "Runtime", "Scale-out", "Output")
"""The shared groups, in this order wherever they appear (a command's own groups may stand between)."""

HELP_GROUPS: Dict[str, Groups] = {
    "mi": (
        ("Run", ("--config", "--debug")),
        ("Output", ("--quiet", "--verbose", "--no-color", "--wide", "--columns", "--version")),
    ),
    "mi compare": (
        ("Inputs", (*INPUTS, "--golden", "--rtol", "--atol", "--map", "--labels", *DECODING)),
        ("Gates", ("--min-cosine", "--max-abs", "--max-rel", "--min-sqnr", "--min-top1", "--min-top5",
                   "--min-accuracy", "--max-accuracy-drop", "--require-provider")),
        ("Layers", ("--layers", "--layer-min-cosine", "--layer-max-abs", "--layer-min-sqnr", "--gate-layers",
                    "--isolate", "--worst", "--group-by", "--granularity", "--layer-atol", "--capture",
                    "--max-memory", "--no-observer-check")),
        ("Fix-it", (*FALLBACK, "--bisect-optimizers", "--simulated")),
        ("Sequence and decode", (*SEQUENCE, "--decision-output", "--decode", "--prompt", "--teacher-forced",
                                 "--jsonl", "--resume", "--repro", "--allow-nonfinite")),
        ("Runtime", (*RUNS_MODEL, "--a-providers", "--b-providers", "--a-device", "--b-device", "--a-opt-level",
                     "--b-opt-level")),
        ("Scale-out", SCALE_OUT),
        ("Output", (*REPORTS, "--no-per-sample")),
    ),
    "mi probe": (
        ("Tensors", ("--select", "--list", "--per-sample", "--group-by", "--hist-sample", "--channel-axis",
                     "--no-channels", "--capture-budget")),
        ("Inputs", INPUTS),
        ("Gates", ("--quant-ranges", "--max-saturation", "--reference", "--break-on", "--dump", "--dump-max-bytes",
                   "--require-provider")),
        ("Sequence and decode", (*SEQUENCE, "--per-step")),
        ("History and plugins", ("--history", "--since", "--no-history", "--history-dir", "--keep-runs",
                                 "--plugin")),
        ("Runtime", RUNS_MODEL),
        ("Scale-out", SCALE_OUT),
        ("Output", REPORTS),
    ),
    "mi nan-bisect": (
        ("Inputs", INPUTS),
        ("Search", ("--all", "--deep", "--simulate", "--examples", "--group-by", "--checkpoints", "--max-memory")),
        ("Gates", ("--require-provider",)),
        ("Fix-it", (*FALLBACK, "--reference")),
        ("Sequence and decode", SEQUENCE),
        ("Runtime", RUNS_MODEL),
        ("Scale-out", SCALE_OUT),
        ("Output", (*REPORTS, "--jsonl", "--resume", "--overwrite", "--repro")),
    ),
    "mi fix": (
        ("Inputs", (*INPUTS, "--map", "--labels", "--calibration", *DECODING)),
        ("Targets and remedies", ("--target", "--remedies", "--max-nodes", "--max-runs", "--polish")),
        ("Runtime", RUNTIME),
        ("Scale-out", ("--workers",)),
        ("Output", (*REPORTS, "--write-model", "--export", "--exclude-list", "--journal", "--resume")),
    ),
    "mi profile": (
        ("Measurement", ("--against", "--runs", "--warmup", "--top", "--group-by", "--trace", "--no-memory-stats")),
        ("Inputs", INPUTS),
        ("Gates", ("--max-latency", "--min-speedup", "--require-provider")),
        ("Runtime", RUNS_MODEL),
        ("Output", REPORTS),
    ),
    "mi validate": (
        ("Inputs", ("--against", "--input-range")),
        ("Gates", ("--fail-on", "--min-weight-sqnr", "--large-initializer-mb")),
        ("Rules", ("--list-rules", "--disable", "--severity", "--strict")),
        ("Runtime", RUNTIME),
        ("Output", ("--json", "--format", "--sarif", "--html", "--junit", "--model-explorer")),
    ),
    "mi inspect": (
        ("View", ("--depth", "--find", "--node", "--diff")),
        ("Output", REPORTS),
    ),
    "mi report": (
        ("Regressions", ("--diff", "--tolerance")),
        ("Output", ("--json", "--format", "--html", "--title", "--map", "--junit", "--model-explorer")),
    ),
    "mi run": (
        ("Steps", ("--only", "--skip", "--keep-going")),
        ("Scale-out", ("--workers", "--executor", "--address", "--worker-memory")),
        ("Output", REPORTS),
    ),
    "mi inputs make": (
        ("Samples", ("--model", "--out", "--count", "--force", "--seed", "--val-range", "--shape")),
        ("Inputs", ("--inputs", *DECODING)),
        ("Output", REPORTS),
    ),
    "mi inputs show": (
        ("Inputs", ("--model", "--limit", *DECODING)),
        ("Output", REPORTS),
    ),
    "mi config schema": (
        ("Output", ("--out", "--check")),
    ),
}

SEE_ALSO: Dict[str, str] = {
    "mi": "index.md",
    "mi compare": "guide/compare.md",
    "mi probe": "guide/probe.md",
    "mi nan-bisect": "guide/nan-bisect.md",
    "mi fix": "guide/fix.md",
    "mi profile": "guide/profile.md",
    "mi validate": "guide/validate.md",
    "mi inspect": "guide/inspect.md",
    "mi report": "guide/report.md",
    "mi run": "guide/run.md",
    "mi inputs": "guide/inputs-command.md",
    "mi config": "guide/config.md",
}
"""The guide page (under docs/) of each command; a subcommand shares its parent's."""


def see_also(path: str) -> str:
    """The docs page of the command `path` ('mi inputs make' -> its parent's), '' when it has none."""
    while path:
        if path in SEE_ALSO:
            return SEE_ALSO[path]
        path = path.rpartition(" ")[0]
    return ""
