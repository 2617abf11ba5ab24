"""`mi validate` on the command line: exit codes, formats, rule settings from flags and YAML."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inspector_cli.serialize import result_from_document
from inspector_cli.validate.catalog import RULES

from ..fixtures.helpers import init, invoke, make_model, read_json, save, vi
from ..fixtures.validate_cases import input_q, node

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def leftovers(tmp_path):
    """A runnable model with an unused input (MI305, warning) and an Identity (MI605, info)."""
    model = make_model([node("Identity", ["x"], ["i"], "ident"), node("Relu", ["i"], ["y"], "relu")],
                       [vi("x", [1, 4]), vi("unused", [1])], [vi("y", [1, 4])])
    return save(model, tmp_path / "m.onnx")


def rules_in(doc):
    return [(f["rule"], f["severity"]) for f in doc["results"]["findings"]]


def test_warnings_pass_by_default_and_fail_with_fail_on_warning(leftovers, tmp_path):
    invoke(["validate", leftovers, "--json", tmp_path / "a.json"], exit_code=0)
    doc = read_json(tmp_path / "a.json")
    assert doc["kind"] == "validate" and doc["verdict"]["passed"] is True
    assert rules_in(doc) == [("MI305", "warning"), ("MI605", "info")]
    assert doc["verdict"]["summary"] == "PASS: 0 errors, 1 warning, 1 info (failing at error or above)"
    invoke(["validate", leftovers, "--fail-on", "warning", "--json", tmp_path / "b.json"], exit_code=1)
    assert read_json(tmp_path / "b.json")["verdict"]["exit_code"] == 1
    invoke(["validate", leftovers, "--fail-on", "info", "--disable", "MI305"], exit_code=1)
    invoke(["validate", leftovers, "--fail-on", "info", "--disable", "MI305,hints"], exit_code=0)


def test_severity_flags_relevel_and_switch_off(leftovers, tmp_path):
    invoke(["validate", leftovers, "--severity", "MI305=error", "--json", tmp_path / "r.json"], exit_code=1)
    assert rules_in(read_json(tmp_path / "r.json"))[0] == ("MI305", "error")
    invoke(["validate", leftovers, "--severity", "MI6xx=off", "--severity", "MI305=info", "--json",
            tmp_path / "r2.json"], exit_code=0)
    doc = read_json(tmp_path / "r2.json")
    assert rules_in(doc) == [("MI305", "info")]
    assert doc["config"]["severity"] == {"MI305": "info"} and "MI606" in doc["config"]["disable"]


def test_yaml_config_disables_and_relevels(tmp_path):
    """The issue's example: validate: {disable: [MI305], severity: {MI210: error}}."""
    from ..fixtures.validate_cases import custom_op_model

    model = custom_op_model(typed_output=False)
    model.graph.input.append(vi("unused", [1]))
    path = save(model, tmp_path / "m.onnx")
    cfg = tmp_path / "mi.yaml"
    cfg.write_text("version: 1\nvalidate:\n  disable: [MI305, MI403]\n  severity: {MI210: error, MI6xx: off}\n")
    invoke(["-c", cfg, "validate", path, "--json", tmp_path / "r.json"], exit_code=1)
    doc = read_json(tmp_path / "r.json")
    assert rules_in(doc) == [("MI210", "error")]
    assert {"MI305", "MI403", "MI601", "MI606"} <= set(doc["config"]["disable"])  # `off` in YAML is false
    assert doc["results"]["skipped"]["hints"] == "all its rules are disabled"
    invoke(["validate", path, "--json", tmp_path / "plain.json"], exit_code=1)  # MI403 is an error by default
    assert ("MI305", "warning") in rules_in(read_json(tmp_path / "plain.json"))


@pytest.mark.parametrize("args,message", [
    (["--disable", "MI999"], "--disable MI999: no such rule"),
    (["--disable", "MI30"], "--disable MI30: no such rule"),
    (["--severity", "MI305"], "expected RULE=LEVEL"),
    (["--severity", "MI305=fatal"], "expected RULE=LEVEL"),
    (["--input-range", "x:5"], "--input-range x:5: expected NAME:LO,HI"),
    (["--input-range", "x:5,1"], "expected LO < HI"),
    (["--input-range", "nosuch:0,1"], "the model has no input 'nosuch'"),
    (["--fail-on", "fatal"], "'fatal' is not one of"),
])
def test_bad_options_are_usage_errors(leftovers, args, message):
    result = invoke(["validate", leftovers, *args], exit_code=2)
    assert message in result.stderr and "Traceback" not in result.stderr


def test_similar_rule_id_is_suggested(leftovers):
    result = invoke(["validate", leftovers, "--disable", "MI3055"], exit_code=2)
    assert "did you mean MI305?" in result.stderr


