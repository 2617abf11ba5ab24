"""SARIF 2.1.0 output: valid against the official schema (committed in tests/data), and the right content."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..fixtures.helpers import invoke, save
from ..fixtures.validate_cases import input_q, relu_model

SCHEMA = Path(__file__).resolve().parents[1] / "data" / "sarif-2.1.0-rtm.5.json"


def schema_validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft4Validator(schema)


@pytest.fixture()
def broken_int8(tmp_path):
    """Input quantisation that saturates for 0..255 pixels, and an unused initializer."""
    from ..fixtures.helpers import init

    model = input_q(1 / 128, 0)
    import numpy as np

    model.graph.initializer.append(init("leftover", np.ones(3, np.float32)))
    return save(model, tmp_path / "int8.onnx")


def test_sarif_is_valid_and_carries_rules_levels_and_locations(broken_int8, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(["validate", "int8.onnx", "--input-range", "input:0,255", "--format", "sarif"], exit_code=1)
    log = json.loads(result.stdout)
    validator = schema_validator()
    errors = sorted(validator.iter_errors(log), key=str)
    assert not errors, [e.message for e in errors[:5]]
    broken = json.loads(result.stdout)
    broken["runs"][0]["results"][0]["level"] = "fatal"  # the schema really constrains what we write
    assert list(validator.iter_errors(broken))
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["MI304", "MI507"]
    assert rules[1]["name"] == "InputRangeSaturates" and rules[1]["defaultConfiguration"]["level"] == "error"
    assert "scale*(qmin-zp)" in rules[1]["help"]["text"]
    assert run["artifacts"][0]["location"]["uri"] == "int8.onnx"
    assert len(run["artifacts"][0]["hashes"]["sha-256"]) == 64
    by_rule = {r["ruleId"]: r for r in run["results"]}
    saturate = by_rule["MI507"]
    assert saturate["level"] == "error" and saturate["ruleIndex"] == 1
    assert "99.6% of the declared range [0, 255]" in saturate["message"]["text"]
    location = saturate["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "int8.onnx"
    assert location["logicalLocations"][0] == {"name": "input_q", "fullyQualifiedName": "int8.onnx/input_q",
                                               "kind": "function"}
    assert location["logicalLocations"][1]["name"] == "input" and location["logicalLocations"][1]["kind"] == "variable"
    assert by_rule["MI304"]["level"] == "warning"
    assert by_rule["MI304"]["locations"][0]["logicalLocations"] == [
        {"name": "leftover", "fullyQualifiedName": "int8.onnx/leftover", "kind": "variable"}]


def test_severity_override_shows_in_sarif_levels(broken_int8, tmp_path):
    out = tmp_path / "r.sarif"
    invoke(["validate", broken_int8, "--severity", "MI304=info", "--sarif", out, "--format", "json"], exit_code=0)
    run = json.loads(out.read_text())["runs"][0]
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("MI304", "note")]
    assert run["tool"]["driver"]["rules"][0]["defaultConfiguration"]["level"] == "warning"
    assert run["artifacts"][0]["location"]["uri"].startswith("file://")  # an absolute path becomes a file URI
    assert not list(schema_validator().iter_errors(json.loads(out.read_text())))


def test_clean_model_gives_an_empty_valid_log(tmp_path):
    path = save(relu_model(), tmp_path / "m.onnx")
    log = json.loads(invoke(["validate", path, "--format", "sarif"], exit_code=0).stdout)
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []
    assert not list(schema_validator().iter_errors(log))


def test_a_file_that_does_not_load_is_a_sarif_result(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"")
    log = json.loads(invoke(["validate", path, "--format", "sarif"], exit_code=1).stdout)
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["MI101"]
    assert not list(schema_validator().iter_errors(log))
