"""`mi fix`: the cheapest remedies that make a quantised model meet its targets (issue 44)."""
from __future__ import annotations

from typing import Any

import click

from ._help import GroupedCommand
from ._options import (NamePair, build_reader_options, build_runtime, build_synthetic, decoding_options,
                       input_options, model_argument, name_pairs, report_options, runtime_options)
from ._output import check_report_paths, emit


@click.command("fix", cls=GroupedCommand)
@model_argument("fp32")
@model_argument("quantised")
@input_options
@decoding_options
@click.option("--map", "name_map", multiple=True, type=NamePair(),
              help="Pair an output of FP32 with one of QUANTISED by name, 'A_NAME=B_NAME'. Repeatable.")
@click.option("--target", "targets", multiple=True, metavar="METRIC>=V",
              help="What the plan must reach over all samples: agreement with FP32 ('cosine>=0.995', "
                   "'top1>=0.99', 'logits:max_abs<=0.1') or accuracy against --labels ('acc1>=0.9', "
                   "'acc1_drop<=0.01', 'acc5_drop<=0.005'). Repeatable (default cosine>=0.995).")
@click.option("--labels", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="Labels (CSV sample,label or JSON {sample: label}) for acc1/acc5 targets; bound to the output "
                   "holding class scores (a classifier's probabilities beside its label, a ZipMap).")
@click.option("--remedies", metavar="LIST",
              help="Remedies the target runtime supports, e.g. 'a16,per-channel' (default: calibration, "
                   "per-channel, a16 and float, tried cheapest first).")
@click.option("--calibration", multiple=True, type=click.Path(exists=True), metavar="DIR",
              help="Samples another calibration (percentile, entropy) is measured on: the ones the model was "
                   "calibrated with (default: --inputs). Repeatable.")
@click.option("--max-nodes", type=click.IntRange(min=1), default=10, show_default=True,
              help="Candidates the bottom-up search may add before it reverts groups top down.")
@click.option("--max-runs", type=click.IntRange(min=3), default=50, show_default=True,
              help="Full-model evaluations of the bottom-up search; the later steps may use up to 4x it.")
@click.option("--polish", type=click.IntRange(min=0), default=0, show_default=True, metavar="RUNS",
              help="Once a plan meets the targets, spend up to RUNS more runs raising their metrics toward fp32's: "
                   "16-bit activations on the nodes the plan left alone, then float for what they cannot buy.")
@click.option("--write-model", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the plan's model here (standing alone); its targets are re-checked from the file.")
@click.option("--export", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the plan for each quantiser (.json/.yaml): onnxruntime nodes_to_exclude, "
                   "TensorQuantOverrides and extra_options; NNCF IgnoredScope; ModelOpt --nodes_to_exclude.")
@click.option("--exclude-list", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write onnxruntime's nodes_to_exclude and extra_options alone (.json/.yaml); fp16: the "
                   "node_block_list of the float16 converter.")
@click.option("--journal", type=click.Path(dir_okay=False), metavar="FILE",
              help="Record every trial here (JSON lines) so that a stopped search can be resumed.")
@click.option("--resume", is_flag=True, help="Read --journal first: its trials are not run again.")
@click.option("--workers", type=click.IntRange(min=0), default=0, show_default=True,
              help="Worker processes for independent trials (0: this process).")
@runtime_options
@report_options
@click.pass_context
def fix(ctx: click.Context, fp32: str, quantised: str, **params: Any) -> int:
    """Find the cheapest remedies that make QUANTISED meet every --target against FP32.

    Per node, in cost order: another calibration of its tensors, per-channel weights, 16-bit
    activations (A16W8), both, and only then float; verified on the samples, exported for
    onnxruntime, NNCF and ModelOpt. A spread or catastrophic error is answered by reverting groups
    (stages, blocks) top down. QUANTISED may also be an fp16 conversion of FP32 (its fp32 block
    list). Exit 0 when a plan meets the targets, 1 when none does (the best found is shown).

    \b
    Examples:
      mi fix fp32.onnx int8.onnx --inputs data/ --target 'cosine>=0.999'
      mi fix fp32.onnx int8.onnx --inputs val/ --labels val.csv \\
          --target 'acc1_drop<=0.01' --calibration calib/ --export plan.json
      mi fix fp32.onnx int8.onnx --inputs data/ --remedies a16,per-channel \\
          --write-model fixed.onnx --journal fix.jsonl --resume
    """
    from pathlib import Path

    from ..compare.config import CompareConfig
    from ..errors import ConfigError, UsageError
    from ..remedy.config import FixConfig
    from ..serialize import check_writable
    from ..workflows.fix import fix_models

    check_report_paths({"--json": params.get("json_path")})
    for flag in ("write_model", "export", "exclude_list"):
        if params.get(flag):
            check_writable(params[flag], f"--{flag.replace('_', '-')}")
    if params.get("resume") and params.get("journal") and not Path(params["journal"]).is_file():
        raise UsageError(f"--resume: {params['journal']} does not exist (nothing to resume)")
    compare = CompareConfig(inputs=tuple(params.get("inputs") or ()), synthetic=build_synthetic(params),
                            runtime=build_runtime(params), output_map=name_pairs(params.get("name_map") or ()),
                            reader_options=build_reader_options(params))
    remedies = tuple(r for r in (params.get("remedies") or "").split(",") if r.strip())
    path = lambda key: Path(params[key]) if params.get(key) else None  # noqa: E731
    try:
        config = FixConfig(compare=compare, targets=tuple(params.get("targets") or ("cosine>=0.995",)),
                           remedies=remedies, labels=path("labels"), calibration=tuple(params.get("calibration") or ()),
                           max_nodes=params["max_nodes"], max_runs=params["max_runs"], write_model=path("write_model"),
                           export=path("export"), exclude_list=path("exclude_list"), journal=path("journal"),
                           resume=bool(params.get("resume")), workers=params["workers"],
                           polish=params["polish"])
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    result = fix_models(fp32, quantised, config)
    return emit(ctx, result, _view, fmt=params["fmt"], json_path=params.get("json_path"))


def _view(result: Any) -> Any:
    from ..render.fix_view import fix_view

    return fix_view(result)
