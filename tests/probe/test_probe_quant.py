"""--quant-ranges on a real int8 QDQ CNN whose input quantiser got a bad scale (1/128 for [0, 255] data)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ..fixtures.helpers import invoke, read_json, save_npz


@pytest.fixture()
def bad_input_scale(cnn_pair, tmp_path):
    _, int8, _ = cnn_pair
    model = onnx.load(str(int8))
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "input")
    inits = {t.name: t for t in model.graph.initializer}
    inits[q.input[1]].CopyFrom(numpy_helper.from_array(np.array(1 / 128, np.float32), q.input[1]))
    zp = int(numpy_helper.to_array(inits[q.input[2]]))
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    rng = np.random.default_rng(5)
    xs = [rng.uniform(0, 255, (1, 3, 32, 32)).astype(np.float32) for _ in range(3)]
    save_npz(tmp_path / "pixels", [{"input": x} for x in xs])
    return path, q.name, zp, xs


def test_saturation_shares_of_a_bad_input_scale(bad_input_scale, cnn_pair, tmp_path):
    path, node, zp, xs = bad_input_scale
    fp32, _, _ = cnn_pair
    invoke(["probe", path, "--inputs", tmp_path / "pixels", "--quant-ranges", "--reference", fp32, "--no-history",
            "--json", tmp_path / "r.json"], exit_code=1)
    res = read_json(tmp_path / "r.json")["results"]
    row = next(q for q in res["quant"] if q["node"] == node)
    values = np.concatenate([x.ravel() for x in xs])
    s = 1 / 128
    expected = np.count_nonzero(values > s * (127 - zp + 0.5)) + np.count_nonzero(values < s * (-128 - zp - 0.5))
    assert (row["tensor"], row["qtype"], row["source"]) == ("input", "int8", "activation")
    assert row["saturated"] == expected and row["count"] == values.size
    assert row["saturated_share"] == pytest.approx(expected / values.size) and row["saturated_share"] > 0.99
    assert row["representable"] == pytest.approx([s * (-128 - zp), s * (127 - zp)])
    assert row["observed"] == [float(values.min()), float(values.max())]
    q_lo = min(127, max(-128, round(float(values.min()) / s) + zp))
    assert row["used_share"] == pytest.approx((127 - q_lo + 1) / 256)
    assert row["flagged"] and row["reference"]["saturated"] == expected  # the fp32 model sees the same input
    finding = next(f for f in res["findings"] if f["rule"] == "MI825" and f["node"] == node)
    assert "saturate" in finding["message"]
    # The well-calibrated quantisers downstream saturate far less than the bad one.
    others = [q["saturated_share"] for q in res["quant"] if q["node"] != node and q["source"] == "activation"]
    assert others and max(others) < row["saturated_share"]


def test_good_model_relu_folding_is_not_saturation(cnn_pair, tmp_path):
    _, int8, data = cnn_pair
    invoke(["probe", int8, "--inputs", data, "--quant-ranges", "--max-saturation", "0.2", "--no-history",
            "--json", tmp_path / "r.json"])
    res = read_json(tmp_path / "r.json")["results"]
    folded = [q for q in res["quant"] if q["zero_point"] == -128 and q["clipped_low"] > 0]
    assert folded, "quantize_static folds ReLU into QuantizeLinear with zero point -128"
    assert all(q["saturated"] < q["clipped_low"] for q in folded)
    tensors = {t["name"] for t in res["tensors"]}
    assert tensors == {q["tensor"] for q in res["quant"] if q["source"] != "weight"}  # only the quantisers' inputs


def test_reference_needs_quant_ranges(cnn_pair):
    fp32, int8, data = cnn_pair
    result = invoke(["probe", int8, "--inputs", data, "--reference", fp32, "--no-history"], exit_code=2)
    assert result.stderr == "Error: --reference is used by --quant-ranges; add --quant-ranges\n"


def test_qlinear_output_saturation(tmp_path):
    """QOperator format: a QLinearMatMul whose output scale is too small clips at 0 and 255."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from ..fixtures.helpers import init, make_model, save, vi

    rng = np.random.default_rng(2)
    b = rng.integers(0, 255, (8, 4)).astype(np.uint8)
    node = helper.make_node("QLinearMatMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"], ["y"], name="qmm")
    inits = [init("a_s", np.array(0.02, np.float32)), init("a_z", np.array(128, np.uint8)), init("b", b),
             init("b_s", np.array(0.01, np.float32)), init("b_z", np.array(128, np.uint8)),
             init("y_s", np.array(0.01, np.float32)), init("y_z", np.array(128, np.uint8))]
    model = save(make_model([node], [vi("a", [2, 8], TensorProto.UINT8)], [vi("y", [2, 4], TensorProto.UINT8)],
                            inits, opset=13), tmp_path / "q.onnx")
    xs = [rng.integers(0, 255, (2, 8)).astype(np.uint8) for _ in range(4)]
    save_npz(tmp_path / "d", [{"a": x} for x in xs])
    invoke(["probe", model, "--inputs", tmp_path / "d", "--quant-ranges", "--no-history", "--json",
            tmp_path / "r.json"], exit_code=1)
    row = read_json(tmp_path / "r.json")["results"]["quant"][0]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    ys = np.concatenate([session.run(None, {"a": x})[0].ravel() for x in xs])
    assert (row["node"], row["source"], row["qtype"], row["tensor"]) == ("qmm", "qlinear-output", "uint8", "y")
    assert row["saturated"] == np.count_nonzero((ys == 0) | (ys == 255)) > 0 and row["count"] == ys.size
    assert row["observed"] == pytest.approx([0.01 * (int(ys.min()) - 128), 0.01 * (int(ys.max()) - 128)])
    assert row["used_share"] == pytest.approx((int(ys.max()) - int(ys.min()) + 1) / 256)


def test_quant_ranges_on_a_weight_only_quantisation_says_so(tmp_path):
    """Weights stored as int8 and dequantised (no QuantizeLinear, as skl2onnx + quantize_static leave a
    linear model): --quant-ranges alone has nothing to measure, and the error says why and what to add."""
    from onnx import helper

    from ..fixtures.helpers import init, make_model, save, vi

    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dq_w"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    inits = [init("wq", np.arange(6, dtype=np.int8).reshape(3, 2)), init("ws", np.array(0.5, np.float32)),
             init("wz", np.array(0, np.int8))]
    path = save(make_model(nodes, [vi("x", ["N", 3])], [vi("y", ["N", 2])], inits), tmp_path / "wonly.onnx")
    save_npz(tmp_path / "data", [{"x": np.ones((1, 3), np.float32)}])
    result = invoke(["probe", path, "--inputs", tmp_path / "data", "--quant-ranges", "--no-history"], exit_code=2)
    assert result.stderr == (f"Error: {path}: nothing to probe: --quant-ranges found no QuantizeLinear or QLinear "
                             "op with constant parameters (add --select to probe tensors)\n")
