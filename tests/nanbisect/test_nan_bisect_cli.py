"""The `mi nan-bisect` command: exit codes, JSON envelope, table, repro bundles, config."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from inspector_cli.serialize import read_result

from ..fixtures import nan_models as nm
from ..fixtures.helpers import invoke, read_json

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_clean_model_exits_0(tmp_path):
    path, data = nm.write(tmp_path, nm.chain(), [{"x": np.ones((1, 8), np.float32)}])
    result = invoke(["nan-bisect", path, "--inputs", data, "--format", "markdown"], exit_code=0)
    assert "CLEAN: no NaN/Inf in 1/1 sample(s)" in result.stdout


def test_found_exits_1_with_json_and_table(tmp_path):
    path, data = nm.write(tmp_path, nm.chain(), [{"x": np.full((1, 8), -1.0, np.float32)}])
    doc = tmp_path / "out.json"
    result = invoke(["--no-color", "nan-bisect", path, "--inputs", data, "--json", doc], exit_code=1)
    assert "root cause: log (Log) on sample x_0000.npz" in result.stdout
    assert "hint (log-nonpositive)" in result.stdout
    document = read_json(doc)
    assert document["kind"] == "nan-bisect" and document["verdict"]["exit_code"] == 1
    origin = document["results"]["records"][0]["origin"]
    assert origin["node"] == "log" and origin["inputs"][0]["negatives"] == 8 and origin["outputs"][0]["nan"] == 8
    assert [f["rule"] for f in document["results"]["findings"]] == ["MI902"]
    again = read_result(doc)  # the saved result reads back into the same dataclasses
    assert again.records[0].origin.hints[0].rule == "log-nonpositive" and again.exit_code == 1


def test_static_pass_reports_weights_first(tmp_path):
    model = nm.binary("Add", nm.row(1, np.nan, 1, 1))
    path, data = nm.write(tmp_path, model, [{"x": nm.row(1, 2, 3, 4)}])
    result = invoke(["nan-bisect", path, "--inputs", data, "--json", "-"], exit_code=1)
    assert "warning: weight 'w' holds 1 NaN and 0 Inf values (read by target)" in result.stderr
    static = __import__("json").loads(result.stdout)["results"]["static"]
    assert static == [{"tensor": "w", "nan": 1, "inf": 0, "size": 4, "consumers": ["target"]}]


def test_repro_bundle_replays(tmp_path):
    path, data = nm.write(tmp_path, nm.branches(), [{"x": np.ones((1, 8), np.float32)}])
    bundle = tmp_path / "repro"
    invoke(["nan-bisect", path, "--inputs", data, "--repro", bundle], exit_code=1)
    folder = bundle / "sqrt_a"
    assert sorted(p.name for p in folder.iterdir()) == ["README.txt", "inputs.npz", "origin.onnx", "replay.py"]
    with np.load(folder / "inputs.npz") as saved:
        assert saved.files == ["a0"] and (saved["a0"] == -1).all()
    replay = subprocess.run([sys.executable, str(folder / "replay.py")], capture_output=True, text=True, check=True)
    assert replay.stdout.strip() == "a1: 8 NaN, 0 Inf of 8"
    assert "mi nan-bisect" in (folder / "README.txt").read_text()
    again = invoke(["nan-bisect", folder / "origin.onnx", "--inputs", folder / "inputs.npz", "--json", "-"],
                   exit_code=1)
    assert __import__("json").loads(again.stdout)["results"]["groups"][0]["node"] == "sqrt_a"


def test_shipped_config(tmp_path):
    path, data = nm.write(tmp_path, nm.two_origins(), [{"x": nm.row(-1, 2, 3, 4)}, {"x": nm.row(1, 2, 3, 4)}])
    config = tmp_path / "run.yaml"
    config.write_text((CONFIGS / "nan-bisect-batch.yaml").read_text().replace("workers: 2", "workers: 1"))
    doc, jsonl = tmp_path / "out.json", tmp_path / "nan.jsonl"
    invoke(["-c", config, "nan-bisect", path, "--inputs", data, "--json", doc, "--jsonl", jsonl, "--resume"],
           exit_code=1)
    results = read_json(doc)
    assert results["config"]["all"] is True and results["config"]["workers"] == 1
    records = [__import__("json").loads(line) for line in jsonl.read_text().splitlines()]
    assert [[o["node"] for o in r["origins"]] for r in records] == [["log", "div"], ["div"]]


def test_bad_size_is_a_usage_error(tmp_path):
    path, data = nm.write(tmp_path, nm.chain(), [{"x": np.ones((1, 8), np.float32)}])
    result = invoke(["nan-bisect", path, "--inputs", data, "--max-memory", "lots"], exit_code=2)
    assert "'lots' is not a size" in result.stderr
