"""Every file in configs/ is run on small built models (and a test fails when one has no runner).

Configs for commands this build does not have yet are skipped, with the reason, only while the
command is missing from cli.COMMANDS; they run as soon as the command lands.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from PIL import Image

from inspector_cli.cli import COMMANDS

from ..fixtures.helpers import affine_model, init, invoke, make_model, read_json, save, save_npz, vi

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def config(name: str) -> Path:
    return CONFIGS / name


def require(*commands: str) -> None:
    missing = [c for c in commands if c not in COMMANDS]
    if missing:
        pytest.skip(f"mi {', '.join(missing)} is not in cli.COMMANDS yet; this config runs once it lands")


def gates(document):
    return {g["gate"]: g["passed"] for g in document["results"]["gates"]}


def mlp(dtype: int = TensorProto.FLOAT, noise: float = 0.0):
    """x [1, 16] -> MatMul -> Relu -> MatMul -> y [1, 10]; fp16 weights and I/O when dtype is FLOAT16."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(0, 0.5, (16, 32)), rng.normal(0, 0.5, (32, 10))
    w2 = w2 + noise * rng.normal(0, 0.5, w2.shape)
    np_type = np.float16 if dtype == TensorProto.FLOAT16 else np.float32
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    return make_model(nodes, [vi("x", [1, 16], dtype)], [vi("y", [1, 10], dtype)],
                      [init("w1", w1.astype(np_type)), init("w2", w2.astype(np_type))])


def run_compare_int8(tmp_path, cnn_pair):
    a = save(affine_model(shape=(1, 10)), tmp_path / "a.onnx")
    close = save(affine_model(scale=1.001, shape=(1, 10)), tmp_path / "close.onnx")
    flipped = save(affine_model(scale=-1.0, shape=(1, 10)), tmp_path / "flipped.onnx")
    save_npz(tmp_path / "data", [{"x": np.linspace(0, 1, 10, dtype=np.float32)[None] * (i + 1)} for i in range(3)])
    base = ["-c", config("compare-int8.yaml"), "compare", a]
    invoke([*base, close, "--inputs", tmp_path / "data", "--json", tmp_path / "ok.json"], exit_code=0)
    assert gates(read_json(tmp_path / "ok.json")) == {"--min-cosine 0.99": True, "--max-abs 0.1": True,
                                                      "--min-top5 0.8": True}
    invoke([*base, flipped, "--inputs", tmp_path / "data", "--json", tmp_path / "bad.json"], exit_code=1)
    assert gates(read_json(tmp_path / "bad.json")) == {"--min-cosine 0.99": False, "--max-abs 0.1": False,
                                                       "--min-top5 0.8": False}


def run_compare_fp16(tmp_path, cnn_pair):
    fp32 = save(mlp(), tmp_path / "fp32.onnx")
    fp16 = save(mlp(TensorProto.FLOAT16), tmp_path / "fp16.onnx")
    off = save(mlp(TensorProto.FLOAT16, noise=0.05), tmp_path / "off.onnx")
    rng = np.random.default_rng(1)
    save_npz(tmp_path / "data", [{"x": rng.normal(0, 1, (1, 16)).astype(np.float32)} for _ in range(4)])
    base = ["-c", config("compare-fp16.yaml"), "compare", fp32]
    invoke([*base, fp16, "--inputs", tmp_path / "data", "--json", tmp_path / "ok.json"], exit_code=0)
    doc = read_json(tmp_path / "ok.json")
    assert gates(doc) == {"--min-cosine 0.9999": True, "--min-sqnr 40": True, "--min-top1 1": True}
    assert any("cast from float32 to float16" in w for w in doc["results"]["warnings"])
    invoke([*base, off, "--inputs", tmp_path / "data", "--json", tmp_path / "bad.json"], exit_code=1)
    assert gates(read_json(tmp_path / "bad.json"))["--min-sqnr 40"] is False


