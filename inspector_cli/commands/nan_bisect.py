"""`mi nan-bisect`: where NaN/Inf is born, for which samples, and why."""
from __future__ import annotations

from typing import Any

import click

from ._help import GroupedCommand
from ._options import (ByteSize, executor_options, input_options, model_argument, placement_options,
                       refused_model_options, report_options, runtime_options)
from ..render.safe import visible
from ._output import app_state, check_report_paths, emit, progress_bar
from ._scope_options import apply_group_by, group_by_option
from ._sequence_options import nan_sequence_options, run_nan_sequence
from ._remedy_options import build_fallback_config, fallback_options


@click.command("nan-bisect", cls=GroupedCommand)
@model_argument("model")
@input_options
@click.option("--max-memory", type=ByteSize(), metavar="SIZE",
              help="Memory for captured tensors per process, e.g. 512M (default: a quarter of the available "
                   "memory). Below what exposing every tensor needs, a layered scan and span replays are used.")
@click.option("--checkpoints", type=click.IntRange(min=1), default=16, show_default=True,
              help="Checkpoints of the layered scan (at most one per 8 nodes; fewer when the budget "
                   "cannot hold them).")
@click.option("--all", "all_origins", is_flag=True, help="List every origin, not only the first.")
@click.option("--deep", is_flag=True,
              help="Also find NaN/Inf intermediates that never reach the outputs (masked by Where, Max, IsNaN...).")
@click.option("--simulate", type=click.Choice(["fp16"]),
              help="On an fp32 model: the first tensors that would leave the fp16 range or flush to zero.")
@click.option("--repro", "repro_dir", type=click.Path(file_okay=False),
              help="Write a repro bundle per origin node here: one-node model, inputs .npz, replay commands.")
@click.option("--jsonl", type=click.Path(dir_okay=False), metavar="PATH",
              help="Write one JSON line per sample (flushed as each sample completes). An existing non-empty "
                   "file is refused (exit 2) unless --resume or --overwrite.")
@click.option("--resume", is_flag=True, help="Skip the samples already recorded in --jsonl, append the rest.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --jsonl file (its records are lost).")
@executor_options
@nan_sequence_options
@click.option("--examples", type=click.IntRange(min=1), default=5, show_default=True,
              help="Example samples kept per origin group.")
@group_by_option
@fallback_options
@click.option("--reference", type=click.Path(exists=True, dir_okay=False), metavar="FP32.onnx",
              help="With --fallback-plan: the fp32 model MODEL was converted from (the block list is found by "
                   "converting it again with onnxconverter_common's float16 converter).")
@runtime_options
@placement_options
@refused_model_options
@report_options
@click.pass_context
def nan_bisect(ctx: click.Context, model: str, **params: Any) -> int:
    """Find the node where NaN/Inf values are born in MODEL, for each input sample.

    The origin is the first node, in topological order, whose computed inputs are all finite
    and one of whose outputs is not. For each one: op type, attributes, input statistics and a
    rule-based hint (division by zero, Log of <= 0, Exp overflow, fp16 overflow, 0*Inf, Inf-Inf,
    zero variance, corrupted weights...). Weights holding NaN/Inf are reported first.
    Exit 0 when nothing non-finite was found, 1 when something was.

    \b
    Examples:
      mi nan-bisect model.onnx --inputs data/
      mi nan-bisect model_fp16.onnx --inputs data/ --workers 2 \\
          --jsonl nan.jsonl --resume
      mi nan-bisect model.onnx --inputs /shared/data/ --executor ray \\
          --address auto --jsonl nan.jsonl
      mi nan-bisect model.onnx --inputs data/ --simulate fp16
      mi nan-bisect model.onnx --inputs data/ --deep --repro repro/
      mi nan-bisect rnn_fp16.onnx --sequence chunks/ --steps 1000 \\
          --repro repro/
      mi nan-bisect fp16.onnx --inputs data/ --fallback-plan \\
          --reference fp32.onnx --write-model fixed.onnx
    """
    from ..errors import UsageError
    from ..nanbisect.config import NanBisectConfig, Simulate
    from ..render.nan_bisect_view import nan_bisect_view
    from ..render.rollup_view import with_rollup
    from ..workflows.nan_bisect import nan_bisect as run
    from ._options import build_executor, build_runtime, build_synthetic

    state = app_state(ctx)
    fallback = build_fallback_config(params)
    if fallback is not None and not params.get("reference"):
        raise UsageError("--fallback-plan needs --reference FP32.onnx (the model MODEL was converted from)")
    if params.get("reference") and fallback is None:
        raise UsageError("--reference needs --fallback-plan")
    config = NanBisectConfig(
        inputs=tuple(params.get("inputs") or ()),
        synthetic=build_synthetic(params),
        runtime=build_runtime(params),
        max_memory=params.get("max_memory"),
        checkpoints=params["checkpoints"],
        all_origins=bool(params.get("all_origins")),
        deep=bool(params.get("deep")),
        simulate=Simulate(params.get("simulate") or "none"),
        repro_dir=params.get("repro_dir"),
        jsonl=params.get("jsonl"),
        resume=bool(params.get("resume")),
        overwrite=bool(params.get("overwrite")),
        executor=build_executor(params),
        examples=params["examples"],
        require_provider=params.get("require_provider"),
    )
    check_report_paths({"--json": params.get("json_path"), "--jsonl": params.get("jsonl")})
    if params.get("sequence"):  # the first non-finite step, then its origin node (issue 19)
        return run_nan_sequence(ctx, model, params, config)
    show_progress = params.get("json_path") != "-" and params.get("fmt") == "table"
    def report_static(issues: Any) -> None:
        # weights holding NaN/Inf are known before any sample runs: say so at once (stderr)
        if not state.quiet:
            for issue in issues:
                click.echo(visible(f"warning: weight '{issue.tensor}' holds {issue.nan} NaN and {issue.inf} Inf "
                                   f"values (read by {', '.join(issue.consumers[:3]) or 'no node'})"), err=True)

    with progress_bar(state, "nan-bisect", enabled=show_progress) as progress:
        result = run(model, config, progress=progress, on_static=report_static)
    if fallback is not None:
        from ..workflows.nan_bisect import fp16_fallback_plan

        result = fp16_fallback_plan(result, params["reference"], config, fallback)
    return emit(ctx, apply_group_by(result, params), with_rollup(nan_bisect_view), fmt=params["fmt"],
                json_path=params.get("json_path"))
