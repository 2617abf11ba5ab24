"""The `mi` command group and the one error boundary.

Commands are imported lazily (only the one that runs), so `mi --help` stays fast and never imports
onnx or onnxruntime. Every failure becomes one `Error:` line and a documented exit code here.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
import traceback
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional

import click

from .commands._help import GroupedGroup
from .commands._state import AppState
from .core.interrupts import interrupt_handlers, signals_stop_now, terminated
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, MiError, describe_error
from .render.safe import visible
from .version import __version__

# command name -> "module:attribute". Add a line here when a command lands.
COMMANDS: Dict[str, str] = {
    "compare": "inspector_cli.commands.compare:compare",
    "report": "inspector_cli.commands.report:report",
    "run": "inspector_cli.commands.run:run",
    "inputs": "inspector_cli.commands.inputs:inputs",
    "config": "inspector_cli.commands.config_cmd:config",
    "profile": "inspector_cli.commands.profile:profile",
    "probe": "inspector_cli.commands.probe:probe",
    "validate": "inspector_cli.commands.validate:validate",
    "nan-bisect": "inspector_cli.commands.nan_bisect:nan_bisect",
    "inspect": "inspector_cli.commands.inspect:inspect",
    "fix": "inspector_cli.commands.fix:fix",
}

SUMMARIES: Dict[str, str] = {
    "compare": "Compare MODEL_B against the reference MODEL_A on the same inputs.",
    "fix": "Find the cheapest remedies that make QUANTISED meet every --target against FP32.",
    "report": "Render saved JSON results again, or find regressions between two runs.",
    "run": "Run the steps of the suite file SUITE in order, as one gate with one report.",
    "inputs": "Make sample folders (.npz) for a model, and show what a data folder holds.",
    "config": "Check run configs and suites without running them; print the config JSON Schema.",
    "profile": "Profile MODEL with onnxruntime: per-node latency, op types, critical path, FLOPs and memory.",
    "probe": "Statistics of chosen tensors of MODEL over a data set, in fixed memory.",
    "validate": "Check MODEL for defects before anything runs it: is this model sound?",
    "nan-bisect": "Find the node where NaN/Inf values are born in MODEL, for each input sample.",
    "inspect": "Show MODEL as a hierarchy of scopes: nodes, main ops, parameters, FLOPs, output shapes.",
}
"""The first paragraph of each command's help, for `mi --help`: listing the commands from here
saves importing all nine command modules and their option definitions (about half of the time
of `mi --help`). tests/test_speed.py keeps it equal to the commands' own help."""


def short_help(summary: str, limit: int) -> str:
    """The summary in at most `limit` characters, as click's (deprecated) make_default_short_help gave
    it: the first sentence whole if it fits, else whole words followed by "..."."""
    words = summary.split()
    shown = ""
    for index, word in enumerate(words):
        longer = f"{shown} {word}" if shown else word
        if len(longer) <= limit and (word.endswith(".") or index == len(words) - 1):
            return longer
        if len(longer) + 3 > limit:
            break
        shown = longer
    return shown + "..."


