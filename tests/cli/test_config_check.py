"""`mi config check` lists every problem with file:line; the shipped JSON Schema is up to date."""
from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
import yaml

from inspector_cli.cli import COMMANDS, cli
from inspector_cli.config.loader import load_config_file
from inspector_cli.config.schema import SCHEMA_PATH, build_schema, schema_text
from inspector_cli.config.suite import STEP_KINDS

from ..fixtures.helpers import affine_model, invoke, save

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def commands():
    ctx = click.Context(cli)
    return {name: cli.get_command(ctx, name) for name in COMMANDS}


def error_lines(stderr: str):
    return re.findall(r"^Error: .*?:(\d+): (.*)$", stderr, flags=re.M)


def test_check_reports_every_problem_of_a_suite_in_file_order(tmp_path):
    save(affine_model(), tmp_path / "a.onnx")
    (tmp_path / "suite.yaml").write_text(
        "version: 1\n"
        "defaults:\n  opt-levl: all\n"                              # 3
        "steps:\n"
        "  - compair:\n      model-a: a.onnx\n"                     # 5
        "  - name: x\n    compare:\n"
        "      model-a: missing.onnx\n"                             # 9
        "      model-b: a.onnx\n"
        "      max-abz: 0.1\n"                                      # 11
        "      samples: many\n"                                     # 12
        "      inputs: ${MI_T_UNSET}/data\n")                       # 13
    result = invoke(["config", "check", tmp_path / "suite.yaml"], exit_code=2, env={"MI_T_UNSET": None})
    assert error_lines(result.stderr) == [
        ("3", "defaults.opt-levl: unknown key (did you mean 'opt-level'?)"),
        ("5", "steps[0].compair: unknown step kind 'compair' (did you mean 'compare'?)"),
        ("9", f"step 'x': compare.model-a: File '{tmp_path / 'missing.onnx'}' does not exist."),
        ("11", "step 'x': compare.max-abz: unknown key (did you mean 'max-abs'?)"),
        ("12", "step 'x': compare.samples: 'many' is not a valid integer range."),
        ("13", "steps[1].compare.inputs: environment variable MI_T_UNSET is not set (set it, or give a default: "
               "${MI_T_UNSET:-value})"),
    ]
    assert "suite.yaml: suite: 6 problem(s)" in result.stdout


def test_check_reports_every_problem_of_a_run_config(tmp_path):
    (tmp_path / "run.yaml").write_text("version: 1\ncompair:\n  x: 1\ndefaults:\n  seed: abc\ncompare:\n"
                                       "  min-cosine: high\n  opt-level: fastest\n  inputs: nowhere/\n")
    result = invoke(["config", "check", tmp_path / "run.yaml"], exit_code=2)
    lines = error_lines(result.stderr)
    assert [n for n, _ in lines] == ["2", "5", "7", "8", "9"]
    assert lines[0][1] == "compair: unknown section (did you mean 'compare'?)"
    assert lines[1][1] == "defaults.seed: 'abc' is not a valid integer."
    assert lines[2][1] == "compare.min-cosine: 'high' is not a number or NAME=NUMBER"
    assert lines[3][1].startswith("compare.opt-level: 'fastest' is not one of 'disable', 'basic'")
    assert "nowhere' does not exist" in lines[4][1]


def test_check_preprocessing_files_and_valid_files(tmp_path):
    (tmp_path / "pre.yaml").write_text("version: 1\npreprocess:\n  resize: 256\n  std: [1, 0, 1]\n"
                                       "  chanel-order: BGR\n")
    result = invoke(["config", "check", tmp_path / "pre.yaml"], exit_code=2)
    assert error_lines(result.stderr) == [
        ("4", "preprocess.std: std must not be 0"),
        ("5", "preprocess.chanel-order: unknown preprocessing key (did you mean 'channel-order'?)")]
    result = invoke(["config", "check", CONFIGS / "imagenet-preprocess.yaml", CONFIGS / "compare-int8.yaml"])
    assert "imagenet-preprocess.yaml: preprocessing spec: OK" in result.stdout
    assert "compare-int8.yaml: run config: OK" in result.stdout
    (tmp_path / "broken.yaml").write_text("compare: [\n")
    result = invoke(["config", "check", tmp_path / "broken.yaml"], exit_code=2)
    assert "broken.yaml: unreadable: 1 problem(s)" in result.stdout and "invalid YAML" in result.stderr


def test_loader_records_lines_of_list_items(tmp_path):
    (tmp_path / "s.yaml").write_text("steps:\n  - compare:\n      seed: 1\n  - name: b\n    compare: {}\n")
    lines = load_config_file(tmp_path / "s.yaml").lines
    assert lines[("steps", "0")] == 2 and lines[("steps", "0", "compare", "seed")] == 3
    assert lines[("steps", "1", "name")] == 4 and lines[("steps", "1", "compare")] == 5


def test_shipped_schema_is_up_to_date():
    """Regenerate with: mi config schema --out inspector_cli/schemas/config-file.json"""
    assert SCHEMA_PATH.read_text() == schema_text(build_schema(commands())), \
        "out of date: run mi config schema --out inspector_cli/schemas/config-file.json"
    invoke(["config", "schema", "--check"])
    result = invoke(["config", "schema"])
    assert result.stdout == SCHEMA_PATH.read_text()


def test_schema_describes_flags_types_and_steps():
    schema = json.loads(SCHEMA_PATH.read_text())
    compare = schema["$defs"]["command.compare"]["properties"]
    assert compare["opt-level"]["enum"] == ["disable", "basic", "extended", "all"]
    assert compare["opt_level"] == {"$ref": "#/$defs/command.compare/properties/opt-level"}
    assert {"model-a", "model-b", "min-cosine", "inputs", "preprocess", "raw-dtype"} <= set(compare)
    assert "gate_min_cosine" not in compare and "json_path" not in compare   # parameter names are not keys
    kinds = [k for k in STEP_KINDS if k in COMMANDS]
    assert [o["required"] for o in schema["$defs"]["step"]["oneOf"]] == [[k] for k in kinds]


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_validates_against_the_schema(path):
    jsonschema = pytest.importorskip("jsonschema")
    data = yaml.safe_load(path.read_text())
    needed = [k for k in data if k in STEP_KINDS] + [k for s in data.get("steps") or [] for k in s if k in STEP_KINDS]
    missing = sorted({k for k in needed if k not in COMMANDS})
    if missing:
        pytest.skip(f"{path.name} uses mi {', '.join(missing)}, not in this build yet")
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(data, schema)


@pytest.mark.parametrize("data", [
    {"version": 1, "compare": {"max-abz": 1}},
    {"version": 1, "compare": {"samples": "many"}},
    {"version": 1, "steps": [{"compair": {}}]},
    {"version": 1, "steps": [{"name": "x"}]},
    {"version": 1, "preprocess": {"layout": "NCWH"}},
], ids=["unknown-key", "wrong-type", "unknown-kind", "no-kind", "bad-enum"])
def test_schema_rejects_bad_configs(data):
    jsonschema = pytest.importorskip("jsonschema")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
