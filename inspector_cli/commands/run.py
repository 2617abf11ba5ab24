"""`mi run`: a suite of steps (validate, compare, probe, nan-bisect, profile, inspect) as one CI gate."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import click

from ._help import GroupedCommand
from ._options import ByteSize, report_options
from ..render.safe import visible
from ._output import app_state, check_report_paths, emit
from ._state import AppState


@click.command("run", cls=GroupedCommand)
@click.argument("suite_path", metavar="SUITE", type=click.Path(exists=True, dir_okay=False))
@click.option("--only", multiple=True, metavar="NAMES",
              help="Run only these steps (step names or kinds, comma-separated). Repeatable.")
@click.option("--skip", multiple=True, metavar="NAMES",
              help="Leave these steps out (step names or kinds, comma-separated). Repeatable.")
@click.option("--keep-going", is_flag=True,
              help="Go on after a step that could not run (exit 2/3/4). A failed gate never stops a suite.")
@click.option("--executor", type=click.Choice(("local", "ray")),
              help="Run the compare, probe and nan-bisect steps on this engine (overrides the suite).")
@click.option("--workers", type=click.IntRange(min=0), help="Workers of those steps (overrides the suite).")
@click.option("--address", metavar="auto|ray://HOST:10001|local", help="Ray cluster of those steps (with --executor ray).")
@click.option("--worker-memory", type=ByteSize(), metavar="SIZE", help="Memory limit per worker of those steps.")
@report_options
@click.pass_context
def run(ctx: click.Context, suite_path: str, only: Tuple[str, ...], skip: Tuple[str, ...], keep_going: bool,
        executor: Optional[str], workers: Optional[int], address: Optional[str], worker_memory: Optional[int],
        **report: Any) -> int:
    """Run the steps of the suite file SUITE in order, as one gate with one report.

    Each step runs a command with the step's options (the keys of that command's flags), after
    the suite's `defaults:`. `${VAR}` and `${VAR:-default}` come from the environment; paths are
    relative to SUITE. A failed gate (exit 1) does not stop the suite; a step that cannot run
    (exit 2, 3 or 4) stops it unless --keep-going. Exit code: the worst of the steps.

    \b
    Example:
      mi run configs/ci-gate.yaml --json reports/gate.json
      mi run suite.yaml --only compare --keep-going
      mi run suite.yaml --executor ray --address auto
    """
    from ..config.suite import STEP_KINDS, load_suite, step_default_map
    from ..errors import ConfigError
    from ..render.suite_view import suite_view
    from ._suite import run_steps, select_steps

    # Every report option of report_options (--json, and --html/--junit where the writers exist) is
    # written by emit() for the combined result, exactly as for any other command.
    json_path: Optional[str] = report.get("json_path")
    fmt: str = report.get("fmt") or "table"
    state = app_state(ctx)
    check_report_paths({"--json": json_path})
    suite = load_suite(suite_path)
    selected = select_steps(suite, only, skip)
    root = ctx.find_root()
    available = set(root.command.list_commands(root)) if isinstance(root.command, click.Group) else set()
    commands = {kind: cmd for kind in STEP_KINDS if kind in available
                for cmd in [root.command.get_command(root, kind)] if cmd is not None}  # type: ignore[attr-defined]
    errors: List[ConfigError] = []
    default_maps: Dict[int, Dict[str, Any]] = {}
    for step in suite.steps:
        if step.index in selected:
            default_maps[step.index] = step_default_map(suite, step, commands, errors)
    overrides = {name: value for name, value in (("executor", executor), ("workers", workers), ("address", address),
                                                 ("worker_memory", worker_memory)) if value is not None}
    for step in suite.steps:
        if step.index in default_maps and step.kind in commands:
            accepted = {p.name for p in commands[step.kind].params}
            default_maps[step.index].update({k: v for k, v in overrides.items() if k in accepted})
    from ._suite_data import share_suite_data

    shared = share_suite_data(suite.steps, default_maps,
                              {k: any(p.name == "inputs" for p in c.params) for k, c in commands.items()})
    if errors:
        first = errors[0]
        more = f"{len(errors) - 1} more problem(s): mi config check {suite_path} lists them all"
        raise ConfigError(first.message, hint=f"{first.hint}; {more}" if first.hint else more) if len(errors) > 1 \
            else first
    quiet_steps = state.quiet or fmt != "table" or json_path == "-"
    step_state = AppState(quiet=quiet_steps, verbose=state.verbose, no_color=state.no_color, debug=state.debug,
                          suite_step=True)

    def echo(line: str) -> None:
        if not state.quiet:
            click.echo(visible(line), err=True)

    for note in shared:
        echo(note)
    config = {"suite": str(suite.path), **({"shared_inputs": shared} if shared else {}), "only": list(only), "skip": list(skip), "keep_going": keep_going,
              **({"overrides": {k: v for k, v in overrides.items()}} if overrides else {}),
              "defaults": suite.defaults, "selected": [s.name for s in suite.steps if s.index in selected]}
    result, interrupted = run_steps(ctx, suite, commands, default_maps, selected, keep_going=keep_going,
                                    step_state=step_state, echo=echo, config=config)
    code = emit(ctx, result, suite_view, fmt=fmt, json_path=json_path)
    if interrupted:
        raise KeyboardInterrupt
    return code
