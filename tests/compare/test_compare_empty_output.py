"""`mi compare` of a model whose output has a 0-size dimension (a detector that found nothing: boxes
of shape (0, 4)): the KL/top-k pass raised ValueError on the empty rows, exit 4 "a bug in mi"."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..fixtures.helpers import invoke, output_entry, read_json, save, save_npz


def _no_boxes() -> onnx.ModelProto:
    """boxes = x[0:0]: shape (0, 4) whatever x holds."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [None, 4])
    zeros = [numpy_helper.from_array(np.array([0], np.int64), n) for n in ("starts", "ends", "axes")]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["boxes"])
    model = helper.make_model(helper.make_graph([node], "no_boxes", [x], [boxes], zeros),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_an_output_with_no_rows_compares_equal(tmp_path) -> None:
    model = save(_no_boxes(), tmp_path / "m.onnx")
    data = save_npz(tmp_path / "data", [{"x": np.arange(12, dtype=np.float32).reshape(3, 4)}])
    result = invoke(["compare", model, model, "--inputs", data, "--min-cosine", "0.99", "--json", tmp_path / "r.json"])
    out = output_entry(read_json(tmp_path / "r.json"), "boxes")
    assert out["dataset"]["cosine"] == 1.0 and out["dataset"]["max_abs"] == 0.0
    assert out["dataset"]["kl"] is None and out["dataset"]["top1"] is None
    assert "PASS" in result.stdout
