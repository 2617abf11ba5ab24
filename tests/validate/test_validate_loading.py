"""Broken files are findings (exit 1) or usage errors (exit 2), never tracebacks."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.validate.loading import walk_fields

from ..fixtures.helpers import init, invoke, read_json, save
from ..fixtures.validate_cases import relu_model


@pytest.fixture()
def model_bytes(tmp_path):
    path = save(relu_model(initializers=[init("w", np.ones((32, 32), np.float32))]), tmp_path / "full.onnx")
    return path.read_bytes()


def findings_of(path):
    return [(f["rule"], f["message"]) for f in read_json(path)["results"]["findings"]]


@pytest.mark.parametrize("share", [0.05, 0.3, 0.5, 0.9, 0.99])
def test_truncated_anywhere_is_a_finding(tmp_path, model_bytes, share):
    path = tmp_path / "cut.onnx"
    path.write_bytes(model_bytes[: int(len(model_bytes) * share)])
    result = invoke(["validate", path, "--json", tmp_path / "r.json"], exit_code=1)
    assert "Traceback" not in result.output + result.stderr
    rules = [r for r, _ in findings_of(tmp_path / "r.json")]
    assert rules == ["MI104"], findings_of(tmp_path / "r.json")
    doc = read_json(tmp_path / "r.json")
    assert doc["results"]["checked"] == ["loading"]
    assert doc["results"]["skipped"]["runtime"] == "the model did not load"
    assert doc["verdict"]["exit_code"] == 1


def test_truncation_detail_names_the_sizes(tmp_path, model_bytes):
    path = tmp_path / "cut.onnx"
    path.write_bytes(model_bytes[:1000])
    state, detail = walk_fields(path, 1000)
    import onnx

    graph_bytes = onnx.load_from_string(model_bytes).graph.ByteSize()
    assert state == "truncated"
    # ir_version takes bytes 0-1, so the graph field starts at byte 2
    assert f"field 'graph' at byte 2 declares {graph_bytes} bytes" in detail and "it has 1000" in detail
    full = tmp_path / "full.onnx"
    assert walk_fields(full, full.stat().st_size) == ("ok", "")


def test_a_directory_is_a_usage_error(tmp_path):
    result = invoke(["validate", tmp_path], exit_code=2)
    assert "Traceback" not in result.stderr and "is a directory" in result.stderr


def test_a_missing_file_is_a_usage_error(tmp_path):
    result = invoke(["validate", tmp_path / "nope.onnx"], exit_code=2)
    assert "does not exist" in result.stderr


@pytest.mark.parametrize("text,fact", [
    ("<!DOCTYPE html><html><body>404 Not Found</body></html>", "<!DOCTYPE html>"),
    ('{"model": "resnet50", "format": "onnx"}\n', '{"model": "resnet50"'),
    ("ir_version: 8\ngraph {\n  node { op_type: \"Relu\" }\n}\n", "ir_version: 8"),
])
def test_text_files_are_findings(tmp_path, text, fact):
    path = tmp_path / "model.onnx"
    path.write_text(text)
    result = invoke(["validate", path, "--format", "json"], exit_code=1)
    import json

    finding = json.loads(result.stdout)["results"]["findings"][0]
    assert finding["rule"] == "MI103" and fact in finding["message"]


def test_git_lfs_pointer_gets_a_hint(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 102400\n")
    result = invoke(["validate", path, "--json", "-"], exit_code=1)
    import json

    finding = json.loads(result.stdout)["results"]["findings"][0]
    assert finding["hint"] == "a Git LFS pointer: run 'git lfs pull'"


def test_ir_version_newer_than_onnx_skips_checker_and_session(tmp_path):
    import onnx

    model = relu_model()
    model.ir_version = onnx.IR_VERSION + 5
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    invoke(["validate", path, "--json", tmp_path / "r.json"], exit_code=1)
    doc = read_json(tmp_path / "r.json")
    rules = [f["rule"] for f in doc["results"]["findings"]]
    assert rules == ["MI105"]
    assert f"IR version {onnx.IR_VERSION + 5} is newer than this onnx supports ({onnx.IR_VERSION})" in \
        doc["results"]["findings"][0]["message"]
    assert doc["results"]["runtime"]["session"] == "skipped: IR version not supported"


def test_external_data_outside_is_never_read(tmp_path):
    from ..fixtures.validate_cases import external

    path = external("../secret.bin", create=True)(tmp_path)
    (tmp_path / "secret.bin").write_bytes(np.full(16, np.nan, np.float32).tobytes())  # NaNs nobody may read
    invoke(["validate", path, "--json", tmp_path / "r.json"], exit_code=1)
    doc = read_json(tmp_path / "r.json")
    rules = [f["rule"] for f in doc["results"]["findings"]]
    assert "MI109" in rules and "MI407" not in rules  # the NaN weights outside were not read
    assert doc["results"]["runtime"]["session"] == "skipped: external data missing or unsafe"
    assert any("tensor values were not read" in n for n in doc["results"]["notes"])


def test_external_data_inside_the_folder_is_fine(tmp_path):
    import onnx

    model = relu_model(initializers=[init("w", np.ones((64, 64), np.float32))])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    invoke(["validate", path, "--json", tmp_path / "r.json"], exit_code=0)
    doc = read_json(tmp_path / "r.json")
    assert [f["rule"] for f in doc["results"]["findings"]] == ["MI304"]  # only the unused weight
    assert doc["results"]["runtime"]["session"] == "created"


def test_a_corrupted_name_byte_is_a_finding_not_a_crash(tmp_path):
    """A flipped byte inside a name: protobuf still parses, but the name is not UTF-8 any more."""
    model = relu_model(initializers=[init("weight_zz", np.ones(4, np.float32))])
    data = model.SerializeToString()
    assert data.count(b"weight_zz") == 1
    path = tmp_path / "m.onnx"
    path.write_bytes(data.replace(b"weight_zz", b"weight_\xbd\xbd"))
    result = invoke(["validate", path, "--format", "json"], exit_code=1)
    import json

    findings = json.loads(result.stdout)["results"]["findings"]
    assert [(f["rule"], f["message"]) for f in findings] == [
        ("MI102", "m.onnx is corrupt: the name of initializer #0 of graph 'g' is not valid UTF-8")]


def test_malformed_attributes_do_not_crash_the_rules(tmp_path):
    from ..fixtures.validate_cases import node, qdq_weight

    model = qdq_weight([0.1, 0.2, 0.3], zp=[0, 0, 0])
    model.graph.node[0].CopyFrom(node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], "w_dq", axis=0.5))
    path = save(model, tmp_path / "m.onnx")
    result = invoke(["validate", path, "--json", tmp_path / "r.json"], exit_code=1)
    rules = [f["rule"] for f in read_json(tmp_path / "r.json")["results"]["findings"]]
    assert "MI201" in rules and "Traceback" not in result.stderr