def gate_env(cnn_pair):
    fp32, int8, data = cnn_pair
    return {"FP32_MODEL": str(fp32), "INT8_MODEL": str(int8), "DATA_DIR": str(data), "MI_PROVIDERS": None}


def test_ci_gate_accuracy_step_runs_today(tmp_path, cnn_pair):
    """The compare step of ci-gate.yaml, on a real fp32/int8 pair, with the suite's defaults."""
    env = gate_env(cnn_pair)
    invoke(["run", config("ci-gate.yaml"), "--only", "accuracy", "--json", tmp_path / "acc.json"], env=env)
    doc = read_json(tmp_path / "acc.json")
    steps = {s["name"]: s for s in doc["results"]["steps"]}
    assert [s["status"] for s in steps.values()] == ["skipped", "passed", "skipped", "skipped"]
    accuracy = steps["accuracy"]
    assert accuracy["options"]["providers"] == "cpu" and accuracy["options"]["opt-level"] == "all"
    assert accuracy["result"]["inputs"]["count"] == 6
    assert gates(accuracy["result"]) == {"--min-cosine 0.99": True, "--min-top5 0.8": True}


def run_ci_gate(tmp_path, cnn_pair):
    require("validate", "nan-bisect", "profile")
    invoke(["run", config("ci-gate.yaml"), "--json", tmp_path / "all.json"], env=gate_env(cnn_pair))
    assert [s["status"] for s in read_json(tmp_path / "all.json")["results"]["steps"]] == ["passed"] * 4


def run_nan_bisect_batch(tmp_path, cnn_pair):
    require("nan-bisect")
    model = save(make_model([helper.make_node("Log", ["x"], ["y"], name="log")], [vi("x", [1, 4])],
                            [vi("y", [1, 4])]), tmp_path / "log.onnx")
    save_npz(tmp_path / "data", [{"x": np.array([[1, 2, 3, 4]], np.float32)},
                                 {"x": np.array([[1, -2, 3, 4]], np.float32)}])
    invoke(["-c", config("nan-bisect-batch.yaml"), "nan-bisect", model, "--inputs", tmp_path / "data",
            "--json", tmp_path / "r.json"], exit_code=1)
    assert read_json(tmp_path / "r.json")["verdict"]["exit_code"] == 1


def run_probe_relu(tmp_path, cnn_pair):
    require("probe")
    model = save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [1, 4])],
                            [vi("y", [1, 4])]), tmp_path / "relu.onnx")
    save_npz(tmp_path / "data", [{"x": np.array([[-1, 2, -3, 4]], np.float32)}])
    invoke(["-c", config("probe-relu.yaml"), "probe", model, "--inputs", tmp_path / "data",
            "--history-dir", tmp_path / "history", "--json", tmp_path / "r.json"], exit_code=0)
    assert read_json(tmp_path / "r.json")["verdict"]["exit_code"] == 0


def run_profile(tmp_path, cnn_pair):
    require("profile")
    fp32, _, _ = cnn_pair
    invoke(["-c", config("profile.yaml"), "profile", fp32, "--runs", "3", "--warmup", "1",
            "--json", tmp_path / "r.json"], exit_code=0)
    assert read_json(tmp_path / "r.json")["verdict"]["exit_code"] == 0


def run_validate(tmp_path, cnn_pair):
    """configs/validate.yaml comes with the validate command (its own branch)."""
    if not config("validate.yaml").is_file():
        pytest.skip("configs/validate.yaml comes with mi validate, not in this build yet")
    require("validate")
    _, int8, _ = cnn_pair
    invoke(["-c", config("validate.yaml"), "validate", int8, "--json", tmp_path / "r.json"], exit_code=0)
    assert read_json(tmp_path / "r.json")["verdict"]["exit_code"] == 0


