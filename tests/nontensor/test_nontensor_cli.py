"""Non-tensor values from the CLI, as real processes (issue 29): string outputs in `compare --golden` and
`compare A B`, ragged sequences in `probe` and `compare --layers`, ZipMap's seq(map) in `compare`.
Before the fix each of these exited 4 (could not convert string to float, setting an array element with
a sequence, 'list' object has no attribute 'dtype')."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from onnx import numpy_helper

from tests.fixtures.nontensor_models import WORDS, save_samples, sequence_model, string_model, zipmap_model
from tests.fixtures.subproc import assert_status, run_mi

IDS = [np.array([3, 1, 4, 1], np.int64), np.array([5, 9, 2, 6], np.int64)]


def _outputs(path: Path) -> dict:
    return {o["name"]: o for o in json.loads(path.read_text())["results"]["outputs"]}


def test_golden_equal_strings_pass_and_unequal_fail_naming_the_output(tmp_path):
    model = string_model(tmp_path / "m.onnx")
    for folder, changed in (("good", None), ("bad", "x")):
        labels = [np.array([WORDS[i] for i in ids]) for ids in IDS]
        if changed:
            labels[1] = labels[1].copy()
            labels[1][2] = changed  # sample_01's third label: 'two' in the model
        save_samples(tmp_path / folder, [{"ids": ids, "label": lab, "score": ids.astype(np.float32)}
                                         for ids, lab in zip(IDS, labels)])
    ran = run_mi(["compare", model, "--golden", tmp_path / "good", "--json", tmp_path / "good.json"], cwd=tmp_path)
    assert_status(ran, 0)
    label = _outputs(tmp_path / "good.json")["label"]
    assert (label["dtype_a"], label["shape_a"]) == ("string", [4])
    assert label["equality"] == {"items": 8, "unequal": 0, "unequal_samples": 0, "first_sample": None,
                                 "first_at": None, "first_a": None, "first_b": None}
    assert all(v is None for v in label["dataset"].values())  # no metric applies to text
    ran = run_mi(["compare", model, "--golden", tmp_path / "bad", "--json", tmp_path / "bad.json"], cwd=tmp_path)
    assert_status(ran, 1)
    assert ("output 'label': 1 of 8 value(s) differ on 1 sample(s); first on sample sample_01.npz at [2]: "
            "'x' vs 'two'") in ran.stdout + ran.stderr
    assert _outputs(tmp_path / "bad.json")["score"]["dataset"]["cosine"] == 1.0


def test_golden_reads_string_tensors_and_sequences_from_pb(tmp_path):
    """The ONNX model-zoo layout: a string TensorProto, and a SequenceProto for a sequence output."""
    strings, seqs = string_model(tmp_path / "s.onnx"), sequence_model(tmp_path / "q.onnx")
    x = np.arange(20, dtype=np.float32).reshape(1, 5, 4) - 7
    windows = [x[:, 0:2], x[:, 2:4], x[:, 4:5]]
    words = np.array([WORDS[i] for i in IDS[0]], dtype=object)
    cases = [(strings, {"ids": IDS[0]}, [numpy_helper.from_array(words, "label")]),
             (seqs, {"x": x}, [numpy_helper.from_list(windows, "windows"), numpy_helper.from_array(np.maximum(x, 0), "joined")])]
    for model, inputs, outputs in cases:
        folder = tmp_path / model.stem / "test_data_set_0"
        folder.mkdir(parents=True)
        for i, (name, value) in enumerate(inputs.items()):
            (folder / f"input_{i}.pb").write_bytes(numpy_helper.from_array(value, name).SerializeToString())
        for i, proto in enumerate(outputs):
            (folder / f"output_{i}.pb").write_bytes(proto.SerializeToString())
        report = tmp_path / f"{model.stem}.json"
        ran = run_mi(["compare", model, "--golden", folder.parent, "--json", report], cwd=tmp_path)
        assert_status(ran, 0)
    windows_out = _outputs(tmp_path / "q.json")["windows"]
    assert (windows_out["dtype_a"], windows_out["shape_a"]) == ("seq(tensor(float32))", [3])
    assert windows_out["dataset"]["max_abs"] == 0.0 and windows_out["dataset"]["cosine"] == 1.0
    assert _outputs(tmp_path / "s.json")["label"]["equality"]["items"] == 4


def test_compare_two_models_string_labels_differ(tmp_path):
    a, b = string_model(tmp_path / "a.onnx"), string_model(tmp_path / "b.onnx", shift=(0, 0, 1, 0))
    data = save_samples(tmp_path / "data", [{"ids": ids} for ids in IDS])
    ran = run_mi(["compare", a, b, "--inputs", data, "--json", tmp_path / "r.json"], cwd=tmp_path)
    assert_status(ran, 1)
    label = _outputs(tmp_path / "r.json")["label"]
    assert label["equality"]["unequal"] == 2 and label["equality"]["unequal_samples"] == 2
    assert (label["equality"]["first_at"], label["equality"]["first_a"], label["equality"]["first_b"]) == \
        ("[2]", "'four'", "'five'")
    findings = json.loads((tmp_path / "r.json").read_text())["results"]["findings"]
    assert [(f["rule"], f["tensor"]) for f in findings] == [("MI805", "label")]


def _frames(rng: np.random.Generator):
    return [rng.standard_normal((1, t, 4)).astype(np.float32) for t in (5, 4, 7)]


def test_probe_measures_the_numbers_of_a_ragged_sequence(tmp_path):
    model = sequence_model(tmp_path / "q.onnx")
    xs = _frames(np.random.default_rng(0))
    data = save_samples(tmp_path / "data", [{"x": x} for x in xs])
    ran = run_mi(["probe", model, "--inputs", data, "--no-history", "--json", tmp_path / "p.json"], cwd=tmp_path)
    assert_status(ran, 0)
    tensors = {t["name"]: t for t in json.loads((tmp_path / "p.json").read_text())["results"]["tensors"]}
    windows = tensors["windows"]
    values = np.concatenate([x.reshape(-1) for x in xs]).astype(np.float64)
    assert (windows["dtype"], windows["shape"], windows["count"]) == ("seq(tensor(float32))", [3], values.size)
    assert abs(windows["mean"] - values.mean()) < 1e-9 and windows["max"] == float(values.max())
    assert "shape varies between samples ([3] then [2])" in windows["notes"]
    assert tensors["count"]["mean"] == (3 + 2 + 4) / 3


def test_compare_sequences_outputs_and_layers(tmp_path):
    a, b = sequence_model(tmp_path / "a.onnx"), sequence_model(tmp_path / "b.onnx", gain=1.25)
    xs = _frames(np.random.default_rng(1))
    data = save_samples(tmp_path / "data", [{"x": x} for x in xs])
    ran = run_mi(["compare", a, b, "--inputs", data, "--json", tmp_path / "r.json"], cwd=tmp_path)
    assert_status(ran, 0)
    windows = _outputs(tmp_path / "r.json")["windows"]
    assert (windows["dtype_a"], windows["shape_a"]) == ("seq(tensor(float32))", [3])
    worst = max(float(np.abs(x).max()) for x in xs) * 0.25
    assert abs(windows["dataset"]["max_abs"] - worst) < 1e-6 and windows["dataset"]["cosine"] > 1 - 1e-12  # a scale
    ran = run_mi(["compare", a, b, "--inputs", data, "--layers", "all", "--isolate", "all",
                  "--json", tmp_path / "layers.json"], cwd=tmp_path)
    assert_status(ran, 0)
    layers = {L["name"]: L for L in json.loads((tmp_path / "layers.json").read_text())["results"]["layers"]["layers"]}
    assert abs(layers["windows"]["dataset"]["max_abs"] - worst) < 1e-6


def test_compare_zipmap_probabilities_as_a_matrix(tmp_path):
    a, b = zipmap_model(tmp_path / "a.onnx"), zipmap_model(tmp_path / "b.onnx", boost=(0.0, 0.0, 1.0))
    rng = np.random.default_rng(2)
    logits = [rng.standard_normal((6, 3)).astype(np.float32) for _ in range(2)]
    data = save_samples(tmp_path / "data", [{"logits": x} for x in logits])
    ran = run_mi(["compare", a, b, "--inputs", data, "--json", tmp_path / "r.json"], cwd=tmp_path)
    assert_status(ran, 0)
    prob = _outputs(tmp_path / "r.json")["probability"]
    assert (prob["dtype_a"], prob["shape_a"]) == ("seq(map(int64,float32))", [6])

    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    pa = np.concatenate([softmax(x.astype(np.float64)) for x in logits])
    pb = np.concatenate([softmax(x.astype(np.float64) + [0, 0, 1]) for x in logits])
    assert abs(prob["dataset"]["max_abs"] - np.abs(pb - pa).max()) < 1e-6
    assert prob["dataset"]["top1"] == float(np.mean(pa.argmax(1) == pb.argmax(1)))


def test_nan_bisect_sees_a_nan_carried_by_a_sequence(tmp_path):
    """A NaN of the input travels through SplitToSequence: the sequence holds it, so the origin is the input
    (before: the sequence read as clean and ConcatFromSequence was blamed for making NaN from finite inputs)."""
    model = sequence_model(tmp_path / "q.onnx")
    x = np.random.default_rng(0).standard_normal((1, 5, 4)).astype(np.float32)
    x[0, 4, 1] = np.nan
    data = save_samples(tmp_path / "data", [{"x": x}])
    ran = run_mi(["nan-bisect", model, "--inputs", data, "--json", tmp_path / "nb.json"], cwd=tmp_path)
    assert_status(ran, 1)
    record = json.loads((tmp_path / "nb.json").read_text())["results"]["records"][0]
    assert record["outputs"] == {"windows": {"nan": 1, "inf": 0}, "joined": {"nan": 1, "inf": 0}}
    assert (record["origin"]["node"], record["origin"]["op_type"]) == ("x", "(input)")
