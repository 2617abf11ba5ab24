"""What every command does after its workflow: write reports, print the result, return the exit code."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import click

from ..errors import EXIT_CANNOT_ANALYSE, UsageError
from ._state import AppState

RESULT_META_KEY = "inspector_cli.result"
"""Key of `click.Context.meta` under which `emit` leaves the result it wrote (read by `mi run`)."""


def app_state(ctx: click.Context) -> AppState:
    state = ctx.find_object(AppState)
    return state if state is not None else AppState()


REPORT_PARAMS = {"json_path": "--json", "html_path": "--html", "junit_path": "--junit",
                 "model_explorer_path": "--model-explorer"}


def check_report_paths(paths: Optional[Dict[str, Optional[str]]] = None) -> None:
    """Fail before any work when a requested report cannot be written.

    Checks the paths given, plus every report option of the running command (--json, --html,
    --junit, --model-explorer), so commands need not list them.
    """
    from ..serialize import check_writable

    wanted = dict(paths or {})
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        for param, flag in REPORT_PARAMS.items():
            if ctx.params.get(param):
                wanted.setdefault(flag, ctx.params[param])
    inputs = input_paths(ctx) if ctx is not None else []
    for flag, path in wanted.items():
        if path:
            check_writable(path, flag)
            refuse_input_overwrite(flag, str(path), inputs)


def input_paths(ctx: click.Context) -> List[Path]:
    """Files and folders the running command reads: every `click.Path(exists=True)` parameter
    (model, --against, --inputs, --golden, --preprocess, results, suite) and the -c config."""
    found: List[Path] = []
    for param in ctx.command.params:
        kind = param.type
        if not (isinstance(kind, click.Path) and kind.exists):
            continue
        value = ctx.params.get(param.name or "")
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if item and str(item) != "-":
                found.append(Path(str(item)))
    config_path = app_state(ctx).config_path
    if config_path:
        found.append(Path(config_path))
    return found


def refuse_input_overwrite(flag: str, path: str, inputs: List[Path]) -> None:
    """A report path that is (or lies inside a folder of) an input would destroy what it reports on:
    `mi validate m.onnx --json m.onnx`. Symlinks and hard links count as the same file."""
    if path == "-":
        return
    target = Path(path)
    resolved = target.resolve()
    for source in inputs:
        try:
            same = resolved == source.resolve() or (target.exists() and source.exists()
                                                    and os.path.samefile(target, source))
            inside = source.is_dir() and target.is_file() and source.resolve() in resolved.parents
        except OSError:
            continue
        if same or inside:
            what = "is" if same else "is a file inside"
            raise UsageError(f"{flag} {path}: {what} the input {source}; refusing to overwrite it",
                             hint="write the report somewhere else")


def write_reports(result: Any, *, json_path: Optional[str] = None, html_path: Optional[str] = None,
                  junit_path: Optional[str] = None, model_explorer_path: Optional[str] = None) -> Optional[str]:
    """Write every requested report atomically; returns the JSON text when JSON was requested."""
    from ..serialize import dumps, result_to_json, write_atomic

    document = None
    if json_path:
        document = result_to_json(result)
        if json_path != "-":
            write_atomic(json_path, document + "\n")
    if html_path:
        from ..render.html import render_html

        write_atomic(html_path, render_html([result]))
    if junit_path:
        from ..render.junit import junit_xml

        write_atomic(junit_path, junit_xml([result]))
    if model_explorer_path:
        from ..render.model_explorer import node_data_files

        for path, data in node_data_files(result, model_explorer_path):
            write_atomic(path, dumps(data) + "\n")
    return document


@contextlib.contextmanager
def progress_bar(state: AppState, label: str, *, enabled: bool = True) -> Iterator[Callable[[int, Optional[int], str], None]]:
    """A rich progress bar on stderr when it is a terminal; a no-op callback otherwise."""
    if state.quiet or not enabled or not sys.stderr.isatty():
        yield lambda done, total, item: None
        return
    from ..render.safe import visible
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ..render.console import make_console

    console = make_console(no_color=state.no_color, stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  TextColumn("{task.fields[item]}", markup=False), console=console, transient=True) as bar:
        task = bar.add_task(label, total=None, item="")

        def update(done: int, total: Optional[int], item: str) -> None:
            bar.update(task, completed=done, total=total, item=visible(item)[-40:])

        yield update


def emit(ctx: click.Context, result: Any, view_builder: Callable[[Any], Any], *, fmt: str = "table",
         json_path: Optional[str] = None, extra_writers: Optional[Dict[str, Callable[[Any], None]]] = None,
         formatters: Optional[Dict[str, Callable[[Any], str]]] = None) -> int:
    """Write the requested reports (--json, --html, --junit, --model-explorer of the running
    command), then print the result in `fmt` (`formatters` adds command-specific formats such as
    SARIF); returns the exit code.

    Reports are written before anything is printed, so a gate failure (exit 1) or a broken pipe
    never loses them.
    """
    # `mi run` reads each step's result from here (ctx.meta is shared by nested contexts).
    ctx.meta[RESULT_META_KEY] = result
    params = ctx.params
    json_path = json_path or params.get("json_path")
    document = write_reports(result, json_path=json_path, html_path=params.get("html_path"),
                             junit_path=params.get("junit_path"),
                             model_explorer_path=params.get("model_explorer_path"))
    for writer in (extra_writers or {}).values():
        writer(result)
    code = print_result(ctx, result, view_builder, fmt=fmt, to_stdout_json=document if json_path == "-" else None,
                        formatters=formatters)
    if code == EXIT_CANNOT_ANALYSE:
        report_cannot_analyse(result, view_builder)
    return code


def report_cannot_analyse(result: Any, view_builder: Callable[[Any], Any]) -> None:
    """A result that ends in exit 3 (samples that could not run, a model onnxruntime cannot load)
    says why in one `Error:` line on stderr, whatever -q, --json - or --format hid from stdout."""
    from ..render.safe import visible

    view = view_builder(result)
    reason = next((note for note in view.notes if note.lower().startswith("error")), None)
    if reason is not None:
        reason = reason.split(":", 1)[1].strip() if ":" in reason else reason
    else:
        reason = result.summary()
    click.echo(f"Error: {visible(reason)}", err=True)


def renamed_notes(result: Any) -> List[str]:
    """One line per model analysed as a renamed copy (`--rename-duplicate-nodes`, core/refusals.py)."""
    notes = []
    for model in getattr(result, "models", None) or []:
        renamed = getattr(model, "renamed_nodes", None)
        if renamed:
            shown = ", ".join(f"'{old}' -> '{new}'" for new, old in list(renamed.items())[:3])
            notes.append(f"{model.path}: analysed a copy with {len(renamed)} duplicate node name(s) renamed ({shown}"
                         f"{', ...' if len(renamed) > 3 else ''}); onnxruntime refuses the file itself")
    return list(dict.fromkeys(notes))  # one line for a model compared with itself


def print_result(ctx: click.Context, result: Any, view_builder: Callable[[Any], Any], *, fmt: str = "table",
                 to_stdout_json: Optional[str] = None,
                 formatters: Optional[Dict[str, Callable[[Any], str]]] = None) -> int:
    """Print one result on stdout in `fmt` (nothing for a table under --quiet); returns its exit code."""
    from ..serialize import result_to_json

    state = app_state(ctx)
    if to_stdout_json is not None:
        click.echo(to_stdout_json)
        return result.exit_code
    if fmt == "json":
        click.echo(result_to_json(result))
        return result.exit_code
    if formatters and fmt in formatters:  # command-specific formats such as SARIF
        click.echo(formatters[fmt](result))
        return result.exit_code
    if state.quiet and fmt not in ("markdown", "csv"):
        return result.exit_code  # a table under --quiet prints nothing: not even built (issue 16)
    view = view_builder(result)
    view.notes.extend(renamed_notes(result))
    if fmt == "markdown":
        from ..render.text import view_to_markdown

        click.echo(view_to_markdown(view), nl=False)
    elif fmt == "csv":
        from ..render.text import view_to_csv

        click.echo(view_to_csv(view), nl=False)
    elif not state.quiet:
        from ..render.console import make_console, print_view
        from ..render.fit import Layout

        print_view(view, make_console(no_color=state.no_color), Layout(state.wide, state.columns))
    return result.exit_code
