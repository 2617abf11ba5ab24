"""`mi config check` and `mi config schema`: validate config files; print the JSON Schema."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import click

from ._help import GroupedGroup
from ..render.safe import visible
from ._output import app_state


def all_commands(ctx: click.Context) -> Dict[str, click.Command]:
    """Every command of this mi, by name (imported lazily, as `mi --help` does)."""
    root = ctx.find_root()
    group = root.command
    if not isinstance(group, click.Group):
        return {}
    return {name: cmd for name in group.list_commands(root) for cmd in [group.get_command(root, name)]
            if cmd is not None}


@click.group("config", cls=GroupedGroup)
def config() -> None:
    """Check run configs and suites without running them; print the config JSON Schema."""


@config.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.pass_context
def check(ctx: click.Context, files: Tuple[str, ...]) -> int:
    """Check FILES (run configs, suites, preprocessing specs) and list every problem with file:line.

    Unknown sections and keys (with 'did you mean'), values of the wrong type, files that do not
    exist, unset ${VARIABLES} and unknown step kinds are all reported, not just the first.
    Exit 0 when every file is valid, 2 otherwise.
    """
    from ..config.check import check_file

    state = app_state(ctx)
    commands = all_commands(ctx)
    problems = 0
    for path in files:
        report = check_file(path, commands)
        problems += len(report.errors)
        for error in report.errors:
            click.echo(f"Error: {visible(str(error))}", err=True)
        if not state.quiet:
            verdict = "OK" if report.ok else f"{len(report.errors)} problem(s)"
            click.echo(f"{path}: {report.kind}: {verdict}")
            if state.verbose or report.ok:
                for line in report.details:
                    click.echo(f"  {line}")
    return 2 if problems else 0


@config.command("schema")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
@click.option("--check", "check_only", is_flag=True,
              help="Exit 1 when the file given with --out (default: the shipped schema) is not up to date.")
@click.pass_context
def schema(ctx: click.Context, out: Optional[str], check_only: bool) -> int:
    """Print the JSON Schema of run configs, suites and preprocessing specs.

    Generated from the options of this mi's commands (the same parameters the config loader
    checks against), so it always matches. Point your editor's YAML support at it, or run
    'mi config schema --out inspector_cli/schemas/config-file.json' after adding a command.
    """
    from pathlib import Path

    from ..config.schema import SCHEMA_PATH, build_schema, schema_text
    from ..serialize import write_atomic

    text = schema_text(build_schema(all_commands(ctx)))
    if check_only:
        target = Path(out) if out else SCHEMA_PATH
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current != text:
            click.echo(f"{target}: out of date; regenerate it with mi config schema --out {target}", err=True)
            return 1
        return 0
    if out:
        write_atomic(out, text)
    else:
        click.echo(text, nl=False)
    return 0
