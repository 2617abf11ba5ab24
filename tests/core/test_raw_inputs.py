"""Raw .bin dumps: dtype and shape from flags or the model, byte-count checks, folders, byte order."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.inputs import discover_samples
from inspector_cli.core.raw_dumps import parse_raw_dtype, raw_options
from inspector_cli.errors import InputDataError, UsageError

from ..fixtures.helpers import affine_model, invoke, make_model, read_json, save, vi


def specs(model):
    return ModelGraph.from_proto(model).inputs


def load(paths, model, dtypes=(), shapes=()):
    options = {"raw": raw_options(dtypes, shapes)} if dtypes or shapes else {}
    return list(discover_samples([str(p) for p in paths], specs(model), options))


def two_inputs(shape_b=(2, 2)):
    node = helper.make_node("Identity", ["a"], ["y"], name="id")
    return make_model([node], [vi("a", [1, 3]), vi("b", list(shape_b), TensorProto.INT64)], [vi("y", [1, 3])])


def test_single_input_dump_takes_dtype_and_shape_from_the_model(tmp_path):
    values = np.arange(4, dtype=np.float32).reshape(1, 4) / 3
    values.tofile(tmp_path / "s0.bin")
    [(sample_id, feeds)] = load([tmp_path / "s0.bin"], affine_model())
    assert sample_id == "s0.bin" and feeds["x"].dtype == np.float32
    np.testing.assert_array_equal(feeds["x"], values)


def test_per_sample_folders_with_one_dump_per_input(tmp_path):
    for i in range(2):
        folder = tmp_path / "data" / f"sample{i}"
        folder.mkdir(parents=True)
        np.full((1, 3), i, np.float32).tofile(folder / "a.bin")
        np.arange(4, dtype=np.int64).tofile(folder / "b.bin")
    samples = load([tmp_path / "data"], two_inputs())
    assert [s for s, _ in samples] == ["sample0", "sample1"]
    assert samples[1][1]["a"].tolist() == [[1, 1, 1]] and samples[1][1]["b"].tolist() == [[0, 1], [2, 3]]
    # ONNX-zoo style names: input_K.bin is the K-th input
    zoo = tmp_path / "zoo" / "s"
    zoo.mkdir(parents=True)
    np.ones((1, 3), np.float32).tofile(zoo / "input_0.bin")
    np.zeros(4, np.int64).tofile(zoo / "input_1.bin")
    [(_, feeds)] = load([tmp_path / "zoo"], two_inputs())
    assert feeds["b"].shape == (2, 2)


def test_flags_for_dynamic_shapes_and_big_endian_data(tmp_path):
    model = affine_model(shape=("N", 4))
    values = np.linspace(-1, 1, 8).astype(">f4").reshape(2, 4)
    values.tofile(tmp_path / "be.bin")
    with pytest.raises(InputDataError, match=r"be\.bin: input 'x' \[N, 4\] has no fixed shape.*--raw-shape x:"):
        load([tmp_path / "be.bin"], model)
    [(_, feeds)] = load([tmp_path / "be.bin"], model, dtypes=["x:>f4"], shapes=["x:2x4"])
    assert feeds["x"].dtype == np.float32 and feeds["x"].dtype.isnative
    np.testing.assert_array_equal(feeds["x"], values.astype(np.float32))


def test_byte_count_mismatch_names_the_file_and_the_likely_dtype(tmp_path):
    np.zeros((1, 4), np.float64).tofile(tmp_path / "s.bin")            # 32 bytes where 16 are expected
    with pytest.raises(InputDataError, match=r"s\.bin: 32 bytes, but float32 \[1, 4\] for input 'x' needs 16 "
                                             r"\(4 x 4\) \(check --raw-dtype and --raw-shape; the size fits float64"):
        load([tmp_path / "s.bin"], affine_model())


def test_flags_that_do_not_fit_the_model_fail_before_reading(tmp_path):
    np.zeros((1, 4), np.uint8).tofile(tmp_path / "s.bin")
    with pytest.raises(InputDataError, match=r"\.bin data for input 'x' is uint8, the model expects float32"):
        load([tmp_path / "s.bin"], affine_model(), dtypes=["uint8"])
    with pytest.raises(InputDataError, match=r"shape \[1, 5\] for input 'x' does not fit the model's \[1, 4\]"):
        load([tmp_path / "s.bin"], affine_model(), shapes=["x:1x5"])
    with pytest.raises(UsageError, match=r"--raw-shape z: not an input of the model"):
        load([tmp_path / "s.bin"], affine_model(), shapes=["z:1x4"])
    with pytest.raises(UsageError, match="not a numpy dtype"):
        parse_raw_dtype("x:floaty")
    with pytest.raises(UsageError, match="not a numeric dtype"):
        parse_raw_dtype("U8")


def test_compare_on_raw_dumps_records_their_layout(tmp_path):
    save(affine_model(), tmp_path / "a.onnx")
    save(affine_model(scale=2.0), tmp_path / "b.onnx")
    (tmp_path / "dumps").mkdir()
    np.array([[1, 2, 3, 4]], np.float32).tofile(tmp_path / "dumps" / "0.bin")
    invoke(["compare", tmp_path / "a.onnx", tmp_path / "b.onnx", "--inputs", tmp_path / "dumps",
            "--raw-shape", "1x4", "--max-abs", "4", "--json", tmp_path / "r.json"])
    doc = read_json(tmp_path / "r.json")
    assert doc["results"]["outputs"][0]["dataset"]["max_abs"] == 4.0        # 2x - x at x = 4
    assert doc["inputs"]["reader_options"]["raw"]["inputs"] == {"x": {"dtype": "float32", "shape": [1, 4]}}
