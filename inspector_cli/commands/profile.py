"""`mi profile`: where the time and memory of a model go, and what another version changed."""
from __future__ import annotations

from typing import Any, Optional

import click

from ._help import GroupedCommand
from ._options import (build_runtime, build_synthetic, input_options, model_argument, placement_options,
                       refused_model_options, report_options, runtime_options)
from ._output import app_state, check_report_paths, emit, progress_bar


@click.command("profile", cls=GroupedCommand)
@model_argument("model")
@click.option("--against", type=click.Path(exists=True, dir_okay=False), metavar="OTHER.onnx",
              help="Profile a second model (e.g. its int8 version) the same way and compare them.")
@click.option("--runs", type=click.IntRange(min=1), default=20, show_default=True,
              help="Measured runs: profiled, and again without the profiler for end-to-end latency.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True,
              help="Runs dropped before measuring (per session).")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True,
              help="Rows in the top-kernels, memory and comparison tables.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), metavar="PATH",
              help="Write the kept runs as a Chrome trace (Perfetto, chrome://tracing).")
@click.option("--max-latency", type=click.FloatRange(min=0), metavar="MS",
              help="Gate: fail when the p50 end-to-end latency exceeds MS milliseconds.")
@click.option("--min-speedup", type=click.FloatRange(min=0), metavar="X",
              help="Gate (with --against): fail when OTHER's p50 speed-up over MODEL is below X.")
@click.option("--group-by", "group_by", metavar="scope[:DEPTH]",
              help="Show kernel time rolled up by scope first (time share, kernels, FLOP/s), DEPTH levels "
                   "below the model (default 1; 'scope:leaf' for each node's own scope). The roll-up at depth 1 "
                   "is always in the JSON.")
@click.option("--no-memory-stats", is_flag=True,
              help="Skip onnxruntime's per-node memory statistics (saves one extra session).")
@input_options
@runtime_options
@placement_options
@refused_model_options
@report_options
@click.pass_context
def profile(ctx: click.Context, model: str, **params: Any) -> int:
    """Profile MODEL with onnxruntime: per-node latency, op types, critical path, FLOPs and memory.

    Times end-to-end runs without the profiler, then profiled runs (warm-up dropped), and maps the
    kernels onnxruntime ran (its optimised, fused graph) back to MODEL's nodes. With --against,
    both models side by side: per op type speed-up, nodes that got slower, end-to-end speed-up.
    Exit 0 unless a gate (--max-latency, --min-speedup) failed.

    \b
    Examples:
      mi profile model.onnx --runs 50 --warmup 5
      mi profile fp32.onnx --against int8.onnx --top 20 --min-speedup 1.5
      mi profile model.onnx --trace trace.json --json profile.json
      mi profile model.onnx --group-by scope:2
    """
    from ..profile.config import ProfileConfig
    from ..render.profile_view import profile_view
    from ..workflows.profile import profile_model

    state = app_state(ctx)
    group_depth = parse_group_by(params.get("group_by"))
    check_report_paths({"--json": params.get("json_path"), "--trace": params.get("trace_path")})
    config = ProfileConfig(
        inputs=tuple(params.get("inputs") or ()),
        synthetic=build_synthetic(params),
        runtime=build_runtime(params),
        runs=params["runs"],
        warmup=params["warmup"],
        top=params["top"],
        against=params.get("against"),
        trace_path=params.get("trace_path"),
        max_latency_ms=params.get("max_latency"),
        min_speedup=params.get("min_speedup"),
        memory_stats=not params.get("no_memory_stats"),
        group_depth=group_depth,
        group_by=bool(params.get("group_by")),
        require_provider=params.get("require_provider"),
    )
    show_progress = params.get("json_path") != "-" and params.get("fmt") == "table"
    with progress_bar(state, "profiling", enabled=show_progress) as progress:
        result = profile_model(model, config, progress=progress)
    return emit(ctx, result, lambda r: profile_view(r, top=config.top), fmt=params["fmt"],
                json_path=params.get("json_path"))


def parse_group_by(value: Optional[str]) -> Optional[int]:
    """'scope' -> 1, 'scope:3' -> 3, 'scope:leaf' -> None; anything else is a usage error."""
    if not value:
        return 1
    kind, _, depth = value.partition(":")
    if kind != "scope" or (depth and depth != "leaf" and not (depth.isdigit() and int(depth) >= 1)):
        raise click.BadParameter(f"'{value}': expected scope, scope:DEPTH (DEPTH >= 1) or scope:leaf",
                                 param_hint="--group-by")
    return None if depth == "leaf" else int(depth or 1)
