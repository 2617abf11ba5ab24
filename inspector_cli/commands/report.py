"""`mi report`: re-render saved results (HTML, JUnit, Markdown, ...) or diff two runs. No onnxruntime."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import click

from ._help import GroupedCommand
from ._options import report_options
from ._output import check_report_paths, emit, print_result, write_reports


@click.command("report", cls=GroupedCommand)
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--diff", is_flag=True, help="Compare OLD.json and NEW.json: gates flipped, values worse, findings added.")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0.05, show_default=True,
              help="With --diff: relative worsening that counts as a regression (errors, latency, gap of cosine to 1).")
@click.option("--title", default=None, help="Title of the HTML report.")
@click.option("--map", "map_metric", default=None, metavar="METRIC",
              help="Colour the HTML map (scope tree) by this per-node metric of the result, e.g. flops, "
                   "activation_bytes, latency_us.")
@report_options
@click.pass_context
def report(ctx: click.Context, results: Tuple[str, ...], diff: bool, tolerance: float, title: str,
           map_metric: Optional[str], **params: Any) -> int:
    """Render saved JSON results again, or find regressions between two runs.

    \b
    Examples:
      mi report r.json --html r.html
      mi report validate.json compare.json profile.json \\
          --html all.html --junit all.xml
      mi report old.json new.json --diff          # exit 1 on regression
      mi report inspect.json --html map.html --map activation_bytes
    """
    from ..render.html import render_html
    from ..render.junit import junit_xml
    from ..render.views import view_builder
    from ..serialize import read_result, write_atomic
    from ..workflows.report_diff import diff_results

    check_report_paths()
    loaded = [read_result(path) for path in results]
    if diff:
        if len(loaded) != 2:
            raise click.UsageError("--diff takes exactly two results: OLD.json NEW.json")
        result = diff_results(loaded[0], loaded[1], tolerance=tolerance, old_source=results[0], new_source=results[1])
        return emit(ctx, result, view_builder(result.kind), fmt=params["fmt"])
    if len(loaded) == 1 and not title and not map_metric:
        return emit(ctx, loaded[0], view_builder(loaded[0].kind), fmt=params["fmt"])
    if len(loaded) > 1 and (params.get("json_path") or params.get("model_explorer_path")):
        raise click.UsageError("--json and --model-explorer take one result; pass one file (or use --diff)")
    if len(loaded) == 1:
        write_reports(loaded[0], json_path=params.get("json_path"), junit_path=params.get("junit_path"),
                      model_explorer_path=params.get("model_explorer_path"))
    elif params.get("junit_path"):
        write_atomic(params["junit_path"], junit_xml(loaded))
    if params.get("html_path"):
        write_atomic(params["html_path"], render_html(loaded, title=title, map_metric=map_metric))
    codes = [print_result(ctx, result, view_builder(result.kind), fmt=params["fmt"]) for result in loaded]
    return max(codes)
