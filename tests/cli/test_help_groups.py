"""`--help` lists each command's options in named groups from one table (issue 32)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import click
import pytest
from click.testing import CliRunner

from inspector_cli.cli import cli
from inspector_cli.commands._help import GroupedHelp, command_key, long_flag
from inspector_cli.commands.help_groups import CANONICAL, HELP_GROUPS, see_also

ROOT = Path(__file__).resolve().parents[2]


def _every_command() -> List[Tuple[str, click.Command, click.Context]]:
    """(path, command, its context as `mi` builds it) for mi and every command and subcommand."""
    root = click.Context(cli, info_name="mi", **cli.context_settings)
    found = [("mi", cli, root)]
    stack: List[Tuple[click.Group, click.Context]] = [(cli, root)]
    while stack:
        group, ctx = stack.pop()
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            sub = click.Context(command, info_name=name, parent=ctx)
            found.append((command_key(sub), command, sub))
            if isinstance(command, click.Group):
                stack.append((command, sub))
    return found


def _own_options(command: click.Command, ctx: click.Context) -> List[str]:
    """The options a user sees, --help aside (it closes the last group by itself)."""
    return [long_flag(p) for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden
            and not set(p.opts) & set(ctx.help_option_names)]


COMMANDS = _every_command()


def test_every_option_of_every_command_is_in_exactly_one_group() -> None:
    assert len(COMMANDS) == 16  # mi, its eleven commands, config check/schema, inputs make/show
    for path, command, ctx in COMMANDS:
        options = _own_options(command, ctx)
        listed = Counter(flag for _, flags in HELP_GROUPS.get(path, ()) for flag in flags)
        missing = [flag for flag in options if flag not in listed]
        assert not missing, f"{path}: {missing} in no group of commands/help_groups.py"
        twice = [flag for flag, count in listed.items() if count > 1]
        assert not twice, f"{path}: {twice} in more than one group"
        stale = sorted(set(listed) - set(options))
        assert not stale, f"{path}: help_groups.py lists {stale}, which the command does not have"
    assert set(HELP_GROUPS) <= {path for path, _, _ in COMMANDS}


def test_shared_groups_keep_one_order_and_every_command_draws_grouped_help() -> None:
    for path, command, _ in COMMANDS:
        assert isinstance(command, GroupedHelp), f"{path} is a plain click command: cls=GroupedCommand"
        titles = [title for title, _ in HELP_GROUPS.get(path, ())]
        assert len(titles) == len(set(titles)), path
        shared = [title for title in titles if title in CANONICAL]
        assert shared == sorted(shared, key=CANONICAL.index), f"{path}: {shared}"
        if path != "mi":
            page = see_also(path)
            assert page and (ROOT / "docs" / page).exists(), path


def _sections(text: str) -> Dict[str, List[str]]:
    """Heading -> the option flags listed under it, from the help text."""
    sections: Dict[str, List[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            sections[current] = []
        elif current is not None and line.startswith("  -"):
            sections[current] += [word.rstrip(",") for word in line.split()[:2] if word.startswith("--")][:1]
    return sections


def test_compare_help_shows_the_groups_in_order_each_option_under_its_own() -> None:
    result = CliRunner().invoke(cli, ["compare", "--help"], terminal_width=80, catch_exceptions=False)
    assert result.exit_code == 0
    sections = _sections(result.stdout)
    assert list(sections) == ["Inputs", "Gates", "Layers", "Fix-it", "Sequence and decode", "Runtime",
                              "Scale-out", "Output"]
    assert sections["Inputs"][:3] == ["--inputs", "--samples", "--seed"]  # the common case first
    assert "--isolate" in sections["Layers"] and "--min-cosine" in sections["Gates"]
    assert "--fallback-plan" in sections["Fix-it"] and "--decode" in sections["Sequence and decode"]
    assert "--workers" in sections["Scale-out"] and sections["Output"][0] == "--json"
    assert sections["Output"][-1] == "--help"
    assert sum(len(flags) for flags in sections.values()) == 83
    assert "Options:" not in result.stdout
    assert result.stdout.rstrip().endswith("\n\nSee also: docs/guide/compare.md; every option: docs/commands/compare.md")


@pytest.mark.parametrize("args, first, flag", [(["probe"], "Tensors", "--select"),
                                               (["nan-bisect"], "Inputs", "--inputs"),
                                               (["profile"], "Measurement", "--runs"),
                                               (["inputs", "make"], "Samples", "--count"),
                                               ([], "Run", "--config")])
def test_other_commands_start_with_their_own_group(args: List[str], first: str, flag: str) -> None:
    out = CliRunner().invoke(cli, [*args, "--help"], terminal_width=100, catch_exceptions=False).stdout
    sections = _sections(out)
    groups = [name for name in sections if name not in ("Examples", "Commands")]
    assert groups[0] == first and flag in sections[first]


def test_help_is_plain_text_off_a_terminal_with_no_color_at_80_columns() -> None:
    """The real process, piped (as in a CI log): no escape codes, no box drawing, nothing over 80."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "inspector_cli", "compare", "--help"], capture_output=True,
                         text=True, env=env, check=True).stdout
    assert "\x1b" not in out and not any(ord(ch) > 127 for ch in out)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "\nLayers:\n  --layers PATTERN" in out
    # the help column starts at the same place in every group: 2 + 30 (the widest name, capped) + 2
    rows = [re.match(r"^  (-\S.*?)\s{2,}(\S.*)$", line) for line in out.splitlines()]
    starts = Counter(row.start(2) for row in rows if row is not None)
    assert set(starts) == {34} and sum(starts.values()) > 50
