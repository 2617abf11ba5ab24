"""Options of `mi compare` (and `mi nan-bisect`) that go from diagnosis to fix (issue 18):
--fallback-plan with its targets, --bisect-optimizers, --labels with the accuracy gates."""
from __future__ import annotations

from typing import Any, Dict, Optional

import click

from ._options import compose


def fallback_options(func: Any) -> Any:
    """--fallback-plan and what the plan must reach / where it goes (shared by compare and nan-bisect)."""
    return compose(
        click.option("--fallback-plan", is_flag=True,
                     help="Moved to `mi fix` (an alias for one release): find the fewest nodes to keep in float "
                          "(QDQ MODEL_B) or fp32 (fp16 model) so that every --target holds, verified on the samples."),
        click.option("--target", "targets", multiple=True, metavar="METRIC>=V",
                     help="With --fallback-plan (moved to `mi fix --target`): what the plan must reach over all "
                          "samples, e.g. 'cosine>=0.995', 'top1>=0.99', 'logits:max_abs<=0.1'. Repeatable "
                          "(default cosine>=0.995)."),
        click.option("--max-nodes", type=click.IntRange(min=1), default=10, show_default=True,
                     help="With --fallback-plan (moved to `mi fix --max-nodes`): most candidates the plan may add: "
                          "a QDQ node with the nodes that share its quantisers (excluded together, as "
                          "quantize_static would), or fp16 nodes blocked."),
        click.option("--max-runs", type=click.IntRange(min=3), default=50, show_default=True,
                     help="With --fallback-plan (moved to `mi fix --max-runs`): most full-model evaluations (a session "
                          "build and every sample) the search may use."),
        click.option("--write-model", type=click.Path(dir_okay=False), metavar="FILE",
                     help="With --fallback-plan (moved to `mi fix --write-model`): write the patched model (the plan "
                          "applied) here; its targets are re-checked from the file."),
        click.option("--exclude-list", type=click.Path(dir_okay=False), metavar="FILE",
                     help="With --fallback-plan (moved to `mi fix --exclude-list`, `--export`): write the node list as "
                          ".json/.yaml: nodes_to_exclude for onnxruntime's quantize_static, "
                          "node_block_list for onnxconverter_common's float16 converter."),
    )(func)


def remedy_options(func: Any) -> Any:
    return compose(
        fallback_options,
        click.option("--bisect-optimizers", is_flag=True,
                     help="Name the onnxruntime graph transformer(s) that make B's outputs differ from A's settings "
                          "(use with --a-opt-level/--b-opt-level or --a-providers/--b-providers)."),
        click.option("--simulated", is_flag=True,
                     help="Also run MODEL_B with optimisations off (its QDQ arithmetic) and show, per output and "
                          "layer, that error beside the deployed kernels' error, with the likely cause of a gap."),
        click.option("--labels", type=click.Path(dir_okay=False), metavar="FILE",
                     help="Labels (CSV sample,label or JSON {sample: label}): top-1/top-5 accuracy of A and B, the "
                          "drop with a bootstrap 95% interval, and the samples that flipped."),
        click.option("--min-accuracy", type=float, metavar="FRACTION",
                     help="Fail when B's top-1 accuracy against --labels is below this (0.9 = 90%)."),
        click.option("--max-accuracy-drop", type=float, metavar="FRACTION",
                     help="Fail when top-1 accuracy drops from A to B by more than this (0.015 = 1.5 points)."),
    )(func)


def build_fallback_config(params: Dict[str, Any]) -> Optional[Any]:
    """RemedyConfig from the flags, or None without --fallback-plan (the plan flags then refuse)."""
    from pathlib import Path

    from ..errors import UsageError
    from ..remedy.config import RemedyConfig
    from ..serialize import check_writable

    if not params.get("fallback_plan"):
        used = [f for f in ("targets", "write_model", "exclude_list") if params.get(f)]
        if used:
            flag = f"--{used[0].rstrip('s').replace('_', '-')}"
            raise UsageError(f"{flag} needs --fallback-plan, which moved to `mi fix FP32 QUANTISED ... {flag} ...`")
        return None
    for flag in ("write_model", "exclude_list"):
        if params.get(flag):
            check_writable(params[flag], f"--{flag.replace('_', '-')}")
    click.echo(MOVED, err=True)
    return RemedyConfig(targets=tuple(params.get("targets") or ("cosine>=0.995",)),
                        max_nodes=params.get("max_nodes") or 10, max_runs=params.get("max_runs") or 50,
                        write_model=Path(params["write_model"]) if params.get("write_model") else None,
                        exclude_list=Path(params["exclude_list"]) if params.get("exclude_list") else None)


MOVED = ("note: --fallback-plan moved to `mi fix FP32 QUANTISED --inputs ... --target ...` (cheaper remedies than "
         "float, exports for onnxruntime, NNCF and ModelOpt, targets on accuracy); this alias stays for one release")
"""Printed on stderr by every run of the alias (issue 44)."""

REQUEST_FLAGS = ("fallback_plan", "targets", "write_model", "exclude_list", "bisect_optimizers", "simulated",
                 "labels", "min_accuracy", "max_accuracy_drop")
"""The flags that ask for something (--max-nodes and --max-runs have defaults and only tune --fallback-plan)."""


def build_remedy_request(params: Dict[str, Any]) -> Any:
    """RemedyRequest from the flags of `mi compare`; None when none of them was given (the remedy
    engine is then not imported: ~20 ms of every plain comparison, issue 16)."""
    if all(params.get(flag) in (None, False, (), "") for flag in REQUEST_FLAGS):
        return None
    from pathlib import Path

    from ..errors import UsageError
    from ..remedy.config import RemedyRequest

    labels = params.get("labels")
    if labels and not Path(labels).is_file():
        raise UsageError(f"--labels {labels}: file not found")
    return RemedyRequest(fallback=build_fallback_config(params), bisect_optimizers=bool(params.get("bisect_optimizers")),
                         labels=Path(labels) if labels else None, min_accuracy=params.get("min_accuracy"),
                         max_accuracy_drop=params.get("max_accuracy_drop"), simulated=bool(params.get("simulated")))
