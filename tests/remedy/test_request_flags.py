"""`build_remedy_request` returns None (and skips importing the remedy engine) unless a flag in
REQUEST_FLAGS was given: every remedy option that asks for something must be in that list, or
a new flag would be silently ignored."""
from __future__ import annotations

import click

from inspector_cli.commands._remedy_options import REQUEST_FLAGS, remedy_options


def test_every_remedy_flag_without_a_default_is_a_request_flag():
    command = click.command()(remedy_options(lambda **_: None))
    context = click.Context(command)
    # no default: None, False, () or click's unset sentinel; a number is a default that only tunes
    asking = {p.name for p in command.params if not isinstance(p.get_default(context), int)
              or p.get_default(context) is False}
    tuning = {p.name for p in command.params} - asking
    assert asking == set(REQUEST_FLAGS)
    assert tuning == {"max_nodes", "max_runs"}  # defaults that only tune --fallback-plan
