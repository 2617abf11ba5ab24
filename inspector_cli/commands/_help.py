"""`--help` with the options in named groups and a "See also" line (issue 32).

The groups are data (`help_groups.HELP_GROUPS`); this draws them with click's own formatter: one
section per group, the columns aligned across sections, plain text (no colour, no box characters),
wrapped to the terminal, so it reads the same in CI logs. rich-click draws panels but costs ~0.2 s
of imports per `--help` (importlib.metadata, rich.console): measured in docs/speed.md, issue 32.
"""
from __future__ import annotations

from typing import List, Tuple

import click

from .help_groups import HELP_GROUPS, see_also

OTHER = "Other options"
"""Options missing from the table (tests/cli/test_help_groups.py fails then) are still shown, here."""

FIRST_COLUMN_MAX = 30  # click's write_dl default: longer option names put their help on the next line


def command_key(ctx: click.Context) -> str:
    """The command's path as typed, 'mi inputs make': the key of HELP_GROUPS (whatever the root's name)."""
    names: List[str] = []
    while ctx.parent is not None:
        names.append(ctx.info_name or ctx.command.name or "")
        ctx = ctx.parent
    return " ".join(["mi", *reversed(names)])


def long_flag(option: click.Option) -> str:
    """The name an option is listed under in the table: its longest flag ('--inputs' of -i/--inputs)."""
    return max(option.opts, key=len)


def option_groups(command: click.Command, ctx: click.Context) -> List[Tuple[str, List[click.Option]]]:
    """The command's visible options by group, in the table's order; --help closes the last group."""
    options = [p for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    helps = [p for p in options if set(p.opts) & set(ctx.help_option_names)]
    by_flag = {long_flag(p): p for p in options if p not in helps}
    groups: List[Tuple[str, List[click.Option]]] = []
    for title, flags in HELP_GROUPS.get(command_key(ctx), ()):
        members = [by_flag.pop(flag) for flag in flags if flag in by_flag]
        if members:
            groups.append((title, members))
    if by_flag:
        groups.append((OTHER if groups else "Options", list(by_flag.values())))
    if helps:
        if groups:
            groups[-1][1].extend(helps)
        else:
            groups.append(("Options", helps))
    return groups


def write_option_groups(command: click.Command, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """One section per group ('Inputs:' and its rows), the help column at the same place in all."""
    sections = grouped_sections(command, ctx)
    if not sections:
        return
    width = min(max(len(name) for _, rows in sections for name, _ in rows), FIRST_COLUMN_MAX)
    for title, rows in sections:
        own = min(max(len(name) for name, _ in rows), FIRST_COLUMN_MAX)
        with formatter.section(title):
            # write_dl puts the help at min(longest name, 30) + col_spacing: pad to the widest section's
            formatter.write_dl(rows, col_max=FIRST_COLUMN_MAX, col_spacing=2 + width - own)


def write_see_also(ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """'See also: docs/guide/compare.md; every option: docs/commands/compare.md' (paths in the source tree)."""
    key = command_key(ctx)
    page = see_also(key)
    if not page:
        return
    top = key.split()[1] if len(key.split()) > 1 else "index"
    formatter.write_paragraph()
    formatter.write_text(f"See also: docs/{page}; every option: docs/commands/{top}.md")


class GroupedHelp:
    """Mixin of click commands: grouped options, then the see-also line."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        write_option_groups(self, ctx, formatter)  # type: ignore[arg-type]

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)  # type: ignore[misc]
        write_see_also(ctx, formatter)


class GroupedCommand(GroupedHelp, click.Command):
    """Every mi command: `@click.command("name", cls=GroupedCommand)`."""


class GroupedGroup(GroupedHelp, click.Group):
    """A command with subcommands; `@group.command()` makes GroupedCommands."""

    command_class = GroupedCommand
    group_class = type  # subgroups are of this class too

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        write_option_groups(self, ctx, formatter)
        self.format_commands(ctx, formatter)


def grouped_sections(command: click.Command, ctx: click.Context) -> List[Tuple[str, List[Tuple[str, str]]]]:
    """(group title, [(option names, help)]) as `--help` shows them: what scripts/gen_docs.py prints."""
    sections = []
    for title, members in option_groups(command, ctx):
        rows = [record for record in (p.get_help_record(ctx) for p in members) if record is not None]
        if rows:
            sections.append((title, rows))
    return sections
