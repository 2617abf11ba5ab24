"""`mi compare` on outputs: gates and exit codes, reports, formats, output pairing."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from inspector_cli.commands import compare as compare_command

from ..fixtures.helpers import affine_model, invoke, output_entry, read_json, save, save_npz


@pytest.fixture()
def pair(tmp_path):
    """A: y = x; B: y = 1.1 x + 0.05, on two known samples."""
    a = save(affine_model(), tmp_path / "a.onnx")
    b = save(affine_model(scale=1.1, shift=0.05), tmp_path / "b.onnx")
    data = save_npz(tmp_path / "data", [{"x": np.array([[1, 2, 3, 4]], np.float32)},
                                        {"x": np.array([[-1, 0.5, 0, 2]], np.float32)}])
    return a, b, data


def expected(x):
    a = x.astype(np.float64).ravel()
    b = (np.float32(1.1) * x + np.float32(0.05)).astype(np.float64).ravel()
    d = b - a
    return {"cosine": a @ b / np.linalg.norm(a) / np.linalg.norm(b), "max_abs": np.abs(d).max(),
            "sqnr": 10 * math.log10((a @ a) / (d @ d))}


def test_identical_models_pass(tmp_path, pair):
    a, _, data = pair
    result = invoke(["compare", a, a, "--inputs", data, "--min-cosine", "0.9999", "--json", tmp_path / "r.json"])
    out = output_entry(read_json(tmp_path / "r.json"), "y")
    assert out["dataset"]["cosine"] == 1.0 and out["dataset"]["sqnr"] == "inf" and out["worst"]["max_abs"] == 0.0
    assert "PASS" in result.stdout


def test_metrics_match_hand_computation(tmp_path, pair):
    a, b, data = pair
    invoke(["compare", a, b, "--inputs", data, "--json", tmp_path / "r.json"])
    out = output_entry(read_json(tmp_path / "r.json"), "y")
    x0 = np.array([[1, 2, 3, 4]], np.float32)
    x1 = np.array([[-1, 0.5, 0, 2]], np.float32)
    e0, e1 = expected(x0), expected(x1)
    assert out["per_sample"][0]["metrics"]["cosine"] == pytest.approx(e0["cosine"], rel=1e-9)
    assert out["worst"]["max_abs"] == pytest.approx(max(e0["max_abs"], e1["max_abs"]), rel=1e-6)
    assert out["worst"]["cosine"] == pytest.approx(min(e0["cosine"], e1["cosine"]), rel=1e-9)
    assert out["mean"]["sqnr"] == pytest.approx((e0["sqnr"] + e1["sqnr"]) / 2, rel=1e-6)
    both = expected(np.concatenate([x0, x1], axis=1))
    assert out["dataset"]["cosine"] == pytest.approx(both["cosine"], rel=1e-9)


# max |d| is 0.45 on sample 0 (x=4) and 0.25 on sample 1; cosine > 0.999 on both.
@pytest.mark.parametrize("args,code,failed", [
    (["--min-cosine", "0.99"], 0, 0),
    (["--min-cosine", "0.99999"], 1, 2),
    (["--max-abs", "0.5"], 0, 0),
    (["--max-abs", "0.3"], 1, 1),
    (["--max-rel", "0.2"], 1, 1),      # x=0 gives |0.05| / 1e-12
    (["--min-sqnr", "15"], 0, 0),
    (["--min-sqnr", "40"], 1, 2),
    (["--min-top1", "1.0"], 0, 0),     # ranking unchanged by a positive affine map
])
def test_each_gate_passes_and_fails(tmp_path, pair, args, code, failed):
    a, b, data = pair
    invoke(["compare", a, b, "--inputs", data, *args, "--json", tmp_path / "r.json"], exit_code=code)
    doc = read_json(tmp_path / "r.json")
    (gate,) = doc["results"]["gates"]
    assert gate["failed_samples"] == failed and gate["total_samples"] == 2
    assert doc["verdict"]["passed"] is (code == 0) and doc["verdict"]["exit_code"] == code


def test_top5_gate_on_classifier_outputs(tmp_path):
    a = save(affine_model(shape=(1, 8)), tmp_path / "a.onnx")
    b = save(affine_model(scale=-1.0, shape=(1, 8)), tmp_path / "b.onnx")  # reverses the ranking
    data = save_npz(tmp_path / "d", [{"x": np.arange(8, dtype=np.float32)[None]}])
    invoke(["compare", a, b, "--inputs", data, "--min-top5", "0.5", "--json", tmp_path / "r.json"], exit_code=1)
    out = output_entry(read_json(tmp_path / "r.json"), "y")
    assert out["dataset"]["top5"] == pytest.approx(2 / 5)  # top5 {3..7} vs {0..4}: {3, 4}
    assert out["dataset"]["top1"] == 0.0


def test_gate_for_one_output_and_unknown_output(tmp_path, pair):
    a, b, data = pair
    invoke(["compare", a, b, "--inputs", data, "--max-abs", "0.3", "--max-abs", "y=0.5"], exit_code=0)
    result = invoke(["compare", a, b, "--inputs", data, "--max-abs", "logits=0.5"], exit_code=2)
    assert "no compared output is named 'logits'" in result.stderr


def test_json_written_before_exit_1_and_to_stdout(tmp_path, pair):
    a, b, data = pair
    invoke(["compare", a, b, "--inputs", data, "--max-abs", "0.01", "--json", tmp_path / "r.json"], exit_code=1)
    assert read_json(tmp_path / "r.json")["verdict"]["passed"] is False
    result = invoke(["compare", a, b, "--inputs", data, "--json", "-"])
    document = json.loads(result.stdout)
    assert document["kind"] == "compare" and document["schema_version"] == 1
    assert len(document["models"][0]["sha256"]) == 64


@pytest.mark.parametrize("fmt,marker", [("markdown", "| metric"), ("csv", "table,metric,data set"),
                                        ("json", '"kind": "compare"')])
def test_output_formats(pair, fmt, marker):
    a, b, data = pair
    result = invoke(["compare", a, b, "--inputs", data, "--format", fmt])
    assert marker in result.stdout


def test_unwritable_report_fails_before_work(tmp_path, pair):
    a, b, data = pair
    result = invoke(["compare", a, b, "--inputs", data, "--json", tmp_path / "no" / "dir" / "r.json"], exit_code=2)
    assert "does not exist" in result.stderr


def test_outputs_paired_by_position_with_warning(tmp_path, pair):
    a, _, data = pair
    renamed = save(affine_model(out="out0"), tmp_path / "renamed.onnx")
    invoke(["compare", a, renamed, "--inputs", data, "--json", tmp_path / "r.json"])
    doc = read_json(tmp_path / "r.json")
    assert doc["results"]["outputs"][0]["matched_by"] == "position"
    assert any("paired 'y' with 'out0' by position" in w for w in doc["results"]["warnings"])
    invoke(["compare", a, renamed, "--inputs", data, "--map", "y=out0", "--json", tmp_path / "r2.json"])
    assert read_json(tmp_path / "r2.json")["results"]["outputs"][0]["matched_by"] == "map"


def test_outputs_that_cannot_pair(tmp_path, pair):
    a, _, data = pair
    other = save(affine_model(out="z", shape=(1, 5), inp="x"), tmp_path / "o.onnx")
    result = invoke(["compare", a, other, "--inputs", data], exit_code=3)
    assert "could be paired" in result.stderr and "--map" in result.stderr


def test_shape_mismatch_is_a_finding_not_a_crash(tmp_path):
    from onnx import helper

    from ..fixtures.helpers import make_model, vi

    a = save(affine_model(shape=(1, 4)), tmp_path / "a.onnx")
    wide = make_model([helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=1)],
                      [vi("x", [1, 4])], [vi("y", [1, 8])])
    b = save(wide, tmp_path / "b.onnx")
    invoke(["compare", a, b, "--json", tmp_path / "r.json", "--map", "y=y"], exit_code=1)
    doc = read_json(tmp_path / "r.json")
    assert doc["results"]["findings"][0]["rule"] == "MI801"
    assert "shapes differ ([1, 4] vs [1, 8])" in doc["results"]["findings"][0]["message"]


def test_fp16_candidate_gets_cast_inputs(tmp_path):
    from onnx import TensorProto

    a = save(affine_model(), tmp_path / "a.onnx")
    b = save(affine_model(elem=TensorProto.FLOAT16), tmp_path / "b.onnx")
    invoke(["compare", a, b, "--samples", "2", "--min-cosine", "0.9999", "--json", tmp_path / "r.json"])
    doc = read_json(tmp_path / "r.json")
    assert output_entry(doc, "y")["dtype_b"] == "float16"
    assert any("cast from float32 to float16" in w for w in doc["results"]["warnings"])


def test_internal_error_exit_4_and_debug(tmp_path, pair, monkeypatch):
    a, b, data = pair

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("inspector_cli.workflows.compare.compare_models", broken)
    result = invoke(["compare", a, b], exit_code=4)
    assert "Internal error: RuntimeError: boom" in result.stderr and "--debug" in result.stderr
    assert "Traceback" not in result.stderr
    result = invoke(["--debug", "compare", a, b], exit_code=4)
    assert "Traceback" in result.stderr


def test_interrupt_exit_130(pair, monkeypatch):
    a, b, _ = pair

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("inspector_cli.workflows.compare.compare_models", interrupted)
    invoke(["compare", a, b], exit_code=130)


def test_usage_errors_exit_2(tmp_path, pair):
    a, b, _ = pair
    # the message, not only the code: a usage error that names nothing is no help
    assert "missing.onnx' does not exist" in invoke(["compare", a, tmp_path / "missing.onnx"], exit_code=2).stderr
    assert "Invalid value for '--min-cosine': 'high'" in invoke(["compare", a, b, "--min-cosine", "high"], exit_code=2).stderr
    assert "Invalid value for '--opt-level': 'fast'" in invoke(["compare", a, b, "--opt-level", "fast"], exit_code=2).stderr
    result = invoke(["compare", a, b, "--providers", "nosuch"], exit_code=2)
    assert "not available" in result.stderr


def test_quiet_and_no_color(pair, monkeypatch):
    a, b, data = pair
    assert invoke(["-q", "compare", a, b, "--inputs", data]).stdout == ""
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in invoke(["compare", a, b, "--inputs", data]).stdout


def test_help_is_the_docstring():
    assert "Compare MODEL_B against the reference MODEL_A" in (compare_command.compare.help or "")