def run_imagenet_preprocess(tmp_path, cnn_pair):
    rng = np.random.default_rng(4)
    (tmp_path / "imgs").mkdir()
    for i, (w, h) in enumerate([(320, 240), (240, 320)]):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(tmp_path / "imgs" / f"{i}.jpg")
    model = save(affine_model(shape=(1, 3, 224, 224)), tmp_path / "m.onnx")
    invoke(["inputs", "make", "--model", model, "--inputs", tmp_path / "imgs", "--preprocess",
            config("imagenet-preprocess.yaml"), "--out", tmp_path / "data", "--json", tmp_path / "r.json"])
    stats = read_json(tmp_path / "r.json")["results"]["stats"][0]
    # (0/255 - 0.485) / 0.229 = -2.118 and (255/255 - 0.406) / 0.225 = 2.64 bound every value
    assert -2.1180 <= stats["min"] < -1.5 and 2.0 < stats["max"] <= 2.6401
    assert stats["shapes"] == ["[1, 3, 224, 224]"] and stats["looks_like"] == "normalised (mean ~0, std ~1)"


def run_compare_layers(tmp_path, cnn_pair):
    fp32, int8, data = cnn_pair
    invoke(["-c", config("compare-layers.yaml"), "compare", fp32, int8, "-i", data, "--json", tmp_path / "l.json"])
    section = read_json(tmp_path / "l.json")["results"]["layers"]
    assert [(t["metric"], t["threshold"]) for t in section["thresholds"]] == [("cosine", 0.98), ("sqnr", 20.0)]
    assert len(section["layers"]) == 11 and len(section["isolation"]["isolated"]) == 5


def run_scale_ray(tmp_path, cnn_pair):
    """On the test run's private Ray instance (the ray_local fixture): `address: auto` uses it."""
    fp32, int8, data = cnn_pair
    model = save(make_model([helper.make_node("Log", ["x"], ["y"], name="log")], [vi("x", [1, 4])],
                            [vi("y", [1, 4])]), tmp_path / "log.onnx")
    save_npz(tmp_path / "logdata", [{"x": np.array([[1, 2, 3, 4]], np.float32)},
                                    {"x": np.array([[1, -2, 3, 4]], np.float32)}])
    invoke(["-c", config("scale-ray.yaml"), "nan-bisect", model, "--inputs", tmp_path / "logdata",
            "--json", tmp_path / "n.json"], exit_code=1)
    doc = read_json(tmp_path / "n.json")
    assert doc["config"]["executor"] == "ray" and doc["config"]["examples"] == 10
    assert doc["results"]["plan"]["executor"]["workers"] == 2 and doc["results"]["groups"][0]["node"] == "log"
    invoke(["-c", config("scale-ray.yaml"), "compare", fp32, int8, "-i", data, "--json", tmp_path / "c.json"])
    assert read_json(tmp_path / "c.json")["config"]["executor"] == "ray"


RUNNERS = {
    "scale-ray.yaml": run_scale_ray,
    "compare-layers.yaml": run_compare_layers,
    "compare-int8.yaml": run_compare_int8,
    "compare-fp16.yaml": run_compare_fp16,
    "ci-gate.yaml": run_ci_gate,
    "nan-bisect-batch.yaml": run_nan_bisect_batch,
    "probe-relu.yaml": run_probe_relu,
    "profile.yaml": run_profile,
    "imagenet-preprocess.yaml": run_imagenet_preprocess,
    "validate.yaml": run_validate,
}


def test_every_config_file_has_a_runner():
    """A config added to configs/ needs a runner here (runners may wait for their file)."""
    files = sorted(p.name for p in CONFIGS.glob("*.yaml"))
    assert [f for f in files if f not in RUNNERS] == []


NEEDS_RAY = {"scale-ray.yaml"}


@pytest.mark.parametrize("name", sorted(RUNNERS))
def test_config_runs(name, tmp_path, cnn_pair, request):
    if name in NEEDS_RAY:
        request.getfixturevalue("ray_local")
    RUNNERS[name](tmp_path, cnn_pair)
