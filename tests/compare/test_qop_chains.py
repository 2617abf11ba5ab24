"""Pairing a QOperator model with its float original (issue 14: MobileNetV2 30 of QDQ's 65 layers, the
GPT-2-like decoder 34 of 46, the GRU model 5 of 6).

Causes, each reproduced here on one small graph:
- chains: MatMul -> Add(bias) -> Sigmoid is one chain (the unit a runtime fuses), but QLinearMatMul ->
  QLinearAdd -> QLinearSigmoid were three, so the float chain's end was paired with the QLinearMatMul
  (as "fused") and the residual Add reading the QLinearAdd found its inputs "different";
- an embedding Gather on int8 weights writes integers nothing in the graph quantises: the QLinearAdd
  reading them carries their scale as its input parameters, but they were no tensor to compare, so the
  Add had no data input and no counterpart;
- `quant_pre_process` (run before static quantisation) folds the exporter's zero Pad into the Conv's
  pads: the Conv read a Pad output with no counterpart, and nothing downstream paired.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector_cli.testing.models import save_samples

from ..fixtures.helpers import init, invoke, make_model, read_json, save, vi

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.zoo.truth import recompute  # noqa: E402  (the sweep's independent recomputation)

pytest.importorskip("onnxruntime.quantization")


def _model(folded: bool) -> onnx.ModelProto:
    """Text: ids -> Gather(emb) + pos -> e; e -> MatMul+Add+Sigmoid -> s; y = e + s.
    Image: img -> Pad(0,0,1,1) -> Conv -> Relu -> z, or (folded) one Conv with pads (0,0,1,1)."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["tok"], name="embed", axis=0),
             helper.make_node("Add", ["tok", "pos"], ["e"], name="add_pos"),
             helper.make_node("MatMul", ["e", "w"], ["h"], name="proj"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="proj_bias"),
             helper.make_node("Sigmoid", ["hb"], ["s"], name="gate"),
             helper.make_node("Add", ["e", "s"], ["y"], name="residual")]
    if folded:
        nodes.append(helper.make_node("Conv", ["img", "k"], ["c"], name="conv", pads=[0, 0, 1, 1], strides=[2, 2]))
    else:
        nodes += [helper.make_node("Pad", ["img", "pads", "zero"], ["padded"], name="pad", mode="constant"),
                  helper.make_node("Conv", ["padded", "k"], ["c"], name="conv", pads=[0, 0, 0, 0], strides=[2, 2])]
    nodes.append(helper.make_node("Relu", ["c"], ["z"], name="relu"))
    inits = [init("emb", rng.normal(size=(50, 16)).astype(np.float32)),
             init("pos", rng.normal(size=(6, 16)).astype(np.float32) * 0.5),
             init("w", rng.normal(size=(16, 16)).astype(np.float32) * 0.3),
             init("b", rng.normal(size=(16,)).astype(np.float32) * 0.1),
             init("k", rng.normal(size=(4, 3, 3, 3)).astype(np.float32) * 0.3),
             init("pads", np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)), init("zero", np.array(0.0, np.float32))]
    inputs = [vi("ids", ["batch", 6], TensorProto.INT64), vi("img", ["batch", 3, 8, 8])]
    return make_model(nodes, inputs, [vi("y", ["batch", 6, 16]), vi("z", ["batch", 4, 4, 4])], inits, opset=17)


def _samples(n: int) -> List[Dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [{"ids": rng.integers(0, 50, size=(1, 6)).astype(np.int64),
             "img": rng.normal(size=(1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """fp32 (with the Pad), and QDQ and QOperator copies quantised from the folded graph, as
    quant_pre_process + quantize_static make them."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    folder = tmp_path_factory.mktemp("qop")
    save(_model(False), folder / "fp32.onnx")
    save(_model(True), folder / "folded.onnx")
    calibration = _samples(8)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(calibration[2:])

        def get_next(self):  # type: ignore[no-untyped-def]
            return next(self.it, None)

    for name, form in (("qdq", QuantFormat.QDQ), ("qop", QuantFormat.QOperator)):
        quantize_static(str(folder / "folded.onnx"), str(folder / f"{name}.onnx"), Reader(), quant_format=form,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        op_types_to_quantize=["Gather", "Add", "MatMul", "Sigmoid", "Conv", "Relu"])
    save_samples(calibration[:2], folder / "data")
    return folder


def _compare(zoo: Path, variant: str) -> dict:
    out = zoo / f"{variant}.json"
    invoke(["compare", zoo / "fp32.onnx", zoo / f"{variant}.onnx", "--inputs", zoo / "data", "--layers", "all",
            "--granularity", "tensor", "--opt-level", "disable", "--json", out])
    return read_json(out)["results"]["layers"]


def test_qoperator_pairs_every_float_tensor(zoo: Path) -> None:
    qop = _compare(zoo, "qop")
    rows = {row["name"]: row for row in qop["layers"]}
    # every float tensor but the Conv inside Conv+Relu (QLinearConv is both) and the Pad; the image input
    # too, as the candidate quantises it
    assert set(rows) == {"img", "tok", "e", "h", "hb", "s", "y", "z"}, sorted(rows)
    # one chain on both sides, aligned op by op (a chain's end stands for the whole chain)
    assert [rows[t]["op_b"] for t in ("h", "hb")] == ["QLinearMatMul", "QLinearAdd"]
    assert (rows["s"]["op_a"], rows["s"]["op_b"]) == ("MatMul+Add+Sigmoid", "QLinearMatMul+QLinearAdd+QLinearSigmoid")
    assert rows["y"]["op_b"] == "QLinearAdd" and rows["y"]["method"] == "qdq"
    assert rows["tok"]["name_b"].endswith("_quantized") and rows["e"]["op_b"] == "Gather+QLinearAdd"
    assert rows["z"]["op_b"] == "QLinearConv" and rows["z"]["method"] == "fused"  # Relu: zero point 0 clamps
    unpaired = {u["tensor"]: u["reason"] for u in qop["unpaired_a"]}
    assert unpaired == {"padded": "a Pad the other model folds into its Conv's padding",
                        "c": "fused into 'z' (Conv+Relu) to match QLinearConv in the other model"}
    qdq = _compare(zoo, "qdq")
    assert len(qop["layers"]) >= len(qdq["layers"])


def test_qoperator_pairs_hold_the_same_quantities(zoo: Path) -> None:
    """Each pair's cosine as mi reports it equals the sweep's independent recomputation (tensors exposed as
    outputs, QOperator integers dequantised with their own scale and zero point): right pairs, not just many."""
    _compare(zoo, "qop")
    truths = recompute(zoo / "qop.json", zoo / "fp32.onnx", zoo / "qop.onnx", zoo / "data")
    assert len(truths) == 8 and all(t.true_cosine is not None for t in truths), [t.note for t in truths]
    assert max(t.delta for t in truths) < 1e-6  # type: ignore[type-var]
    assert min(t.true_cosine for t in truths) > 0.99  # type: ignore[type-var]
