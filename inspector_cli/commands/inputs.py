"""`mi inputs make` / `mi inputs show`: write sample folders for a model, and look inside them."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import click

from ._help import GroupedGroup
from ._options import build_reader_options, build_synthetic, decoding_options, report_options
from ._output import app_state, check_report_paths, emit, progress_bar


@click.group("inputs", cls=GroupedGroup)
def inputs() -> None:
    """Make sample folders (.npz) for a model, and show what a data folder holds.

    \b
    Examples:
      mi inputs make --model m.onnx --count 32 --val-range 0,1 --out data/
      mi inputs make --model m.onnx --inputs images/ \\
          --preprocess imagenet.yaml --out data/
      mi inputs show data/
    """


@inputs.command("show")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--model", "-m", type=click.Path(exists=True, dir_okay=False),
              help="Check the samples against this model's inputs (needed for images and .bin dumps).")
@click.option("--limit", type=click.IntRange(min=1), help="Read at most N samples.")
@decoding_options
@report_options
@click.pass_context
def show(ctx: click.Context, paths: Tuple[str, ...], model: Optional[str], limit: Optional[int],
         **params: Any) -> int:
    """Names, dtypes, shapes and min/max/mean/std of every input over the samples in PATHS.

    Makes the value range visible ([0, 255] pixels where a model expects [0, 1] is the most
    common cause of a 'broken' int8 model). Exit 1 when an input holds NaN or Inf.
    """
    from ..config.inputs import InputsConfig
    from ..render.inputs_view import inputs_view
    from ..workflows.inputs import show_inputs

    state = app_state(ctx)
    check_report_paths({"--json": params.get("json_path")})
    config = InputsConfig(inputs=tuple(paths), reader_options=build_reader_options(params), limit=limit)
    with progress_bar(state, "reading", enabled=params.get("fmt") == "table") as progress:
        result = show_inputs(list(paths), model, config, progress=progress)
    return emit(ctx, result, inputs_view, fmt=params["fmt"], json_path=params.get("json_path"))


@inputs.command("make")
@click.option("--model", "-m", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The model whose inputs the samples are for.")
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Folder to write .npz files to.")
@click.option("--count", "-n", type=click.IntRange(min=1),
              help="Synthetic samples to make (default 8); with --inputs, convert at most N.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of synthetic samples.")
@click.option("--val-range", multiple=True, metavar="[NAME:]LO,HI",
              help="Value range of synthetic inputs (default 0,1 for floats). Repeatable.")
@click.option("--shape", multiple=True, metavar="NAME:DIMS",
              help="Fix an input's shape, e.g. input:1x3x224x224 (needed for dynamic dims). Repeatable.")
@click.option("--inputs", "-i", multiple=True, type=click.Path(exists=True),
              help="Convert these samples instead (images, .bin dumps, .npy, .pb, ...). Repeatable.")
@decoding_options
@click.option("--force", is_flag=True, help="Write into a folder that already holds .npz files.")
@report_options
@click.pass_context
def make(ctx: click.Context, model: str, out: str, count: Optional[int], **params: Any) -> int:
    """Write samples for a model as one .npz per sample (keys = input names).

    Synthetic samples are uniform in --val-range (sample i seeded by (seed, i)); with --inputs,
    each sample is read (images through --preprocess, .bin through --raw-dtype/--raw-shape),
    checked against the model and saved. Prints the statistics of what was written.
    """
    from ..config.inputs import DEFAULT_MAKE_COUNT, InputsConfig
    from ..render.inputs_view import inputs_view
    from ..workflows.inputs import make_inputs

    state = app_state(ctx)
    check_report_paths({"--json": params.get("json_path")})
    sources = tuple(params.get("inputs") or ())
    synthetic = build_synthetic({**params, "samples": count or DEFAULT_MAKE_COUNT})
    config = InputsConfig(inputs=sources, synthetic=synthetic, reader_options=build_reader_options(params),
                          limit=count if sources else None, out=out, force=bool(params.get("force")))
    with progress_bar(state, "writing", enabled=params.get("fmt") == "table") as progress:
        result = make_inputs(model, out, config, progress=progress)
    return emit(ctx, result, inputs_view, fmt=params["fmt"], json_path=params.get("json_path"))
