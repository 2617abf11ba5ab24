"""`mi compare`: where, and by how much, two models' outputs diverge, with gates for CI."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import click

from ._help import GroupedCommand
from ._compare_options import build_layer_config, build_runtimes, layer_options, model_runtime_options
from ._options import (NamePair, NumberOrNamedNumber, build_executor, build_reader_options, build_runtime,
                       build_synthetic, compose, decoding_options, executor_options, input_options, model_argument,
                       name_pairs, placement_options, refused_model_options, report_options, runtime_options)
from ._output import app_state, check_report_paths, emit, progress_bar
from ._scope_options import apply_group_by, group_by_option
from ._sequence_options import compare_sequence_options, run_compare_sequence, wants_compare_sequence
from ._remedy_options import build_remedy_request, remedy_options

GATE_HELP = {
    "min-cosine": "Fail when cosine similarity is below this (per output and sample).",
    "max-abs": "Fail when max |b - a| exceeds this.",
    "max-rel": "Fail when max relative error exceeds this.",
    "min-sqnr": "Fail when SQNR (dB) is below this.",
    "min-top1": "Fail when top-1 overlap is below this.",
    "min-top5": "Fail when top-5 overlap is below this.",
}


def gate_options(func: Any) -> Any:
    return compose(*[
        click.option(f"--{flag}", f"gate_{flag.replace('-', '_')}", multiple=True, type=NumberOrNamedNumber(),
                     help=f"{text} OUTPUT=VALUE limits it to one output (glob allowed). Repeatable.")
        for flag, text in GATE_HELP.items()
    ])(func)


@click.command("compare", cls=GroupedCommand)
@model_argument("model_a")
@click.argument("model_b", required=False, type=click.Path(exists=True, dir_okay=False))
@input_options
@decoding_options
@gate_options
@click.option("--map", "name_map", multiple=True, type=NamePair(),
              help="Pair a tensor of A with one of B whose name differs: A_NAME=B_NAME (outputs, inputs, and with "
                   "--layers any tensor). Repeatable.")
@click.option("--no-per-sample", is_flag=True, help="Do not keep per-sample metrics in the JSON result.")
@layer_options
@group_by_option
@compare_sequence_options
@remedy_options
@runtime_options
@model_runtime_options
@placement_options
@refused_model_options
@executor_options
@report_options
@click.pass_context
def compare(ctx: click.Context, model_a: str, model_b: "str | None", **params: Any) -> int:
    """Compare MODEL_B against the reference MODEL_A on the same inputs.

    Prints, per output, the metrics over all samples (data-set value, worst and mean sample) and
    which gates failed on how many samples. With --layers, every paired intermediate tensor too,
    in MODEL_A's topological order, with the first divergence and the worst layers. With --golden,
    MODEL_A against saved reference outputs. Exit 0 when every gate passed, 1 when any failed.

    \b
    Examples:
      mi compare fp32.onnx int8.onnx --inputs data/ --min-cosine 0.99 \\
          --max-abs 0.1 --json out.json
      mi compare fp32.onnx int8.onnx --inputs data/ --layers all \\
          --layer-min-cosine 0.98 --isolate worst:5
      mi compare model.onnx --golden test_data_set_0/
      mi compare fp32.onnx int8.onnx --inputs /shared/data/ \\
          --executor ray --address auto
      mi compare vad.onnx vad_int8.onnx --sequence chunks/ \\
          --min-cosine 0.99 --jsonl steps.jsonl
      mi compare gpt.onnx gpt_int4.onnx --decode --prompt ids.json --steps 64
    """
    from ..compare.config import CompareConfig
    from ..diff.gates import GATE_FLAGS, parse_gates
    from ..errors import UsageError
    from ..workflows.compare import compare_models

    if wants_compare_sequence(params):  # sequence/decode mode: its own orchestration (issue 19)
        return run_compare_sequence(ctx, model_a, model_b, params)
    state = app_state(ctx)
    check_report_paths({"--json": params.get("json_path")})
    golden = params.get("golden")
    if bool(model_b) == bool(golden):
        raise UsageError("give MODEL_B or --golden DIR (exactly one)" if not golden else
                         "--golden replaces MODEL_B: give one model with it")
    gates = parse_gates({flag: params.get(f"gate_{flag.replace('-', '_')}") or () for flag in GATE_FLAGS})
    runtime_a, runtime_b = build_runtimes(params, build_runtime(params))
    layers = build_layer_config(params)
    remedy = build_remedy_request(params)
    config = CompareConfig(
        inputs=tuple(params.get("inputs") or ()),
        synthetic=build_synthetic(params),
        runtime=runtime_a,
        runtime_b=runtime_b,
        gates=tuple(gates),
        output_map=name_pairs(params.get("name_map") or ()),
        per_sample=not params.get("no_per_sample"),
        reader_options=build_reader_options(params),
        layers=layers,
        golden=golden,
        executor=build_executor(params),
        require_provider=params.get("require_provider"),
        tolerance=_tolerance(params),
    )
    show_progress = params.get("json_path") != "-" and params.get("fmt") == "table"
    with progress_bar(state, "comparing", enabled=show_progress) as progress:
        result = compare_models(model_a, model_b, config, progress=progress, remedy=remedy)
    return emit(ctx, apply_group_by(result, params), _view, fmt=params["fmt"],
                json_path=params.get("json_path"))


def _tolerance(params: Dict[str, Any]) -> "Optional[Tuple[float, float]]":
    """(rtol, atol) when either is given (the other 0), else None."""
    rtol, atol = params.get("rtol"), params.get("atol")
    if rtol is None and atol is None:
        return None
    return (float(rtol or 0.0), float(atol or 0.0))


def _view(result: Any) -> Any:
    """The terminal view of `result`; the renderers are imported only when a view is drawn (a CI
    gate's `-q --json` run draws none: issue 16)."""
    from ..render.compare_view import compare_view
    from ..render.rollup_view import with_rollup

    return with_rollup(compare_view)(result)
