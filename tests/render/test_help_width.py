"""Every command's --help reads in an 80-column terminal: no line wider than 80 (issue 20)."""
from __future__ import annotations

from typing import List

import click
import pytest
from click.testing import CliRunner

from inspector_cli.cli import cli


def _command_paths(group: click.Group, prefix: List[str]) -> List[List[str]]:
    """Every command and subcommand (the group loads its commands lazily: ask it, not .commands)."""
    ctx = click.Context(group)
    paths = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        paths.append(prefix + [name])
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, prefix + [name]))
    return paths


@pytest.mark.parametrize("path", [[]] + _command_paths(cli, []), ids=lambda p: " ".join(p) or "mi")
def test_help_fits_80_columns(path):
    result = CliRunner().invoke(cli, path + ["--help"], terminal_width=80, catch_exceptions=False)
    assert result.exit_code == 0
    wide = [line for line in result.stdout.splitlines() if len(line) > 80]  # stdout: the help itself
    assert not wide, f"mi {' '.join(path)} --help: {len(wide)} line(s) over 80 columns, e.g. {wide[0]!r}"
    assert "Usage: " in result.stdout