class MiGroup(GroupedGroup):
    """A click group with lazy subcommands, grouped help (commands/_help.py) and the error boundary in `main`."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from SUMMARIES, as click would draw it from the imported commands."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, short_help(SUMMARIES[name], limit)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Optional[List[str]] = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True, **extra: Any) -> Any:
        argv = hoist_global_options(self, list(sys.argv[1:] if args is None else args))
        owns = bool(OWNS_PROCESS) and standalone_mode
        # as `mi`, a second Ctrl-C/SIGTERM (once the first was raised) ends the process at once, and so
        # does any signal from the command's end to the process's (the interpreter's own exit included)
        with interrupt_handlers(stop_now=stop_now if owns else None):
            with library_warnings(quiet=_quiet_flag(argv)):
                code = run_guarded(lambda: super(MiGroup, self).main(argv, "mi", complete_var,
                                                                     standalone_mode=False, **extra),
                                   debug="--debug" in argv)
            try:
                if owns:
                    signals_stop_now()  # the command has ended: from here a signal ends the process
                if code == EXIT_INTERRUPTED and not _SAID and terminated():
                    code = EXIT_TERMINATED  # the command stopped by itself (nan-bisect's summary), on SIGTERM
            except KeyboardInterrupt:  # a signal in the instant between
                code = say_interrupted()
            code = end_background_work(code, exit_now=owns)
        if standalone_mode:
            sys.exit(code)
        return code


def end_background_work(code: int, *, exit_now: bool) -> int:
    """No thread may be inside onnxruntime when the interpreter finalises: it aborts the process
    (status 134, "terminate called without an active exception"; issues 28 and 40, `core.background`).
    A process run as `mi` whose native work is still alive here (the early session builds after an
    error or a Ctrl-C, a thread pool's worker left inside onnxruntime) ends at once through
    `exit_without_finalising`, which cannot abort; one without ends as usual. An in-process caller
    cannot be ended: its registered work is waited for (bounded), silently as any library call; a
    Ctrl-C then returns the code at once. docs/exit-codes.md has the measurements behind this choice."""
    from .core import background

    try:
        if exit_now:
            if background.pending() or background.inside_onnxruntime():
                exit_without_finalising(code)
            return code
        background.drain()
    except KeyboardInterrupt:  # Terminated too: asked (again), stop now
        code = EXIT_TERMINATED if terminated() else EXIT_INTERRUPTED
    return code


def stop_now() -> None:
    """A further Ctrl-C or SIGTERM once the first was raised: end now, 143 if SIGTERM came, else 130
    (the first one's line said, if its unwinding had not reached the error boundary yet)."""
    try:
        code = say_interrupted()
    except Exception:  # noqa: BLE001 - stderr mid-write (a re-entrant call) or closed: end all the same
        code = EXIT_TERMINATED if terminated() else EXIT_INTERRUPTED
    exit_without_finalising(code)


_SAID: List[int] = []


def say_interrupted() -> int:
    """The one line an interrupted run prints (once), and its code: the status the process ends with
    is the one its line names, whatever signal comes after."""
    if not _SAID:
        _SAID.append(EXIT_TERMINATED if terminated() else EXIT_INTERRUPTED)
        click.echo("Terminated (SIGTERM); reports already written are complete." if _SAID[0] == EXIT_TERMINATED
                   else "Interrupted; reports already written are complete.", err=True)
    return _SAID[0]


def exit_without_finalising(code: int) -> None:
    """End the process now with `code`: output flushed and atexit handlers run (a forked helper is
    stopped, executor workers too), but no interpreter finalisation and no C++ static destructors,
    so a thread still inside onnxruntime cannot abort the exit. Reports are already complete:
    they are written atomically, before this point. A further signal meanwhile ends it at once."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():  # else (a held-back signal's timer) it cannot
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda number, frame: os._exit(code))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
            pass
    import atexit

    atexit._run_exitfuncs()  # each handler's own errors are reported by atexit, never raised here
    os._exit(code)


def _quiet_flag(argv: List[str]) -> bool:
    """-q/--quiet among the group's own options (before the command name)."""
    args = iter(argv)
    for arg in args:
        if arg in ("-c", "--config"):
            next(args, None)  # its value
        elif arg == "--quiet" or (arg.startswith("-") and not arg.startswith("--") and "q" in arg[1:]
                                  and not arg.startswith("-c")):
            return True  # -q, or a cluster such as -vq
        elif not arg.startswith("-"):
            return False  # the command name: its own options are not the group's
    return False


@contextlib.contextmanager
def library_warnings(*, quiet: bool) -> Iterator[None]:
    """Python warnings raised by libraries during a command (numpy's 'invalid value encountered in
    reduce' on Inf-Inf, for one) are one `warning:` line without a source line, and none under -q:
    stderr then holds only mi's own lines. Restored afterwards (in-process callers keep theirs)."""
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        else:
            warnings.showwarning = _one_line_warning
        yield


def _one_line_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                      line: Optional[str] = None) -> None:
    click.echo(visible(f"warning: {message}"), err=True)


# The group's own options, accepted after the command too (`mi profile m.onnx --runs 5 -q`):
# users type flags where they remember them. Flag -> takes a value.
GLOBAL_OPTIONS: Dict[str, bool] = {"-c": True, "--config": True, "-v": False, "--verbose": False, "-vv": False,
                                   "-q": False, "--quiet": False, "--no-color": False, "--debug": False,
                                   "--wide": False, "--columns": True}


def hoist_global_options(group: click.Group, argv: List[str]) -> List[str]:
    """Move the group's options that follow the command name in front of it, so click parses them.

    A token stays where it is when the command defines the same option, when it is the value of the
    command's preceding option, or after `--`.
    """
    ctx = click.Context(group)
    at = next((i for i, token in enumerate(argv) if token in COMMANDS), None)
    if at is None:
        return argv
    if at > 0 and argv[at - 1] in ("-c", "--config", "--columns"):
        return argv  # the "command name" is an option's value (a config file named like a command)
    command = group.get_command(ctx, argv[at])
    own, valued = _option_names(command)
    front, rest, i = argv[:at], [argv[at]], at + 1
    while i < len(argv):
        token = argv[i]
        name = token.split("=", 1)[0]
        if token == "--":
            rest += argv[i:]
            break
        if name in GLOBAL_OPTIONS and name not in own and rest[-1] not in valued:
            takes_value = GLOBAL_OPTIONS[name] and "=" not in token
            front += argv[i:i + 2] if takes_value else [token]
            i += 2 if takes_value else 1
            continue
        rest.append(token)
        i += 1
    return front + rest


def _option_names(command: Optional[click.Command]) -> tuple[set[str], set[str]]:
    """(every option name of `command` and its subcommands, those that take a value)."""
    own: set[str] = set()
    valued: set[str] = set()
    stack = [command] if command is not None else []
    while stack:
        cmd = stack.pop()
        for param in cmd.params:
            if isinstance(param, click.Option):
                names = set(param.opts) | set(param.secondary_opts)
                own |= names
                if not param.is_flag and not param.count:
                    valued |= names
        if isinstance(cmd, click.Group):
            stack += [c for c in cmd.commands.values()]
    return own, valued


def run_guarded(call: Callable[[], Any], *, debug: bool) -> int:
    """Run `call`, turning every exception into one stderr line and an exit code."""
    _SAID.clear()
    try:
        value = call()
        return value if isinstance(value, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        exc.show()
        return EXIT_USAGE
    except click.ClickException as exc:  # FileError and friends: a usage problem
        exc.show()
        return EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Terminated into Abort too
        return say_interrupted()
    except Exception as exc:  # MiError: the user's problem; anything else a bug. One line, unless --debug
        if debug:
            traceback.print_exc()
        code, message = describe_error(exc)
        # Messages quote model-supplied names: control characters made visible, one line.
        message = visible(message)
        click.echo(f"Error: {message}" if isinstance(exc, MiError) or code != EXIT_INTERNAL
                   else message[0].upper() + message[1:], err=True)
        return code


@click.group(cls=MiGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML run config: a section per command, keys = flag names; flags win.")
@click.option("-v", "--verbose", count=True, help="More detail on stderr (repeatable).")
@click.option("-q", "--quiet", is_flag=True, help="No tables or progress; only errors and requested data.")
@click.option("--no-color", is_flag=True, help="Plain text, no colours (NO_COLOR is honoured too).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option("--wide", is_flag=True, help="Tables: every column (by default the terminal shows the essential ones).")
@click.option("--columns", "columns", metavar="A,B", default="",
              help="Tables: extra columns to show, by header, e.g. shape,max_rel,mean_abs.")
@click.version_option(__version__, "-V", "--version", prog_name="mi")
@click.pass_context
def cli(ctx: click.Context, config_path: Optional[str], verbose: int, quiet: bool, no_color: bool,
        debug: bool, wide: bool, columns: str) -> None:
    """model-inspector: diagnostics for ONNX models (compare, validate, probe, nan-bisect, profile, report).

    Exit codes: 0 ran and every gate passed; 1 a gate failed or a defect was found; 2 usage or
    config error; 3 the model or inputs could not be analysed; 4 internal error; 130 interrupted
    (Ctrl-C); 143 terminated (SIGTERM).
    """
    ctx.obj = AppState(quiet=quiet, verbose=verbose, no_color=no_color, debug=debug, config_path=config_path,
                       wide=wide, columns=tuple(c.strip() for c in columns.split(",") if c.strip()))
    # onnxruntime's coloured log lines repeat errors that reach mi as exceptions (and become its
    # Error: line): fatal only, unless -v (errors) or -vv (warnings) asks for them.
    from .core.ortlog import set_log_severity  # imports nothing

    set_log_severity(4 if quiet or not verbose else max(0, 4 - verbose))
    if config_path and ctx.invoked_subcommand:
        apply_config(ctx, config_path, ctx.invoked_subcommand)


def apply_config(ctx: click.Context, config_path: str, command_name: str) -> None:
    """Load the config and install its section as the subcommand's defaults (flags still win)."""
    from .config.loader import check_top_level, load_config_file, section_default_map

    group = ctx.command
    assert isinstance(group, MiGroup)
    config = load_config_file(config_path)
    check_top_level(config, list(COMMANDS))
    command = group.get_command(ctx, command_name)
    if command is None:
        return
    # Command modules are light to import (heavy imports live inside their functions).
    others = {name: c for name in COMMANDS if name != command_name
              for c in [group.get_command(ctx, name)] if c is not None}
    defaults = section_default_map(config, command_name, command, others)
    ctx.default_map = {command_name: defaults}


def main() -> None:
    """Console-script entry point."""
    # Loading a 50,000-node graph makes millions of long-lived objects and no garbage cycles; at the
    # default threshold (700) the cyclic collector rescanned them ~25% of the CPU time of `mi inspect`.
    gc.set_threshold(10_000, 10, 10)
    one_blas_thread()
    OWNS_PROCESS.append(True)
    cli.main()


OWNS_PROCESS: List[bool] = []
"""Set by `main` (the `mi` console script, `python -m inspector_cli`): this process is mi's own, so its
exit path may end it at once (`exit_without_finalising`). Not set for an in-process caller (click's
CliRunner, a library), whose interpreter goes on after the command."""


BLAS_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """numpy's BLAS on one thread, unless the user set it (read when numpy is first imported).

    mi's numpy work is element-wise plus float64 dot products for the metrics; above ~10,000 elements
    OpenBLAS splits each dot product over every core, where onnxruntime's threads are running (64
    samples of a 128x256-output encoder: 10.0 -> 7.0 s of CPU with one BLAS thread), and the split makes
    the last bits of a metric depend on the machine's core count. Workers inherit the setting.
    """
    for name in BLAS_THREAD_ENV:
        os.environ.setdefault(name, "1")


if __name__ == "__main__":  # pragma: no cover
    main()
