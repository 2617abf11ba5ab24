"""`--group-by scope[:DEPTH]` for the measuring commands that roll their rows up by scope.

compare (--layers), probe and nan-bisect always carry the roll-up at depth 1 in their JSON; the
option picks the depth and puts the roll-up table first in the terminal. Kept in its own module
so each command gains one decorator and one line.
"""
from __future__ import annotations

import functools
from typing import Any, Dict

import click

# parse_group_by is imported where a value is given: commands.profile is the profile command's
# module, which a compare/probe/nan-bisect run without --group-by does not need (issue 16)


def group_by_option(func: Any) -> Any:
    """Add `--group-by scope[:DEPTH]` (stored as params['group_by']); the command builds the whole
    scope map only when --group-by or --html will use it (else its JSON has the depth-1 roll-up)."""
    @functools.wraps(func)
    def command(*args: Any, **params: Any) -> Any:
        from ..inspection.flags import FULL_SCOPES  # not .rollups: that imports onnx (issue 16)

        token = FULL_SCOPES.set(bool(params.get("group_by") or params.get("html_path")))
        try:
            return func(*args, **params)
        finally:
            FULL_SCOPES.reset(token)

    return click.option(
        "--group-by", "group_by", metavar="scope[:DEPTH]", callback=_check,
        help="Show the rows rolled up by scope first (a dozen worst scopes, then the usual tables), DEPTH "
             "levels below the model (default 1; 'scope:leaf' for each node's own scope). The roll-up at "
             "depth 1 is always in the JSON.")(command)


def _check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    # a bad value is a usage error before anything runs, not after the samples
    if value:
        from .profile import parse_group_by

        parse_group_by(value)
    return value


def apply_group_by(result: Any, params: Dict[str, Any]) -> Any:
    """`result` rolled up at the requested depth and marked for the terminal, when --group-by was given."""
    value = params.get("group_by")
    if not value:
        return result
    from ..inspection.rollups import regroup
    from .profile import parse_group_by

    depth = parse_group_by(value)

    return regroup(result, depth, group_by=True)
