"""What every command does after its workflow: write reports, print the result, return the exit code."""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Dict, Iterator, Optional

import click

from ._state import AppState


def app_state(ctx: click.Context) -> AppState:
    state = ctx.find_object(AppState)
    return state if state is not None else AppState()


def check_report_paths(paths: Dict[str, Optional[str]]) -> None:
    """Fail before any work when a requested report cannot be written."""
    from ..serialize import check_writable

    for flag, path in paths.items():
        if path:
            check_writable(path, flag)


@contextlib.contextmanager
def progress_bar(state: AppState, label: str, *, enabled: bool = True) -> Iterator[Callable[[int, Optional[int], str], None]]:
    """A rich progress bar on stderr when it is a terminal; a no-op callback otherwise."""
    if state.quiet or not enabled or not sys.stderr.isatty():
        yield lambda done, total, item: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ..render.console import make_console

    console = make_console(no_color=state.no_color, stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  TextColumn("{task.fields[item]}"), console=console, transient=True) as bar:
        task = bar.add_task(label, total=None, item="")

        def update(done: int, total: Optional[int], item: str) -> None:
            bar.update(task, completed=done, total=total, item=item[-40:])

        yield update


def emit(ctx: click.Context, result: Any, view_builder: Callable[[Any], Any], *, fmt: str = "table",
         json_path: Optional[str] = None, extra_writers: Optional[Dict[str, Callable[[Any], None]]] = None,
         formatters: Optional[Dict[str, Callable[[Any], str]]] = None) -> int:
    """Write the requested reports, then print the result in `fmt`; returns the exit code.

    Reports are written before anything is printed, so a gate failure (exit 1) or a broken pipe
    never loses them.
    """
    from ..serialize import result_to_json, write_atomic

    state = app_state(ctx)
    document = None
    if json_path:
        document = result_to_json(result)
        if json_path != "-":
            write_atomic(json_path, document + "\n")
    for writer in (extra_writers or {}).values():
        writer(result)
    if json_path == "-":
        click.echo(document)
        return result.exit_code
    if fmt == "json":
        click.echo(document or result_to_json(result))
        return result.exit_code
    if formatters and fmt in formatters:  # command-specific formats such as SARIF
        click.echo(formatters[fmt](result))
        return result.exit_code
    view = view_builder(result)
    if fmt == "markdown":
        from ..render.text import view_to_markdown

        click.echo(view_to_markdown(view), nl=False)
    elif fmt == "csv":
        from ..render.text import view_to_csv

        click.echo(view_to_csv(view), nl=False)
    elif not state.quiet:
        from ..render.console import make_console, print_view

        print_view(view, make_console(no_color=state.no_color))
    return result.exit_code
