"""`mi inspect`: the model's map, headless (scope tree, node facts, structural diff). Nothing is run."""
from __future__ import annotations

import gc
from typing import Any, Optional

import click

from ._help import GroupedCommand
from ._options import model_argument, report_options
from ._output import check_report_paths, emit
from ._state import AppState


def _table_only(ctx: click.Context, params: Any) -> bool:
    """Whether the result is only printed as tables: no report file, no JSON on stdout, and not a step
    of `mi run` (whose suite result holds each step's whole result)."""
    reports = ("json_path", "html_path", "junit_path", "model_explorer_path")
    step = isinstance(ctx.obj, AppState) and ctx.obj.suite_step
    return not step and params.get("fmt") in ("table", "markdown", "csv") and not any(params.get(r) for r in reports)


@click.command("inspect", cls=GroupedCommand)
@model_argument("model")
@click.option("--depth", type=click.IntRange(min=0), default=2, show_default=True,
              help="Levels of the scope tree shown (and aligned by --diff).")
@click.option("--find", "find", metavar="PATTERN",
              help="Nodes by scoped-name glob ('layers/*/self_attn/*'), 're:REGEX', 'op:Conv[,Gemm]' or "
                   "'shape:*x512', with their static facts (Q/DQ and QLinear scale and zero point).")
@click.option("--node", "node", metavar="NAME", help="Everything about one node, its producers and consumers.")
@click.option("--diff", "diff", type=click.Path(exists=True, dir_okay=False), metavar="OTHER.onnx",
              help="Align OTHER's scope tree with MODEL's and list, per scope, ops added, removed, replaced "
                   "or fused, Q/DQ inserted and boundary dtype/shape changes (differing scopes first).")
@report_options
@click.pass_context
def inspect(ctx: click.Context, model: str, depth: int, find: Optional[str], node: Optional[str],
            diff: Optional[str], **params: Any) -> int:
    """Show MODEL as a hierarchy of scopes: nodes, main ops, parameters, FLOPs, output shapes.

    Scopes come from node names (`/encoder/layer.3/attention/MatMul`, `a.b.c`), torch's dynamo
    metadata, ONNX local functions, or, for models without scoped names, repeated blocks between
    single-tensor cuts. Static only: nothing is run. Exit 0 (2 for bad options, 3 for a model that
    does not load).

    \b
    Examples:
      mi inspect model.onnx --depth 3
      mi inspect model.onnx --find 'op:QuantizeLinear'
      mi inspect model.onnx --node /encoder/layer.0/attention/Softmax
      mi inspect fp32.onnx --diff int8.onnx --html diff.html
    """
    from ..core.typefork import while_waiting
    from ..inspection.config import InspectConfig
    from ..workflows.inspect import inspect_model

    check_report_paths()
    config = InspectConfig(depth=depth, find=find, node=node, diff=diff)
    # the graph is millions of long-lived objects and next to no cycles: at 50,000 nodes the collector
    # ran 78 times to free 361 objects (~5% of the run), so it pauses while the model is read
    collecting = gc.isenabled()
    gc.disable()
    try:
        with while_waiting(_import_renderers):  # while a child computes the tensor types, if one does
            result = inspect_model(model, config, table_only=_table_only(ctx, params))
    finally:
        # the model's objects go to the oldest generation unscanned (freeze, then unfreeze): re-enabled
        # with them all still in the youngest, the collector's next pass scanned every one (0.2-0.3 s)
        gc.freeze()
        gc.unfreeze()
        if collecting:
            gc.enable()
    from ..render.inspect_view import inspect_view

    return emit(ctx, result, inspect_view, fmt=params["fmt"])


def _import_renderers() -> None:
    from ..render import console, inspect_view  # noqa: F401 (imported for later: rich is ~0.1 s)
