"""`mi validate`: lint an ONNX model (loading, checker and shapes, integrity, runtime support,
quantisation, optimisation hints, structure against a reference) with stable rule IDs."""
from __future__ import annotations

from typing import Any, Optional

import click

from ._help import GroupedCommand
from ._options import build_runtime, report_options_with, runtime_options
from ._output import app_state, check_report_paths, emit, progress_bar

LEVELS = ("error", "warning", "info")


@click.command("validate", cls=GroupedCommand)
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--against", type=click.Path(exists=True, dir_okay=False), metavar="OTHER.onnx",
              help="Reference model (e.g. the fp32 original): structural differences, and dequantised weights "
                   "compared with its float weights (SQNR per tensor).")
@click.option("--input-range", multiple=True, metavar="[NAME:]LO,HI",
              help="Values an input really takes, e.g. input:0,255; checks that the input QuantizeLinear covers "
                   "them. Without NAME: every input. Repeatable.")
@click.option("--fail-on", type=click.Choice(LEVELS), default="error", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.option("--disable", multiple=True, metavar="RULE",
              help="Switch a rule off: MI305, a family MI3xx, or a family name (hints). Repeatable.")
@click.option("--severity", multiple=True, metavar="RULE=LEVEL",
              help="Re-level a rule (or family): MI210=error; LEVEL error, warning, info or off. Repeatable.")
@click.option("--min-weight-sqnr", type=float, default=20.0, show_default=True, metavar="DB",
              help="With --against: warn (MI510) when a dequantised weight's SQNR is below this.")
@click.option("--large-initializer-mb", type=click.FloatRange(min=0), default=256.0, show_default=True,
              metavar="MB", help="Report initializers larger than this (MI408).")
@click.option("--sarif", "sarif_path", type=click.Path(dir_okay=False), metavar="PATH",
              help="Also write the findings as SARIF 2.1.0 to PATH (for code-scanning uploads).")
@click.option("--strict", is_flag=True, default=False,
              help="Where onnx's checker and onnxruntime disagree (an op only onnxruntime registers, a declared "
                   "shape inference contradicts, an output without a shape field), keep the checker's view: "
                   "error. By default such a finding follows onnxruntime when it loads the model.")
@click.option("--list-rules", is_flag=True, help="List every rule (ID, severity, family, title) and exit; "
                                                 "-v adds the help text.")
@runtime_options
@report_options_with("sarif")
@click.pass_context
def validate(ctx: click.Context, model: Optional[str], **params: Any) -> int:
    """Check MODEL for defects before anything runs it: is this model sound?

    Findings carry stable rule IDs (MI1xx loading, MI2xx checker and shapes, MI3xx graph
    integrity, MI4xx runtime support, MI5xx quantisation, MI6xx hints, MI7xx --against).
    A file that is not a loadable model is a finding too. Exit 0 when no finding is at or above
    --fail-on, 1 otherwise.

    \b
    Examples:
      mi validate model.onnx
      mi validate int8.onnx --input-range input:0,255 --fail-on warning \\
          --format sarif > mi.sarif
      mi validate int8.onnx --against fp32.onnx
      mi validate --list-rules
    """
    if params.get("list_rules"):
        return _list_rules(ctx, params["fmt"])
    if model is None:
        raise click.UsageError("missing argument 'MODEL' (or use --list-rules)")
    from ..validate.config import ValidateConfig, parse_input_range, parse_rule_settings
    from ..render.sarif import sarif_text
    from ..render.validate_view import validate_view
    from ..results.base import Severity
    from ..serialize import write_atomic
    from ..workflows.validate import validate_model

    state = app_state(ctx)
    check_report_paths({"--json": params.get("json_path"), "--sarif": params.get("sarif_path")})
    disable, severity = parse_rule_settings(params.get("disable") or (), params.get("severity") or ())
    config = ValidateConfig(
        runtime=build_runtime(params), fail_on=Severity(params["fail_on"]), disable=disable, severity=severity,
        input_ranges=tuple(parse_input_range(r) for r in params.get("input_range") or ()),
        against=params.get("against"), min_weight_sqnr=params["min_weight_sqnr"],
        large_initializer_mb=params["large_initializer_mb"], strict=bool(params.get("strict")))
    show_progress = params.get("json_path") != "-" and params.get("fmt") == "table"
    with progress_bar(state, "validating", enabled=show_progress) as progress:
        result = validate_model(model, config, progress=progress)
    writers = {}
    if params.get("sarif_path"):
        writers["sarif"] = lambda r: write_atomic(params["sarif_path"], sarif_text(r) + "\n")
    return emit(ctx, result, validate_view, fmt=params["fmt"], json_path=params.get("json_path"),
                extra_writers=writers, formatters={"sarif": sarif_text})


def _list_rules(ctx: click.Context, fmt: str) -> int:
    from ..render.validate_view import rules_view
    from ..validate.catalog import all_rules

    rules = all_rules()
    if fmt in ("json", "sarif"):
        import json

        from ..render.sarif import rule_descriptor
        from ..results.codec import to_jsonable

        data = [rule_descriptor(r) for r in rules] if fmt == "sarif" else to_jsonable(rules)
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    view = rules_view(rules, verbose=app_state(ctx).verbose > 0)
    if fmt == "markdown":
        from ..render.text import view_to_markdown

        click.echo(view_to_markdown(view), nl=False)
    elif fmt == "csv":
        from ..render.text import view_to_csv

        click.echo(view_to_csv(view), nl=False)
    else:
        from ..render.console import make_console, print_view
        from ..render.fit import Layout

        state = app_state(ctx)
        print_view(view, make_console(no_color=state.no_color), Layout(state.wide, state.columns))
    return 0
