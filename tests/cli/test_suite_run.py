"""`mi run`: gates keep running after a failure, steps that cannot run stop the suite, reports."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from inspector_cli.config.interpolate import interpolate_text
from inspector_cli.serialize import read_result

from ..fixtures.helpers import affine_model, invoke, read_json, save, save_npz

# a: y = x; b: y = 1.1 x + 0.05. On x = [1, 2, 3, 4]: max |b - a| = 0.45 (at x = 4).


@pytest.fixture()
def work(tmp_path):
    save(affine_model(), tmp_path / "a.onnx")
    save(affine_model(scale=1.1, shift=0.05), tmp_path / "b.onnx")
    (tmp_path / "broken.onnx").write_bytes(b"this is not an onnx file")
    save_npz(tmp_path / "data", [{"x": np.array([[1, 2, 3, 4]], np.float32)}])
    return tmp_path


def suite(folder: Path, body: str, name: str = "suite.yaml") -> Path:
    path = folder / name
    path.write_text("version: 1\n" + body)
    return path


def step(name: str, model_b: str = "b.onnx", gate: str = "max-abs: 1", extra: str = "") -> str:
    return (f"  - name: {name}\n    compare:\n      model-a: a.onnx\n      model-b: {model_b}\n"
            f"      inputs: data\n      {gate}\n{extra}")


def statuses(document):
    return [(s["name"], s["status"], s["exit_code"]) for s in document["results"]["steps"]]


def test_failed_gate_exits_1_writes_reports_and_later_gates_still_run(work):
    path = suite(work, "steps:\n" + step("strict", gate="max-abs: 0.3", extra="      json: strict.json\n")
                 + step("loose") + step("cosine", gate="min-cosine: 0.99"))
    result = invoke(["run", path, "--json", work / "report.json"], exit_code=1)
    doc = read_json(work / "report.json")
    assert doc["kind"] == "suite"
    assert doc["verdict"] == {"passed": False, "exit_code": 1,
                              "summary": "FAIL: 3 steps: 2 passed, 1 failed (strict)"}
    assert statuses(doc) == [("strict", "failed", 1), ("loose", "passed", 0), ("cosine", "passed", 0)]
    strict = doc["results"]["steps"][0]
    assert strict["result"]["kind"] == "compare"
    gate = strict["result"]["results"]["gates"][0]
    assert gate["gate"] == "--max-abs 0.3" and gate["worst"] == pytest.approx(0.45, abs=1e-6)
    assert strict["options"]["inputs"] == [str(work / "data")]          # relative to the suite file
    assert read_json(work / "strict.json")["verdict"]["exit_code"] == 1  # the step's own report too
    assert strict["line"] == 3
    assert "[1/3] strict (compare) ..." in result.stderr
    assert re.search(r"\[3/3\] cosine: exit 0 in [\d.]+ s: PASS", result.stderr)
    assert [m["path"] for m in doc["models"]] == [str(work / "a.onnx"), str(work / "b.onnx")]


def test_step_that_cannot_run_stops_the_suite_with_exit_3(work):
    path = suite(work, "steps:\n" + step("fails", gate="max-abs: 0.3") + step("bad-model", model_b="broken.onnx")
                 + step("after"))
    invoke(["run", path, "--json", work / "r.json"], exit_code=3)
    doc = read_json(work / "r.json")
    assert statuses(doc) == [("fails", "failed", 1), ("bad-model", "error", 3), ("after", "not-run", None)]
    bad = doc["results"]["steps"][1]
    assert bad["result"] is None and bad["summary"].startswith("could not run: ") and "broken.onnx" in bad["summary"]
    assert doc["verdict"]["summary"] == ("FAIL: 3 steps: 0 passed, 1 failed (fails), 1 could not run (bad-model), "
                                         "1 not run (after)")


def test_keep_going_runs_every_step_and_reports_the_worst_code(work):
    path = suite(work, "steps:\n" + step("bad-model", model_b="broken.onnx") + step("fails", gate="max-abs: 0.3")
                 + step("after"))
    invoke(["run", path, "--keep-going", "--json", work / "r.json"], exit_code=3)
    doc = read_json(work / "r.json")
    assert statuses(doc) == [("bad-model", "error", 3), ("fails", "failed", 1), ("after", "passed", 0)]
    result = read_result(work / "r.json")                                  # the envelope reads back
    assert result.kind == "suite" and result.exit_code == 3 and result.steps[2].result["kind"] == "compare"


def test_env_interpolation_with_defaults(work):
    path = suite(work, "steps:\n  - compare:\n      model-a: a.onnx\n      model-b: ${MI_T_MODEL:-b.onnx}\n"
                       "      inputs: ${MI_T_DATA}\n      max-abs: ${MI_T_TOL:-0.3}\n")
    env = {"MI_T_DATA": str(work / "data"), "MI_T_TOL": None, "MI_T_MODEL": ""}
    invoke(["run", path, "--json", work / "r.json"], exit_code=1, env=env)  # default 0.3 < 0.45
    options = read_json(work / "r.json")["results"]["steps"][0]["options"]
    assert options["inputs"] == [str(work / "data")]
    assert options["model-b"] == str(work / "b.onnx")                      # empty variable: the default
    assert options["max-abs"] == ["0.3"]
    invoke(["run", path, "--json", work / "r.json"], exit_code=0, env={**env, "MI_T_TOL": "0.5"})
    assert read_json(work / "r.json")["results"]["steps"][0]["options"]["max-abs"] == ["0.5"]
    result = invoke(["run", path], exit_code=2, env={"MI_T_DATA": None})
    assert f"{path}:6: steps[0].compare.inputs: environment variable MI_T_DATA is not set" in result.stderr


def test_interpolate_text_rules():
    env = {"A": "x", "EMPTY": ""}
    assert interpolate_text("${A}/${B:-d}/$${A}/${EMPTY:-e}/${EMPTY}", env) == "x/d/${A}/e/"
    with pytest.raises(KeyError):
        interpolate_text("${MISSING}", env)
    with pytest.raises(ValueError, match="not a valid variable"):
        interpolate_text("${1A}", env)


@pytest.mark.parametrize("body,message", [
    ("steps:\n  - compair:\n      model-a: a.onnx\n",
     r"suite\.yaml:3: steps\[0\]\.compair: unknown step kind 'compair' \(did you mean 'compare'\?\)"),
    ("steps:\n" + step("s", gate="max-abz: 1"),
     r"suite\.yaml:8: step 's': compare\.max-abz: unknown key \(did you mean 'max-abs'\?\)"),
    ("steps:\n" + step("s", model_b="nope.onnx"), r"suite\.yaml:6: step 's': compare\.model-b: File '.*nope\.onnx' "
                                                  r"does not exist"),
    ("steps:\n  - name: s\n    profile:\n      runs: 3\n",
     r"suite\.yaml:4: step 's': profile: missing MODEL \(add 'model: \.\.\.'\)"),
    ("steps:\n" + step("s", extra="      json: '-'\n"),
     r"suite\.yaml:9: step 's': compare\.json: '-' \(stdout\) cannot be used in a suite step"),
    ("steps:\n" + step("s") + step("s"), r"suite\.yaml:9: steps\[1\]\.name: step name 's' is used twice"),
    ("defaults:\n  opt-levl: all\nsteps:\n" + step("s"),
     r"suite\.yaml:3: defaults\.opt-levl: unknown key \(did you mean 'opt-level'\?\)"),
    ("steps: []\nstepz: []\n", r"suite\.yaml:3: stepz: unknown key in a suite \(did you mean 'steps'\?\)"),
    ("steps: []\ncompare:\n  max-abs: 1\n", r"suite\.yaml:3: compare: unknown key in a suite"),
    ("steps:\n  - compare: {model-a: a.onnx, model-b: b.onnx}\n    profile: {}\n",
     r"suite\.yaml:3: steps\[0\]: a step runs one command, this one names 2 \(compare, profile\)"),
])
def test_config_errors_name_file_and_line(work, body, message):
    result = invoke(["run", suite(work, body)], exit_code=2)
    assert re.search(message, result.stderr), result.stderr
    assert result.stderr.count("Error:") == 1 and "Traceback" not in result.stderr


def test_only_and_skip_select_steps_by_name_or_kind(work):
    path = suite(work, "steps:\n" + step("strict", gate="max-abs: 0.3") + step("loose"))
    invoke(["run", path, "--only", "loose", "--json", work / "r.json"], exit_code=0)
    assert statuses(read_json(work / "r.json")) == [("strict", "skipped", None), ("loose", "passed", 0)]
    invoke(["run", path, "--skip", "loose", "--json", work / "r.json"], exit_code=1)
    assert statuses(read_json(work / "r.json")) == [("strict", "failed", 1), ("loose", "skipped", None)]
    invoke(["run", path, "--only", "compare", "--json", work / "r.json"], exit_code=1)   # a kind selects all
    assert [s[1] for s in statuses(read_json(work / "r.json"))] == ["failed", "passed"]
    result = invoke(["run", path, "--only", "lose"], exit_code=2)
    assert "--only lose: no step of" in result.stderr and "steps: strict, loose" in result.stderr


def test_a_step_whose_command_is_not_in_this_build(work, monkeypatch):
    from inspector_cli import cli

    path = suite(work, "steps:\n" + step("acc") + "  - name: other\n    compare: {model-a: a.onnx, model-b: b.onnx}\n")
    monkeypatch.delitem(cli.COMMANDS, "compare")
    result = invoke(["run", path], exit_code=2)
    assert re.search(r"suite\.yaml:4: steps\[0\]\.compare: step 'acc' needs the command 'mi compare', which this mi "
                     r"does not have", result.stderr)


def test_ctrl_c_in_a_step_writes_the_report_and_exits_130(work, monkeypatch):
    from inspector_cli.workflows import compare as workflow

    real = workflow.compare_models
    calls = []

    def interrupted_second_time(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(workflow, "compare_models", interrupted_second_time)
    path = suite(work, "steps:\n" + step("one") + step("two") + step("three"))
    result = invoke(["run", path, "--json", work / "r.json"], exit_code=130)
    assert statuses(read_json(work / "r.json")) == [("one", "passed", 0), ("two", "error", 130),
                                                    ("three", "not-run", None)]
    assert "Interrupted" in result.stderr


def test_a_crashing_step_is_exit_4_and_does_not_hide_earlier_results(work, monkeypatch):
    from inspector_cli.workflows import compare as workflow

    monkeypatch.setattr(workflow, "compare_models", lambda *a, **k: 1 / 0)
    path = suite(work, "steps:\n" + step("one") + step("two"))
    invoke(["run", path, "--keep-going", "--json", work / "r.json"], exit_code=4)
    steps = read_json(work / "r.json")["results"]["steps"]
    assert [s["exit_code"] for s in steps] == [4, 4]
    assert steps[0]["summary"].startswith("could not run: internal error: ZeroDivisionError")


def test_json_to_stdout_keeps_step_tables_out(work):
    path = suite(work, "steps:\n" + step("one") + step("two"))
    result = invoke(["run", path, "--json", "-"], exit_code=0)
    import json

    doc = json.loads(result.stdout)
    assert doc["kind"] == "suite" and statuses(doc) == [("one", "passed", 0), ("two", "passed", 0)]


def test_not_a_suite(work):
    path = work / "cfg.yaml"
    path.write_text("version: 1\ncompare:\n  max-abs: 1\n")
    result = invoke(["run", path], exit_code=2)
    assert "cfg.yaml:1: not a suite: no 'steps:' list" in result.stderr


def test_suite_checks_for_junit_name_each_step_and_its_gates(work):
    """JUnit/diff checks of a suite; needs results.base.Check (the report writers, issue 7)."""
    from inspector_cli.results import base

    if not hasattr(base, "Check"):
        pytest.skip("results.base.Check (report writers) is not in this build yet")
    path = suite(work, "steps:\n" + step("strict", gate="max-abs: 0.3") + step("bad", model_b="broken.onnx")
                 + step("after"))
    invoke(["run", path, "--json", work / "r.json"], exit_code=3)
    checks = read_result(work / "r.json").checks()
    assert [(c.name, c.group, c.passed) for c in checks] == [
        ("step strict", "suite.steps", False),
        ("strict: --max-abs 0.3 on y", "suite.strict.compare.gates", False),
        ("step bad", "suite.steps", False),
        ("step after", "suite.steps", False)]
    assert checks[1].value == pytest.approx(0.45, abs=1e-6) and checks[1].threshold == 0.3


def test_executor_options_override_the_steps_that_have_them(work):
    body = ("steps:\n" + step("cmp", extra="      workers: 0\n")
            + "  - name: check\n    validate:\n      model: a.onnx\n")
    path = suite(work, body)
    invoke(["run", path, "--workers", "1", "--json", work / "report.json"], exit_code=None)
    doc = read_json(work / "report.json")
    compare = doc["results"]["steps"][0]["result"]
    assert compare["config"]["workers"] == 1 and compare["config"]["executor"] == "local"  # flag beats the suite
    assert compare["results"]["outputs"][0]["samples"] == 1
    assert doc["results"]["steps"][1]["status"] in ("passed", "failed")  # validate has no such option: untouched
    assert doc["config"]["overrides"] == {"workers": 1}


def test_step_without_inputs_uses_the_suite_data_when_the_model_inputs_match(tmp_path):
    """Issue 14: ci-gate's profile step (no inputs) stopped on a symbolic sequence dim; the suite's
    compare step reads real samples for the same model, so the profile step now uses them."""
    save(affine_model(shape=("batch", "seq")), tmp_path / "a.onnx")
    save(affine_model(shape=("batch", "seq"), scale=1.1), tmp_path / "b.onnx")
    save_npz(tmp_path / "data", [{"x": np.array([[1, 2, 3, 4]], np.float32)}])
    body = ("steps:\n" + step("accuracy") +
            "  - name: speed\n    profile:\n      model: b.onnx\n      runs: 2\n      warmup: 1\n")
    result = invoke(["run", suite(tmp_path, body), "--json", tmp_path / "report.json"], exit_code=0)
    doc = read_json(tmp_path / "report.json")
    assert statuses(doc) == [("accuracy", "passed", 0), ("speed", "passed", 0)]
    note = f"step 'speed': no inputs given; uses the suite's data {tmp_path / 'data'} (step 'accuracy', same model inputs)"
    assert doc["config"]["shared_inputs"] == [note] and note in result.stderr
    assert doc["results"]["steps"][1]["result"]["inputs"]["source"] == str(tmp_path / "data")
    # a model with other inputs does not take the data: synthetic, and the symbolic 'seq' still asks
    other = tmp_path / "other.onnx"
    save(affine_model(shape=("batch", "seq"), inp="z"), other)
    body = "steps:\n" + step("accuracy") + "  - name: speed\n    profile:\n      model: other.onnx\n"
    result = invoke(["run", suite(tmp_path, body, "s2.yaml")], exit_code=3)
    assert "dimension 1 ('seq') is dynamic" in result.stderr and "uses the suite's data" not in result.stderr
