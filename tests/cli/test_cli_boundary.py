"""The error boundary, the global-option hoisting and the help list of `mi` (inspector_cli/cli.py),
exact messages and exit codes; written from the survivors of `scripts/mutation.sh cli`."""
from __future__ import annotations

import warnings
from pathlib import Path

import click
import onnx
import pytest

from inspector_cli.cli import (COMMANDS, SUMMARIES, _option_names, _quiet_flag, cli, hoist_global_options,
                               library_warnings, run_guarded)
from inspector_cli.core.ortlog import log_severity, set_log_severity
from inspector_cli.errors import ModelLoadError, UsageError

from ..fixtures.helpers import affine_model, invoke


def _raise(exc: BaseException):
    def call() -> None:
        raise exc
    return call


# ---- run_guarded --------------------------------------------------------------------------------
def test_run_guarded_returns_the_calls_int_and_zero_otherwise() -> None:
    assert run_guarded(lambda: 7, debug=False) == 7
    assert run_guarded(lambda: None, debug=False) == 0
    assert run_guarded(lambda: "done", debug=False) == 0


def test_run_guarded_click_errors_show_their_message(capsys: pytest.CaptureFixture) -> None:
    assert run_guarded(_raise(click.UsageError("no such option: --frob")), debug=False) == 2
    assert capsys.readouterr().err == "Error: no such option: --frob\n"
    assert run_guarded(_raise(click.FileError("m.onnx", "gone")), debug=False) == 2
    assert capsys.readouterr().err == "Error: Could not open file 'm.onnx': gone\n"
    assert run_guarded(_raise(click.exceptions.Exit(0)), debug=False) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("exc", [click.exceptions.Abort(), KeyboardInterrupt()])
def test_run_guarded_interrupt_says_reports_are_complete(exc: BaseException, capsys: pytest.CaptureFixture) -> None:
    assert run_guarded(_raise(exc), debug=False) == 130
    assert capsys.readouterr().err == "Interrupted; reports already written are complete.\n"


def test_run_guarded_mi_error_is_one_visible_error_line(capsys: pytest.CaptureFixture) -> None:
    assert run_guarded(_raise(ModelLoadError("m.onnx: node 'a\x1b[2Jb' is bad", hint="re-export")), debug=False) == 3
    assert capsys.readouterr().err == "Error: m.onnx: node 'a\\x1b[2Jb' is bad (re-export)\n"
    assert run_guarded(_raise(UsageError("--x: bad")), debug=False) == 2
    assert capsys.readouterr().err == "Error: --x: bad\n"


def test_run_guarded_disk_full_is_an_error_line_not_a_bug(capsys: pytest.CaptureFixture) -> None:
    assert run_guarded(_raise(OSError(28, "No space left on device", "r.json")), debug=False) == 3
    assert capsys.readouterr().err == "Error: r.json: cannot write: no space left on device\n"


def test_run_guarded_bug_is_capitalised_without_traceback_unless_debug(capsys: pytest.CaptureFixture) -> None:
    assert run_guarded(_raise(ValueError("bad")), debug=False) == 4
    err = capsys.readouterr().err
    assert err == "Internal error: ValueError: bad (this is a bug in mi; rerun with --debug for the traceback)\n"
    assert run_guarded(_raise(ValueError("bad")), debug=True) == 4
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n") and "ValueError: bad\n" in err
    assert err.endswith("Internal error: ValueError: bad (this is a bug in mi; rerun with --debug for the traceback)\n")
    assert run_guarded(_raise(UsageError("u")), debug=True) == 2
    assert "Traceback" in capsys.readouterr().err


# ---- -q and library warnings ----------------------------------------------------------------------
@pytest.mark.parametrize("argv, quiet", [
    (["-q", "validate", "m"], True), (["--quiet", "validate", "m"], True), (["-vq", "validate"], True),
    (["-v", "validate", "-q"], False),  # after the command: the command's own (hoisting moves it first)
    (["-c", "-q", "validate"], False),  # -q is the config file's name
    (["--config", "-q"], False), (["-cq"], False), (["--quick"], False), (["validate", "-q"], False), ([], False),
    (["-v", "--no-color", "-q"], True),
])
def test_quiet_flag_only_among_the_groups_options(argv: list, quiet: bool) -> None:
    assert _quiet_flag(argv) is quiet


