"""The group's options work after the command too: `mi profile m.onnx --runs 5 -q`."""
from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from inspector_cli.cli import cli, hoist_global_options

from .fixtures.helpers import affine_model, invoke


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(affine_model(2.0, 1.0), path)
    return path


@pytest.mark.parametrize("flags, moved", [
    (["-q"], ["-q"]),
    (["-v", "-v"], ["-v", "-v"]),
    (["--no-color"], ["--no-color"]),
    (["--debug"], ["--debug"]),
    (["-c", "run.yaml"], ["-c", "run.yaml"]),
    (["--config=run.yaml"], ["--config=run.yaml"]),
])
def test_global_options_after_the_command_move_in_front(flags, moved):
    argv = ["profile", "m.onnx", "--runs", "5", *flags]
    assert hoist_global_options(cli, argv) == [*moved, "profile", "m.onnx", "--runs", "5"]


def test_a_value_of_the_commands_option_and_tokens_after_double_dash_stay():
    # "-q" as the value of --shape is its value; after "--" everything is an argument
    assert hoist_global_options(cli, ["compare", "a.onnx", "--shape", "-q"]) == ["compare", "a.onnx", "--shape", "-q"]
    assert hoist_global_options(cli, ["profile", "--", "-q"]) == ["profile", "--", "-q"]


def test_quiet_after_the_command_prints_no_table(model):
    loud = invoke(["profile", model, "--runs", "2", "--warmup", "0"])
    quiet = invoke(["profile", model, "--runs", "2", "--warmup", "0", "-q"])
    assert loud.stdout.strip() and quiet.stdout == ""


def test_no_color_and_verbose_after_the_command_are_accepted(model):
    invoke(["profile", model, "--runs", "2", "--warmup", "0", "--no-color", "-v"])


def test_debug_after_the_command_shows_the_traceback(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    plain = invoke(["profile", bad, "--runs", "2"], exit_code=3)
    debug = invoke(["profile", bad, "--runs", "2", "--debug"], exit_code=3)
    assert "Traceback" not in plain.stderr and "Traceback" in debug.stderr


def test_config_after_the_command_is_read(model, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("version: 1\nprofile:\n  rnus: 3\n")
    result = invoke(["profile", model, "-c", config], exit_code=2)
    assert "rnus" in result.stderr and "runs" in result.stderr  # the unknown key, and "did you mean"
