"""Labels on a classifier with a predicted-label output beside its probabilities (issue 44: the sklearn
digits MLP, as skl2onnx writes it: `label` int64 [N] first, `probabilities` float [N, classes]).

Each test fails on the code before issue 44 (checked):
- `sample,label` rows went to the int64 `label` output: "label 2 is outside the 1 classes" (exit 3);
- labels named for `probabilities` also made a row for `label`: "no sample has a label for output
  'label'", exit 1 though nothing failed;
- `--target` measured agreement with fp32 only: a changed prediction missed it even where the accuracy
  against the labels did not drop (no acc1/acc1_drop target existed: "unknown metric");
- the plan's baseline row read "meets: no" when the quantised model met the targets.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.remedy.evaluate import Evaluator, parse_target
from inspector_cli.remedy.label_binding import PREDICTED, SCORES, ZIPMAP, bind_labels

from ..fixtures.helpers import invoke, read_json, save_npz
from ..fixtures.subproc import assert_status, run_mi
from .models import quantize_qdq

CLASSES = 10


def _classifier() -> onnx.ModelProto:
    """x[1,16] -> MatMul+Add -> Relu -> MatMul+Add -> logits; Softmax -> probabilities; ArgMax -> label."""
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (16, 32)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.1, 32).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.normal(0, 0.5, (32, CLASSES)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.normal(0, 0.1, CLASSES).astype(np.float32), "b2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="add1"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["z"], name="mm2"),
             helper.make_node("Add", ["z", "b2"], ["logits"], name="add2"),
             helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
             helper.make_node("ArgMax", ["logits"], ["label"], name="argmax", axis=1, keepdims=0)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [1]),
                               helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, CLASSES])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    import onnxruntime as ort

    folder: Path = tmp_path_factory.mktemp("classifier")
    onnx.save(_classifier(), folder / "fp32.onnx")
    rng = np.random.default_rng(3)
    samples = [{"x": rng.normal(0, 1, (1, 16)).astype(np.float32)} for _ in range(20)]
    quantize_qdq(folder / "fp32.onnx", folder / "int8.onnx", samples[:10])
    save_npz(folder / "data", samples)
    session = ort.InferenceSession(str(folder / "fp32.onnx"), providers=["CPUExecutionProvider"])
    predicted = [int(session.run(["label"], s)[0][0]) for s in samples]
    # the fp32 model is right on 18 of 20: two labels moved by one class
    labels = {f"s{i:03d}": (p + 1) % CLASSES if i in (3, 7) else p for i, p in enumerate(predicted)}
    names = sorted(p.stem for p in (folder / "data").iterdir())
    assert names == sorted(labels), names
    (folder / "labels.csv").write_text("sample,label\n" + "".join(f"{k},{v}\n" for k, v in labels.items()))
    (folder / "named.json").write_text(json.dumps({k: {"probabilities": v} for k, v in labels.items()}))
    return {"folder": folder, "labels": labels}


def _compare_with_labels(classifier, labels: str, tmp_path):
    """`mi compare fp32 int8 --labels FOLDER/labels` (exit 0): its stdout and accuracy rows."""
    folder = classifier["folder"]
    ran = run_mi(["compare", folder / "fp32.onnx", folder / "int8.onnx", "--inputs", folder / "data",
                  "--labels", folder / labels, "--json", tmp_path / "r.json"], cwd=tmp_path)
    assert_status(ran, 0)
    return ran.stdout, read_json(tmp_path / "r.json")["results"]["remedy"]["accuracy"]


def test_sample_label_rows_bind_to_the_probabilities(classifier, tmp_path):
    stdout, rows = _compare_with_labels(classifier, "labels.csv", tmp_path)
    assert "labels read for output 'probabilities' (scores of 10 classes of 2 outputs; not 'label')" in stdout
    assert [(r["output"], r["k"], r["samples"]) for r in rows] == [("probabilities", 1, 20), ("probabilities", 5, 20)]
    assert rows[0]["accuracy_a"] == pytest.approx(18 / 20)


def test_labels_named_for_the_probabilities_make_no_label_row(classifier, tmp_path):
    _, rows = _compare_with_labels(classifier, "named.json", tmp_path)
    assert {r["output"] for r in rows} == {"probabilities"} and all(not r["failed_gates"] for r in rows)


def test_binding_rules():
    outputs = {"label": np.array([3], np.int64), "probabilities": np.zeros((1, 4), np.float32)}
    [binding] = bind_labels({"s": {"*": 3}}, ["s"], outputs)
    assert (binding.output, binding.kind) == ("probabilities", SCORES)
    [zipmap] = bind_labels({"s": {"*": 2}}, ["s"], {"output_label": np.array([2], np.int64),
                                                    "output_probability": [{0: 0.1, 2: 0.7, 5: 0.2}]})
    assert (zipmap.output, zipmap.kind) == ("output_probability", ZIPMAP)
    assert zipmap.correct([{0: 0.1, 2: 0.7, 5: 0.2}], "s", 1) is True  # class key 2, not index 2
    [label_only] = bind_labels({"s": {"*": 3}}, ["s"], {"label": np.array([3], np.int64)})
    assert label_only.kind == PREDICTED and label_only.ks == (1,) and label_only.correct(np.array([3]), "s", 1)
    with pytest.raises(Exception, match="output 'probs' is not an output"):
        bind_labels({"s": {"probs": 1}}, ["s"], outputs)


def test_accuracy_target_ignores_a_changed_prediction_that_costs_no_accuracy():
    """Two samples, labels 1 and 0. The reference predicts (1, 1): 50% right; the candidate (1, 2): still 50%.
    Agreement (top1 with the reference) is 0.5 and a changed label output misses it; acc1_drop is 0."""
    from inspector_cli.remedy.label_binding import LabelBinding

    def out(label, scores):
        return {"label": np.array([label], np.int64), "probabilities": np.array([scores], np.float32)}

    binding = LabelBinding("probabilities", SCORES, {"s0": 1, "s1": 0}, "")
    targets = [parse_target("acc1_drop<=0.0"), parse_target("acc1>=0.5")]
    ev = Evaluator([{}] * 2, ["s0", "s1"], targets, extra=binding)
    ev.reference = [out(1, [0.1, 0.8, 0.1]), out(1, [0.2, 0.7, 0.1])]
    result = ev.judge([out(1, [0.1, 0.8, 0.1]), out(2, [0.2, 0.1, 0.7])])
    assert result.metrics["probabilities"]["acc1"] == 0.5 and result.metrics["probabilities"]["acc1_drop"] == 0.0
    assert result.meets
    agreement = Evaluator([{}] * 2, ["s0", "s1"], [parse_target("top1>=0.99")])
    agreement.reference = ev.reference
    assert not agreement.judge([out(1, [0.1, 0.8, 0.1]), out(2, [0.2, 0.1, 0.7])]).meets


def test_baseline_row_says_when_the_quantised_model_meets(classifier, tmp_path):
    folder = classifier["folder"]
    result = invoke(["compare", folder / "fp32.onnx", folder / "int8.onnx", "--inputs", folder / "data",
                     "--fallback-plan", "--target", "probabilities:cosine>=0.5"], exit_code=0)
    baseline = next(line for line in result.stdout.splitlines() if line.startswith("baseline"))
    assert baseline.split()[-1] == "yes", result.stdout
    assert "plan found: (none)" in result.stdout