def test_library_warnings_one_line_or_none_and_restored(capsys: pytest.CaptureFixture) -> None:
    with library_warnings(quiet=False):
        warnings.warn("invalid value\x1b[2J", RuntimeWarning)
    assert capsys.readouterr().err == "warning: invalid value\\x1b[2J\n"
    with library_warnings(quiet=True):
        warnings.warn("invalid value", RuntimeWarning)
    assert capsys.readouterr().err == ""
    with warnings.catch_warnings(record=True) as caught:  # the caller's own handling is back
        warnings.simplefilter("always")
        warnings.warn("after", UserWarning)
    assert [str(w.message) for w in caught] == ["after"]


# ---- hoisting -------------------------------------------------------------------------------------
def test_hoist_leaves_argv_without_a_command_or_where_the_command_is_an_options_value() -> None:
    assert hoist_global_options(cli, ["--version", "-q"]) == ["--version", "-q"]
    assert hoist_global_options(cli, ["-c", "compare", "validate", "-q"]) == ["-c", "compare", "validate", "-q"]
    assert hoist_global_options(cli, ["--columns", "run", "x", "-q"]) == ["--columns", "run", "x", "-q"]


def test_hoist_moves_valued_options_with_their_value_and_keeps_a_commands_own_option() -> None:
    assert hoist_global_options(cli, ["validate", "m.onnx", "--columns", "shape", "-q"]) == [
        "--columns", "shape", "-q", "validate", "m.onnx"]
    assert hoist_global_options(cli, ["validate", "m.onnx", "--columns=shape", "x"]) == [
        "--columns=shape", "validate", "m.onnx", "x"]
    # a global option that is also the command's own stays with the command
    own, _ = _option_names(cli.get_command(click.Context(cli), "compare"))
    shared = sorted(set(own) & {"-c", "--config", "--columns", "--wide", "-v", "--verbose", "-q", "--quiet"})
    for name in shared:
        assert hoist_global_options(cli, ["compare", "a", name]) == ["compare", "a", name]


def test_option_names_of_a_group_include_its_subcommands_and_which_take_values() -> None:
    config = cli.get_command(click.Context(cli), "config")
    own, valued = _option_names(config)
    sub_options = {opt for sub in config.commands.values() for p in sub.params
                   if isinstance(p, click.Option) for opt in p.opts}
    assert sub_options and sub_options <= own
    assert valued <= own
    flags = {opt for sub in config.commands.values() for p in sub.params
             if isinstance(p, click.Option) and (p.is_flag or p.count) for opt in p.opts}
    assert not (flags & valued)
    assert _option_names(None) == (set(), set())
    profile_own, profile_valued = _option_names(cli.get_command(click.Context(cli), "profile"))
    assert "--runs" in profile_valued and "--help" not in profile_valued


# ---- the command list, lazy commands, config ---------------------------------------------------------
def test_help_lists_every_command_with_its_summary_in_order() -> None:
    out = invoke(["--help"]).stdout
    listed = [line.split()[0] for line in out.split("Commands:\n", 1)[1].splitlines() if line.startswith("  ")]
    assert listed == sorted(COMMANDS)
    assert "\n  nan-bisect  Find the node where NaN/Inf values are born in MODEL" in out
    assert set(SUMMARIES) == set(COMMANDS)


def test_unknown_command_is_a_usage_error_naming_it() -> None:
    result = invoke(["frobnicate"], exit_code=2)
    assert "Error: No such command 'frobnicate'." in result.stderr
    assert cli.get_command(click.Context(cli), "frobnicate") is None


