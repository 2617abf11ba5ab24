"""`mi probe`: statistics of chosen tensors over a data set, triggers, history, quantiser ranges, plugins."""
from __future__ import annotations

from typing import Any, Optional

import click

from ._help import GroupedCommand
from ._options import (ByteSize, build_executor, build_runtime, build_synthetic, executor_options, input_options,
                       placement_options, refused_model_options, report_options, runtime_options)
from ._output import app_state, check_report_paths, emit, progress_bar
from ._scope_options import apply_group_by, group_by_option
from ._sequence_options import probe_sequence_options, run_probe_sequence


@click.command("probe", cls=GroupedCommand)
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--list", "list_only", is_flag=True, help="Print every selectable tensor (op type, dtype, shape), or those --select matches; no inference.")
@click.option("--select", "-s", multiple=True, metavar="PATTERN",
              help="Tensors to probe: exact name, glob, 're:REGEX', 'op:Relu[,Conv]' or 'all' (default). Repeatable.")
@input_options
@click.option("--channel-axis", type=int, default=1, show_default=True, help="Axis of channels for dead units.")
@click.option("--no-channels", is_flag=True, help="Do not track channels.")
@click.option("--per-sample", is_flag=True, help="Add one row per tensor and sample.")
@click.option("--break-on", multiple=True, metavar="COND",
              help="Stop at the first sample where a tensor meets COND: nan, inf, 'absmax>1e4', 'zero_frac>0.9', "
                   "terms joined by '&', optional 'GLOB:' prefix. Repeatable (any).")
@click.option("--dump", "dump_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="With --break-on: write the triggering sample's probed tensors and inputs to DIR as .npz.")
@click.option("--dump-max-bytes", type=ByteSize(), default="256M", show_default=True,
              help="Size cap of the tensors written by --dump.")
@click.option("--quant-ranges", is_flag=True,
              help="Check every QuantizeLinear and QLinear op: saturation and share of the integer range used.")
@click.option("--reference", type=click.Path(exists=True, dir_okay=False), metavar="FLOAT_MODEL",
              help="With --quant-ranges: also check the float model's same-named tensors against each quantiser.")
@click.option("--max-saturation", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="Flag (exit 1) a quantiser when more than this share of its values saturate.")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE:CLASS|NAME",
              help="Run a plugin (inspector_cli.plugins.Plugin) on the probed tensors. Repeatable.")
@click.option("--history", "show_history", is_flag=True, help="List stored runs (of MODEL when given) and exit.")
@click.option("--history-dir", type=click.Path(file_okay=False), default=".mi/history", show_default=True,
              help="Where run summaries are stored.")
@click.option("--keep-runs", type=click.IntRange(min=1), default=10, show_default=True,
              help="Runs kept per model and selection; older ones are pruned.")
@click.option("--no-history", is_flag=True, help="Do not store this run.")
@click.option("--since", metavar="last|RUN_ID", help="Show each statistic's change against an earlier run.")
@click.option("--hist-sample", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Histogram (percentiles, outliers) from about N values per tensor and sample instead of all: "
                   "faster on large tensors, no longer rank-exact. 0 counts every value.")
@click.option("--capture-budget", type=ByteSize(), default=None,
              help="Memory for captured tensors at once, e.g. 2G (default: a quarter of the available memory).")
@group_by_option
@probe_sequence_options
@runtime_options
@placement_options
@refused_model_options
@executor_options
@report_options
@click.pass_context
def probe(ctx: click.Context, model: Optional[str], **params: Any) -> int:
    """Statistics of chosen tensors of MODEL over a data set, in fixed memory.

    Per tensor: min, max, mean, std, abs-max, percentiles (p0.1 p1 p50 p99 p99.9, within 0.4 %),
    zero share, NaN/Inf counts, outliers, a histogram, dead channels and all-zero samples. Exit 1
    when a defect is found (NaN/Inf, a met --break-on condition, a saturating quantiser).

    \b
    Examples:
      mi probe model.onnx --list
      mi probe model.onnx --inputs data/ --select 'encoder/*/conv*' \\
          --select op:Relu
      mi probe model.onnx --inputs data/ --select all --break-on nan --dump trig/
      mi probe int8.onnx --inputs data/ --quant-ranges --reference fp32.onnx
      mi probe model.onnx --inputs data/ --select op:Relu --since last
      mi probe model.onnx --select op:Softmax --plugin attention-entropy
      mi probe model.onnx --inputs /shared/data/ --select op:Relu \\
          --executor ray --address auto
      mi probe lstm.onnx --sequence chunks/ --select op:LSTM \\
          --per-step --break-on 'absmax>1e4'
    """
    fmt, json_path = params["fmt"], params.get("json_path")
    check_report_paths({"--json": json_path})
    if params["show_history"]:
        from ..probe.report import list_history

        return emit(ctx, list_history(params["history_dir"], model), _history_view, fmt=fmt, json_path=json_path)
    if model is None:
        raise click.UsageError("MODEL is required (except with --history)")
    if params["list_only"]:
        from ..core.graph import load_model
        from ..probe.report import list_tensors

        listed = list_tensors(load_model(model), tuple(params.get("select") or ()))
        return emit(ctx, listed, _list_view, fmt=fmt, json_path=json_path)
    from ..probe.config import ProbeConfig
    from ..workflows.probe import probe_model

    config = ProbeConfig(
        inputs=tuple(params.get("inputs") or ()), synthetic=build_synthetic(params), runtime=build_runtime(params),
        select=tuple(params.get("select") or ()), channel_axis=None if params["no_channels"] else params["channel_axis"],
        per_sample=params["per_sample"], break_on=tuple(params.get("break_on") or ()), dump_dir=params.get("dump_dir"),
        dump_max_bytes=params["dump_max_bytes"], quant_ranges=params["quant_ranges"], reference=params.get("reference"),
        max_saturation=params["max_saturation"], plugins=tuple(params.get("plugins") or ()),
        history=not params["no_history"], history_dir=params["history_dir"], keep_runs=params["keep_runs"],
        since=params.get("since"), hist_sample=params["hist_sample"], capture_budget=params.get("capture_budget"),
        executor=build_executor(params), require_provider=params.get("require_provider"))
    if params.get("sequence"):  # each step one sample, state fed back (issue 19)
        return run_probe_sequence(ctx, model, params, config)
    state = app_state(ctx)
    with progress_bar(state, "probing", enabled=json_path != "-" and fmt == "table") as progress:
        result = probe_model(model, config, progress=progress)
    return emit(ctx, apply_group_by(result, params), _view, fmt=fmt, json_path=json_path)


# The renderers are imported only when a view is drawn (a `-q --json` run draws none: issue 16).
def _view(result: Any) -> Any:
    from ..render.probe_view import probe_view
    from ..render.rollup_view import with_rollup

    return with_rollup(probe_view)(result)


def _history_view(result: Any) -> Any:
    from ..render.probe_view import history_list_view

    return history_list_view(result)


def _list_view(result: Any) -> Any:
    from ..render.probe_view import tensor_list_view

    return tensor_list_view(result)
