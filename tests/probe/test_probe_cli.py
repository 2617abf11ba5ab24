"""`mi probe` command: --list, formats, JSON round trip, usage errors, the shipped config."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from inspector_cli.serialize import read_result

from ..fixtures.helpers import invoke, read_json, save_npz
from ..fixtures.probe_models import scale_relu

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "probe-relu.yaml"


def test_list_prints_every_selectable_tensor_without_inference(cnn_pair, tmp_path):
    fp32, _, _ = cnn_pair
    invoke(["probe", fp32, "--list", "--json", tmp_path / "l.json"])
    tensors = read_json(tmp_path / "l.json")["results"]["tensors"]
    assert tensors[0] == {"name": "input", "op_type": "(input)", "node": "", "dtype": "float32",
                          "shape": "[1, 3, 32, 32]"}
    assert tensors[1]["op_type"] == "Conv" and tensors[1]["shape"] == "[1, 16, 32, 32]"
    assert tensors[-1]["name"] == "logits" and tensors[-1]["shape"] == "[1, 10]"
    text = invoke(["probe", fp32, "--list", "--format", "csv"]).stdout
    assert text.count("\n") == len(tensors) + 1 and ",Relu," in text
    invoke(["probe", fp32, "--list", "-s", "op:Relu", "-s", "input", "--json", tmp_path / "r.json"])
    chosen = read_json(tmp_path / "r.json")["results"]["tensors"]
    assert [t["op_type"] for t in chosen] == ["(input)"] + ["Relu"] * sum(t["op_type"] == "Relu" for t in tensors)


def test_selection_forms_and_json_round_trip(tmp_path):
    model = scale_relu(tmp_path / "m.onnx", 2.0)
    save_npz(tmp_path / "data", [{"x": np.ones((1, 4, 2, 2), np.float32)}])
    for pattern, names in [("op:Relu", ["y"]), ("re:^m$", ["m"]), ("*", ["m", "y"]), ("relu", ["y"]), ("x", ["x"])]:
        invoke(["probe", model, "--inputs", tmp_path / "data", "-s", pattern, "--no-history", "--json",
                tmp_path / "r.json"])
        assert [t["name"] for t in read_json(tmp_path / "r.json")["results"]["tensors"]] == names, pattern
    result = read_result(tmp_path / "r.json")
    assert result.kind == "probe" and result.tensor("x").max == 1.0
    r = invoke(["probe", model, "--inputs", tmp_path / "data", "-s", "nothing*", "--no-history"], exit_code=2)
    assert "matches no tensor" in r.stderr


def test_model_is_required_unless_history(tmp_path):
    assert invoke(["probe"], exit_code=2).stderr.endswith("\nError: MODEL is required (except with --history)\n")


def test_shipped_config_runs(tmp_path, monkeypatch):
    model = scale_relu(tmp_path / "m.onnx", -1.0)  # every ReLU output is zero: the config's trigger fires
    save_npz(tmp_path / "data", [{"x": np.ones((1, 4, 2, 2), np.float32)}] * 2)
    monkeypatch.chdir(tmp_path)
    invoke(["-c", CONFIG, "probe", model, "--inputs", tmp_path / "data", "--dump", "d", "--json", "r.json"],
           exit_code=1)
    res = read_json(tmp_path / "r.json")
    assert res["config"]["select"] == ["op:Relu"] and res["config"]["dump_max_bytes"] == 64 << 20
    assert res["results"]["trigger"]["tensor"] == "y" and res["results"]["trigger"]["sample_index"] == 0
    assert (tmp_path / "d" / "s000.tensors.npz").is_file() and (tmp_path / "d" / "s000.inputs.npz").is_file()
    assert (tmp_path / res["results"]["history"]["saved"]).is_file()
    assert res["results"]["history"]["saved"].startswith(".mi/history/")


def test_onnxruntime_workers_do_not_spin_between_runs_unless_asked():
    from inspector_cli.core.runner import SPINNING, RuntimeConfig

    assert RuntimeConfig().without_spinning().session_config == ((SPINNING, "0"),)
    mine = RuntimeConfig(session_config=((SPINNING, "1"),))
    assert mine.without_spinning() is mine
