"""Input samples: every format, the zoo layout, synthetic generation, and every mismatch error."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.inputs import discover_samples, open_samples
from inspector_cli.core.synthetic import SyntheticSpec, make_synthetic_spec
from inspector_cli.errors import InputDataError, UsageError

from ..fixtures.helpers import affine_model, invoke, make_model, read_json, save, vi


def two_input_model():
    node = helper.make_node("Add", ["a", "b"], ["y"], name="add")
    return make_model([node], [vi("a", [1, 3]), vi("b", [1, 3])], [vi("y", [1, 3])])


def specs(model):
    return ModelGraph.from_proto(model).inputs


def load_all(paths, model):
    return list(discover_samples([str(p) for p in paths], specs(model)))


def write_pb(path, array, name=""):
    tensor = numpy_helper.from_array(array, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tensor.SerializeToString())


A = np.ones((1, 3), np.float32)
B = np.full((1, 3), 2, np.float32)


def test_npz_per_sample_with_input_names(tmp_path):
    for i in range(3):
        np.savez(tmp_path / f"s{i}.npz", a=A * i, b=B)
    samples = load_all([tmp_path], two_input_model())
    assert [s[0] for s in samples] == ["s0.npz", "s1.npz", "s2.npz"]
    np.testing.assert_array_equal(samples[2][1]["a"], A * 2)


def test_npz_positional_keys(tmp_path):
    np.savez(tmp_path / "s.npz", A, B)  # arr_0, arr_1
    ((_, feeds),) = load_all([tmp_path / "s.npz"], two_input_model())
    np.testing.assert_array_equal(feeds["b"], B)


def test_npy_single_input_and_multi_input_error(tmp_path):
    np.save(tmp_path / "one.npy", np.ones((1, 4), np.float32))
    ((_, feeds),) = load_all([tmp_path / "one.npy"], affine_model())
    assert list(feeds) == ["x"]
    with pytest.raises(InputDataError, match=r"one\.npy: a \.npy file holds one array but the model has 2 inputs"):
        load_all([tmp_path / "one.npy"], two_input_model())


def test_per_sample_folders_with_named_npy(tmp_path):
    for i in range(2):
        folder = tmp_path / f"sample{i}"
        folder.mkdir()
        np.save(folder / "a.npy", A * i)
        np.save(folder / "b.npy", B)
    samples = load_all([tmp_path], two_input_model())
    assert [s[0] for s in samples] == ["sample0", "sample1"]
    np.testing.assert_array_equal(samples[1][1]["a"], A)


def test_tensorproto_pb_files_by_name(tmp_path):
    write_pb(tmp_path / "x1.pb", np.ones((1, 4), np.float32), name="x")
    ((_, feeds),) = load_all([tmp_path / "x1.pb"], affine_model())
    np.testing.assert_array_equal(feeds["x"], np.ones((1, 4)))


def test_model_zoo_layout(tmp_path):
    for k in range(2):
        write_pb(tmp_path / f"test_data_set_{k}" / "input_0.pb", A * k)
        write_pb(tmp_path / f"test_data_set_{k}" / "input_1.pb", B)
        write_pb(tmp_path / f"test_data_set_{k}" / "output_0.pb", A * k + B)  # ignored as an input
    (tmp_path / "model.onnx").write_bytes(b"")  # zoo folders hold the model too
    samples = load_all([tmp_path], two_input_model())
    assert [s[0] for s in samples] == ["test_data_set_0", "test_data_set_1"]
    np.testing.assert_array_equal(samples[1][1]["a"], A)
    np.testing.assert_array_equal(samples[1][1]["b"], B)
    # one test_data_set folder passed directly is one sample
    assert len(load_all([tmp_path / "test_data_set_1"], two_input_model())) == 1


@pytest.mark.parametrize("feeds,match", [
    ({"a": A.astype(np.float64), "b": B}, r"s\.npz: input 'a' has dtype float64, the model expects float32"),
    ({"a": np.ones((1, 4), np.float32), "b": B}, r"s\.npz: input 'a' has shape \[1, 4\], the model expects \[1, 3\]"),
    ({"a": A}, r"s\.npz: missing input 'b'"),
    ({"a": A, "b": B, "c": A}, r"s\.npz: unknown input 'c'; the model's inputs are 'a', 'b'"),
])
def test_mismatch_errors_name_file_and_input(tmp_path, feeds, match):
    np.savez(tmp_path / "s.npz", **feeds)
    with pytest.raises(InputDataError, match=match):
        load_all([tmp_path / "s.npz"], two_input_model())


def test_mismatch_exit_code_through_cli(tmp_path):
    model = save(two_input_model(), tmp_path / "m.onnx")
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "s.npz", a=A.astype(np.float64), b=B)
    result = invoke(["compare", model, model, "--inputs", tmp_path / "data"], exit_code=3)
    assert "input 'a' has dtype float64" in result.stderr


def test_pickled_object_arrays_are_refused(tmp_path):
    np.save(tmp_path / "evil.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputDataError, match="without unpickling"):
        load_all([tmp_path / "evil.npy"], affine_model())


def test_empty_folder_and_missing_path(tmp_path):
    with pytest.raises(InputDataError, match="no input samples found"):
        load_all([tmp_path], affine_model())
    with pytest.raises(UsageError, match="no such file"):
        load_all([tmp_path / "nope"], affine_model())


def test_dynamic_dimension_needs_shape():
    model = affine_model(shape=(4, "seq"))
    with pytest.raises(InputDataError, match=r"input 'x' \[4, seq\]: dimension 1 \('seq'\) is dynamic.*--shape x:4xN"):
        open_samples([], specs(model), SyntheticSpec())
    with pytest.raises(InputDataError, match=r"dimension 0 \('s33x'\) is dynamic"):  # only the generated form
        open_samples([], specs(affine_model(shape=("s33x", 4))), SyntheticSpec())
    model = affine_model(shape=("batch", "seq"))  # the batch defaults, the sequence still asks
    with pytest.raises(InputDataError, match=r"dimension 1 \('seq'\) is dynamic.*--shape x:1xN"):
        open_samples([], specs(model), SyntheticSpec())
    samples = list(open_samples([], specs(model), make_synthetic_spec(2, 0, [], ["x:3x4"])))
    assert samples[0][1]["x"].shape == (3, 4)


# "s33": what torch.export (dynamo=True) names a dynamic batch; "unk__7": what shape inference invents
@pytest.mark.parametrize("batch", ["batch", "N", "batch_size", None, "s33", "unk__7"])
def test_symbolic_batch_defaults_to_one_with_a_note(batch):
    model = affine_model(shape=(batch, 4))
    samples = open_samples([], specs(model), SyntheticSpec())
    assert [feeds["x"].shape for _, feeds in samples] == [(1, 4)]
    shown = "?" if batch is None else batch
    assert samples.describe()["notes"] == [
        f"input 'x' [{shown}, 4]: symbolic batch dimension set to 1 (--shape x:... sets another)"]
    given = open_samples([], specs(model), make_synthetic_spec(1, 0, [], ["x:2x4"]))
    assert given.describe()["notes"] == [] and next(iter(given))[1]["x"].shape == (2, 4)


def test_synthetic_ranges_seed_and_dtypes():
    node = helper.make_node("Cast", ["ids"], ["y"], name="cast", to=TensorProto.FLOAT)
    model = make_model([node, helper.make_node("Identity", ["x"], ["z"], name="id")],
                       [vi("ids", [8], TensorProto.INT64), vi("x", [1000])], [vi("y", [8]), vi("z", [1000])])
    spec = make_synthetic_spec(3, 7, ["x:0,255", "ids:5,6"], [])
    first = list(open_samples([], specs(model), spec))
    again = list(open_samples([], specs(model), spec))
    x = first[1][1]["x"]
    assert x.dtype == np.float32 and x.min() >= 0 and x.max() <= 255 and x.max() > 200
    assert set(np.unique(first[0][1]["ids"])) <= {5, 6}
    np.testing.assert_array_equal(first[2][1]["x"], again[2][1]["x"])
    assert not np.array_equal(first[0][1]["x"], first[1][1]["x"])


def test_synthetic_summary_recorded_in_result(tmp_path):
    model = save(affine_model(), tmp_path / "m.onnx")
    invoke(["compare", model, model, "--samples", "3", "--seed", "5", "--val-range", "x:-1,1",
            "--json", tmp_path / "r.json"])
    inputs = read_json(tmp_path / "r.json")["inputs"]
    assert inputs["count"] == 3 and inputs["synthetic"] == {"count": 3, "seed": 5, "val_ranges": {"x": [-1.0, 1.0]},
                                                             "shapes": {}}


def test_bad_val_range_is_usage_error(tmp_path):
    model = save(affine_model(), tmp_path / "m.onnx")
    result = invoke(["compare", model, model, "--val-range", "x:1"], exit_code=2)
    assert "--val-range 'x:1'" in result.stderr
    result = invoke(["compare", model, model, "--val-range", "nope:0,1"], exit_code=2)
    assert "input 'nope'" in result.stderr