def test_missing_model_is_a_usage_error():
    result = invoke(["validate"], exit_code=2)
    assert "missing argument 'MODEL'" in result.stderr


def test_json_round_trips_and_is_written_before_exit_1(tmp_path):
    path = save(input_q(1 / 128, 0), tmp_path / "int8.onnx")
    invoke(["validate", path, "--input-range", "0,255", "--json", tmp_path / "r.json"], exit_code=1)
    document = read_json(tmp_path / "r.json")
    result = result_from_document(document)
    assert result.kind == "validate" and not result.passed
    finding = result.findings[0]
    assert (finding.rule, finding.node, finding.tensor) == ("MI507", "input_q", "input")
    assert finding.data["lost_share"] == pytest.approx((255 - 127.5 / 128) / 255)
    assert document["config"]["input_ranges"] == ["0,255"]
    assert document["models"][0]["role"] == "model" and len(document["models"][0]["sha256"]) == 64
    assert result.rules[0].name == "InputRangeSaturates"


@pytest.mark.parametrize("fmt,fact", [("markdown", "| MI305  |"), ("csv", ",MI305,"), ("table", "MI305")])
def test_text_formats(leftovers, fmt, fact):
    out = invoke(["validate", leftovers, "--format", fmt], exit_code=0).stdout
    assert fact in out
    if fmt != "csv":  # CSV carries the tables only
        assert "PASS: 0 errors, 1 warning, 1 info" in out


def test_quiet_prints_nothing_but_keeps_the_exit_code(leftovers):
    result = invoke(["-q", "validate", leftovers, "--fail-on", "warning"], exit_code=1)
    assert result.stdout == ""


def test_against_tables_in_markdown(cnn_pair):
    fp32, int8, _ = cnn_pair
    out = invoke(["validate", int8, "--against", fp32, "--format", "markdown"], exit_code=0).stdout
    assert "| BatchNormalization |           6 |            0 | removed |" in out
    assert "dequantised weights against" in out and "(+bn_5 folded)" in out


def test_list_rules_in_every_format():
    table = invoke(["validate", "--list-rules", "--format", "csv"]).stdout.splitlines()
    assert len(table) == len(RULES) + 1 and table[1].endswith("MI101,error,loading,EmptyFile,The model file is empty")
    rules = json.loads(invoke(["validate", "--list-rules", "--format", "json"]).stdout)
    assert [r["id"] for r in rules] == sorted(RULES) and rules[0]["help"]
    sarif = json.loads(invoke(["validate", "--list-rules", "--format", "sarif"]).stdout)
    assert sarif[0]["defaultConfiguration"] == {"level": "error"}
    verbose = invoke(["-v", "validate", "--list-rules", "--format", "markdown"]).stdout
    terse = invoke(["validate", "--list-rules", "--format", "markdown"]).stdout
    assert "a Git LFS pointer (run 'git lfs pull')" in verbose and "git lfs" not in terse


def test_the_validate_guide_has_a_row_per_rule():
    guide = (ROOT / "docs" / "guide" / "validate.md").read_text()
    for rule in RULES.values():
        row = f"| {rule.id} | {rule.severity.value} | {rule.name} | {rule.title} |"
        assert row in guide, f"docs/guide/validate.md lacks the row: {row}"


def test_shipped_example_config_runs(leftovers, tmp_path):
    invoke(["-c", ROOT / "configs" / "validate.yaml", "validate", leftovers, "--json", tmp_path / "r.json"],
           exit_code=0)
    assert read_json(tmp_path / "r.json")["config"]["fail_on"] == "error"


def test_nan_weights_fail_and_name_the_consumer(tmp_path):
    model = make_model([node("Mul", ["x", "w"], ["y"], "scale_mul")], [vi("x", [3])], [vi("y", [3])],
                       [init("w", np.array([1, np.nan, 2], np.float32))])
    out = invoke(["validate", save(model, tmp_path / "m.onnx"), "--format", "json"], exit_code=1).stdout
    finding = json.loads(out)["results"]["findings"][0]
    assert (finding["rule"], finding["node"], finding["data"]) == ("MI407", "scale_mul", {"nan": 1, "inf": 0})


def test_help_and_list_rules_import_neither_onnx_nor_onnxruntime():
    import subprocess
    import sys

    code = ("import sys; from inspector_cli.cli import cli; import click.testing as t; "
            "r = t.CliRunner().invoke(cli, ['validate', '--help']); assert r.exit_code == 0, r.output; "
            "r = t.CliRunner().invoke(cli, ['validate', '--list-rules']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('onnxruntime', 'onnx', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_unavailable_provider_is_a_usage_error(leftovers):
    result = invoke(["validate", leftovers, "--providers", "nosuchep"], exit_code=2)
    assert "execution provider 'nosuchep' is not available" in result.stderr
