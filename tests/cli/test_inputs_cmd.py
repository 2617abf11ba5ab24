"""`mi inputs make` / `mi inputs show`: files written, statistics against numpy, range hints."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inspector_cli.workflows.inputs import looks_like

from ..fixtures.helpers import affine_model, invoke, read_json, save, save_npz


@pytest.fixture()
def models(tmp_path):
    return (save(affine_model(shape=(1, 3, 8, 8)), tmp_path / "a.onnx"),
            save(affine_model(scale=1.01, shape=(1, 3, 8, 8)), tmp_path / "b.onnx"))


def load_folder(folder: Path):
    return [np.load(p, allow_pickle=False)["x"] for p in sorted(folder.glob("*.npz"))]


def test_make_synthetic_then_compare_on_its_output(tmp_path, models):
    a, b = models
    out = tmp_path / "data"
    invoke(["inputs", "make", "--model", a, "--count", "5", "--val-range", "-2,2", "--seed", "7", "--out", out,
            "--json", tmp_path / "make.json"])
    arrays = load_folder(out)
    assert sorted(p.name for p in out.iterdir()) == [f"sample_{i:04d}.npz" for i in range(5)]
    assert all(x.shape == (1, 3, 8, 8) and x.dtype == np.float32 for x in arrays)
    everything = np.concatenate([x.ravel() for x in arrays]).astype(np.float64)
    stats = read_json(tmp_path / "make.json")["results"]["stats"][0]
    assert stats["min"] == pytest.approx(everything.min()) and stats["max"] == pytest.approx(everything.max())
    assert stats["mean"] == pytest.approx(everything.mean()) and stats["std"] == pytest.approx(everything.std())
    assert -2 <= everything.min() and everything.max() <= 2 and stats["samples"] == 5
    # the folder feeds compare: b = 1.01 a, so max |b - a| = 0.01 max |x|
    invoke(["compare", a, b, "--inputs", out, "--json", tmp_path / "cmp.json"])
    doc = read_json(tmp_path / "cmp.json")
    assert doc["inputs"]["count"] == 5
    assert doc["results"]["outputs"][0]["dataset"]["max_abs"] == pytest.approx(0.01 * np.abs(everything).max(),
                                                                               rel=1e-5)
    # the same seed makes the same files; an existing folder needs --force
    result = invoke(["inputs", "make", "--model", a, "--count", "5", "--out", out], exit_code=2)
    assert "already holds 5 .npz file(s)" in result.stderr
    invoke(["inputs", "make", "--model", a, "--count", "5", "--val-range", "-2,2", "--seed", "7", "--out", out,
            "--force"])
    assert all(np.array_equal(x, y) for x, y in zip(arrays, load_folder(out)))


def test_make_from_images_then_compare(tmp_path, models):
    a, b = models
    (tmp_path / "imgs").mkdir()
    rng = np.random.default_rng(2)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)).save(tmp_path / "imgs" / f"cat{i}.png")
    invoke(["inputs", "make", "--model", a, "--inputs", tmp_path / "imgs", "--count", "2", "--out", tmp_path / "d",
            "--preprocess-set", "resize=8", "--preprocess-set", "center-crop=8", "--preprocess-set", "scale=1/255",
            "--json", tmp_path / "make.json"])
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["cat0.npz", "cat1.npz"]   # --count caps it
    doc = read_json(tmp_path / "make.json")
    assert doc["inputs"]["reader_options"]["preprocess"]["center-crop"] == [8, 8]
    assert 0 <= doc["results"]["stats"][0]["min"] and doc["results"]["stats"][0]["max"] <= 1
    invoke(["compare", a, b, "--inputs", tmp_path / "d", "--min-cosine", "0.999"])


def test_show_makes_a_0_255_range_visible(tmp_path, models):
    a, _ = models
    rng = np.random.default_rng(0)
    pixels = [rng.integers(0, 256, (1, 3, 8, 8)).astype(np.float32) for _ in range(3)]
    save_npz(tmp_path / "raw", [{"x": p} for p in pixels])
    result = invoke(["inputs", "show", tmp_path / "raw", "--json", tmp_path / "r.json"])
    stats = read_json(tmp_path / "r.json")["results"]["stats"][0]
    everything = np.concatenate([p.ravel() for p in pixels]).astype(np.float64)
    assert (stats["name"], stats["dtypes"], stats["shapes"]) == ("x", ["float32"], ["[1, 3, 8, 8]"])
    assert (stats["min"], stats["max"]) == (everything.min(), everything.max())
    assert stats["mean"] == pytest.approx(everything.mean()) and stats["looks_like"] == "pixels [0, 255]"
    assert "raw pixel scale?" in result.stdout
    # with the model, samples are checked against it too
    invoke(["inputs", "show", tmp_path / "raw", "--model", a])


def test_show_counts_nan_and_exits_1(tmp_path):
    bad = np.ones((1, 4), np.float32)
    bad[0, 1] = np.nan
    bad[0, 2] = np.inf
    save_npz(tmp_path / "d", [{"x": np.ones((1, 4), np.float32)}, {"x": bad}])
    invoke(["inputs", "show", tmp_path / "d", "--json", tmp_path / "r.json"], exit_code=1)
    stats = read_json(tmp_path / "r.json")["results"]["stats"][0]
    assert (stats["nan"], stats["inf"], stats["min"], stats["max"]) == (1, 1, 1.0, 1.0)


def test_show_without_a_model_reads_names_from_the_files(tmp_path):
    for i in range(2):
        folder = tmp_path / "d" / f"s{i}"
        folder.mkdir(parents=True)
        np.save(folder / "ids.npy", np.arange(6, dtype=np.int64) + i)
        np.save(folder / "mask.npy", np.ones(6, np.bool_))
    invoke(["inputs", "show", tmp_path / "d", "--json", tmp_path / "r.json"])
    stats = {s["name"]: s for s in read_json(tmp_path / "r.json")["results"]["stats"]}
    assert set(stats) == {"ids", "mask"}
    assert (stats["ids"]["min"], stats["ids"]["max"], stats["ids"]["dtypes"]) == (0, 6, ["int64"])
    (tmp_path / "imgs").mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "imgs" / "a.png")
    result = invoke(["inputs", "show", tmp_path / "imgs"], exit_code=2)
    assert "images and .bin dumps need --model" in result.stderr


@pytest.mark.parametrize("low,high,mean,std,integers,expected", [
    (0, 255, 120, 60, True, "pixels [0, 255]"), (0.2, 200.5, 100, 50, False, "[0, 255]"),
    (0, 1, 0.5, 0.2, False, "[0, 1]"), (-1, 1, 0, 0.5, False, "[-1, 1]"),
    (-2.1, 2.6, 0.1, 1.1, False, "normalised (mean ~0, std ~1)"), (0, 1000, 3, 9, True, ""),
])
def test_looks_like(low, high, mean, std, integers, expected):
    assert looks_like(low, high, mean, std, integers) == expected