def test_log_severity_follows_quiet_and_verbose(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(affine_model(2.0, 1.0), model)
    before = log_severity()
    try:
        for flags, level in ([], 4), (["-q"], 4), (["-v"], 3), (["-vv"], 2), (["-vvvvv"], 0), (["-q", "-v"], 4):
            invoke([*flags, "validate", model], exit_code=0)
            assert log_severity() == level, flags
    finally:
        set_log_severity(before)


def test_config_section_becomes_the_commands_defaults_and_flags_win(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(affine_model(2.0, 1.0), model)
    config = tmp_path / "run.yaml"
    config.write_text(f"validate:\n  json: {tmp_path / 'from_config.json'}\n")
    invoke(["-q", "-c", config, "validate", model], exit_code=0)
    assert (tmp_path / "from_config.json").is_file()
    invoke(["-q", "-c", config, "validate", model, "--json", tmp_path / "flag.json"], exit_code=0)
    assert (tmp_path / "flag.json").is_file()
    config.write_text("validat:\n  json: x.json\n")
    result = invoke(["-q", "-c", config, "validate", model], exit_code=2)
    assert result.stderr.startswith("Error: ") and "validat: unknown section" in result.stderr


# ---- from the survivors of the first run -----------------------------------------------------------
@click.command()
def warn_command() -> None:
    """Emits a library-style warning (registered as a command only inside the test below)."""
    warnings.warn("overflow encountered in reduce", RuntimeWarning)


def test_quiet_silences_library_warnings_of_a_command_and_otherwise_one_line(monkeypatch) -> None:
    monkeypatch.setitem(COMMANDS, "warnme", "tests.cli.test_cli_boundary:warn_command")
    monkeypatch.setitem(SUMMARIES, "warnme", "test only")
    assert invoke(["warnme"]).stderr == "warning: overflow encountered in reduce\n"
    assert invoke(["-q", "warnme"]).stderr == ""
    assert invoke(["warnme", "-q"]).stderr == ""  # hoisted in front: the group's -q


def test_main_reads_sys_argv_and_names_itself_mi(monkeypatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr("sys.argv", ["/usr/bin/python-entry", "validate", "--help"])
    assert cli.main(standalone_mode=False) == 0
    assert capsys.readouterr().out.startswith("Usage: mi validate [OPTIONS] [MODEL]\n")
    monkeypatch.setattr("sys.argv", ["/usr/bin/python-entry", "frobnicate"])
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    assert "Error: No such command 'frobnicate'." in capsys.readouterr().err


def test_main_passes_context_settings_through(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["--help"], standalone_mode=False, terminal_width=50) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: mi [OPTIONS] COMMAND [ARGS]...") and max(len(line) for line in out.splitlines()) <= 50
    assert cli.main(["--help"], standalone_mode=False, terminal_width=100) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) > 50


def test_quiet_flag_with_a_trailing_config_flag() -> None:
    assert _quiet_flag(["-c"]) is False and _quiet_flag(["--config"]) is False


def test_hoist_with_group_options_on_both_sides_and_edge_tokens() -> None:
    assert hoist_global_options(cli, ["-v", "validate", "m.onnx", "-q"]) == ["-v", "-q", "validate", "m.onnx"]
    assert hoist_global_options(cli, ["validate", "m.onnx", "-c"]) == ["-c", "validate", "m.onnx"]
    assert hoist_global_options(cli, ["--config", "compare", "validate", "-q"]) == [
        "--config", "compare", "validate", "-q"]
    assert hoist_global_options(cli, ["validate", "m.onnx", "--columns=a=b"]) == ["--columns=a=b", "validate", "m.onnx"]


def test_help_rows_fill_the_width_less_the_name_column() -> None:
    formatter = click.HelpFormatter(width=80)
    cli.format_commands(click.Context(cli), formatter)
    rows = formatter.getvalue().splitlines()
    # width 80 - 6 - len("nan-bisect"): summaries are cut at 64 characters (with '...')
    assert rows[0] == "Commands:"
    assert "  profile     Profile MODEL with onnxruntime: per-node latency, op types,..." in rows
    assert max(len(r) for r in rows) <= 80


def test_config_defaults_may_hold_keys_of_other_commands_only(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(affine_model(2.0, 1.0), model)
    config = tmp_path / "run.yaml"
    config.write_text("defaults:\n  runs: 5\n")  # a profile flag: ignored by validate
    invoke(["-q", "-c", config, "validate", model], exit_code=0)
    config.write_text("defaults:\n  frobs: 5\n")
    result = invoke(["-q", "-c", config, "validate", model], exit_code=2)
    assert "defaults.frobs: unknown key" in result.stderr


def test_help_summary_exactly_as_long_as_the_room_is_shown_whole(monkeypatch) -> None:
    # width 80 - 6 - len("nan-bisect") = 64 characters of room
    summary = "word " * 12 + "last"  # 64 characters
    assert len(summary) == 64
    monkeypatch.setitem(SUMMARIES, "compare", summary)
    formatter = click.HelpFormatter(width=80)
    cli.format_commands(click.Context(cli), formatter)
    assert f"  compare     {summary}" in formatter.getvalue().splitlines()
