"""Run configs: precedence, coercion, relative paths, and file:line errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inspector_cli.cli import COMMANDS, cli
from inspector_cli.config.loader import load_config_file, section_default_map

from ..fixtures.helpers import affine_model, invoke, read_json, save, save_npz

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture()
def pair(tmp_path):
    a = save(affine_model(), tmp_path / "a.onnx")
    b = save(affine_model(scale=1.1, shift=0.05), tmp_path / "b.onnx")
    save_npz(tmp_path / "data", [{"x": np.array([[1, 2, 3, 4]], np.float32)}])
    return a, b


def data_of(path):
    return ["--inputs", Path(path).parent / "data"]


def write(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def gates_of(path):
    return {g["gate"]: g["passed"] for g in read_json(path)["results"]["gates"]}


def test_precedence_flag_over_section_over_defaults(tmp_path, pair):
    a, b = pair
    cfg = write(tmp_path, "version: 1\ndefaults:\n  opt-level: basic\n  seed: 3\ncompare:\n  max-abs: 0.3\n  opt-level: extended\n")
    invoke(["-c", cfg, "compare", a, b, *data_of(a), "--json", tmp_path / "r.json"], exit_code=1)  # 0.45 > 0.3
    doc = read_json(tmp_path / "r.json")
    assert doc["config"]["runtime"]["opt_level"] == "extended"                          # section beats defaults
    invoke(["-c", cfg, "compare", a, b, "--max-abs", "9", "--json", tmp_path / "r3.json"])
    assert read_json(tmp_path / "r3.json")["config"]["synthetic"]["seed"] == 3          # defaults apply
    invoke(["-c", cfg, "compare", a, b, *data_of(a), "--max-abs", "0.5", "--opt-level", "disable",
            "--json", tmp_path / "r2.json"])
    doc2 = read_json(tmp_path / "r2.json")
    assert gates_of(tmp_path / "r2.json") == {"--max-abs 0.5": True}                    # flag beats section
    assert doc2["config"]["runtime"]["opt_level"] == "disable"


def test_numbers_like_1e_minus_3_are_coerced(tmp_path, pair):
    a, b = pair
    cfg = write(tmp_path, "compare:\n  max-abs: 1e-3\n  min-cosine: [0.5, 'y=0.9']\n")
    invoke(["-c", cfg, "compare", a, b, *data_of(a), "--json", tmp_path / "r.json"], exit_code=1)
    assert gates_of(tmp_path / "r.json") == {"--max-abs 0.001": False, "--min-cosine y=0.9": True}


def test_mapping_values_for_per_output_gates(tmp_path, pair):
    a, b = pair
    cfg = write(tmp_path, "compare:\n  max-abs: {y: 0.5}\n")
    invoke(["-c", cfg, "compare", a, b, *data_of(a), "--json", tmp_path / "r.json"])
    assert gates_of(tmp_path / "r.json") == {"--max-abs y=0.5": True}


def test_paths_are_relative_to_the_config_file(tmp_path, pair):
    a, b = pair
    sub = tmp_path / "cfg"
    sub.mkdir()
    (sub / "run.yaml").write_text("compare:\n  inputs: [../data]\n")
    invoke(["-c", sub / "run.yaml", "compare", a, b, "--json", tmp_path / "r.json"])
    assert read_json(tmp_path / "r.json")["inputs"]["count"] == 1
    assert read_json(tmp_path / "r.json")["inputs"]["source"].endswith("data")


@pytest.mark.parametrize("text,message", [
    ("compare:\n  max-abz: 0.1\n", r"run\.yaml:2: compare\.max-abz: unknown key \(did you mean 'max-abs'\?\)"),
    ("compare:\n  samples: many\n", r"run\.yaml:2: compare\.samples: 'many' is not a valid integer"),
    ("compare:\n  min-cosine: high\n", r"run\.yaml:2: compare\.min-cosine: 'high' is not a number"),
    ("compair:\n  max-abs: 0.1\n", r"run\.yaml:1: compair: unknown section \(did you mean 'compare'\?\)"),
    ("version: 2\n", r"run\.yaml:1: version: version 2 is not supported"),
    ("compare: [1, 2]\n", r"run\.yaml:1: compare: expected a mapping"),
    ("compare:\n  max-abs: 0.1\n bad: [\n", r"run\.yaml:\d+: invalid YAML"),
    ("defaults:\n  flavour: 1\n", r"run\.yaml:2: defaults\.flavour: unknown key"),
    ("compare:\n  samples: [1, 2]\n", r"run\.yaml:2: compare\.samples: expected a single value"),
])
def test_config_errors_name_file_and_line(tmp_path, pair, text, message):
    a, b = pair
    cfg = write(tmp_path, text)
    result = invoke(["-c", cfg, "compare", a, b], exit_code=2)
    assert result.stderr.startswith("Error: ")
    import re
    assert re.search(message, result.stderr), result.stderr


def test_missing_config_file(tmp_path, pair):
    a, b = pair
    result = invoke(["-c", tmp_path / "nope.yaml", "compare", a, b], exit_code=2)
    assert "config file not found" in result.stderr


def test_yaml_is_loaded_safely(tmp_path, pair):
    a, b = pair
    cfg = write(tmp_path, "compare:\n  seed: !!python/object/apply:os.system ['echo pwned']\n")
    result = invoke(["-c", cfg, "compare", a, b], exit_code=2)
    assert "invalid YAML" in result.stderr


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    """Every file in configs/ parses and each command section validates against its command."""
    import click

    from inspector_cli.config.suite import STEP_KINDS

    config = load_config_file(path)
    ctx = click.Context(cli)
    commands = {name: cli.get_command(ctx, name) for name in COMMANDS}
    missing = [name for name in config.data if name in STEP_KINDS and name not in commands]
    if missing:
        pytest.skip(f"{path.name} configures mi {', '.join(missing)}, not in cli.COMMANDS yet")
    sections = [name for name in config.data if name in commands]
    assert sections or "steps" in config.data or "preprocess" in config.data, f"{path.name} configures no command"
    for name in sections:
        others = {n: c for n, c in commands.items() if n != name}
        section_default_map(config, name, commands[name], others)
