"""Real architectures: clean models give no error-level finding; real defects in them are found."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from inspector_cli.validate.config import ValidateConfig
from inspector_cli.core.graph import load_model
from inspector_cli.testing.models import build_cnn
from inspector_cli.validate.context import Context, Reporter
from inspector_cli.validate.kernels import kernel_gaps
from inspector_cli.workflows.validate import validate_model


@pytest.fixture(scope="module")
def transformer_pair(tmp_path_factory):
    from inspector_cli.testing.transformer import build_transformer_pair

    return build_transformer_pair(tmp_path_factory.mktemp("encoder"), layers=2)


def errors(result):
    return [(f.rule, f.node, f.message) for f in result.findings if f.severity.value == "error"]


def test_clean_cnn_and_its_int8_qdq_version(cnn_pair):
    fp32, int8, _ = cnn_pair
    for path in (fp32, int8):
        result = validate_model(path)
        assert result.passed and not errors(result), errors(result)
        assert result.checked == ["loading", "checker", "integrity", "runtime", "quantisation", "hints"]
        assert result.runtime["session"] == "created"
    hints = {f.rule for f in validate_model(fp32).findings}
    assert hints == {"MI601"}  # the unfolded Conv -> BatchNormalization of the float model


def test_clean_transformer_and_its_int8_qdq_version(transformer_pair):
    fp32, int8 = transformer_pair
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in onnx.load(str(int8)).graph.node}
    for path in (fp32, int8):
        result = validate_model(path)
        assert result.passed and not errors(result), errors(result)
        assert [f.rule for f in result.findings] == ["MI405"]  # symbolic batch and sequence length only


def test_int8_against_fp32_compares_every_weight(cnn_pair, transformer_pair):
    for fp32, int8, expected in ((cnn_pair[0], cnn_pair[1], 14), (transformer_pair[0], transformer_pair[1], 25)):
        result = validate_model(int8, ValidateConfig(against=str(fp32)))
        assert not errors(result), errors(result)
        weights = result.against.weights
        assert len(weights) == expected
        # int8 weights (per-channel) and int32 biases: a correct quantisation is far above 30 dB
        assert min(w.sqnr_db for w in weights) > 30, sorted((w.sqnr_db, w.tensor) for w in weights)[:3]
    cnn = validate_model(cnn_pair[1], ValidateConfig(against=str(cnn_pair[0])))
    folded = [w for w in cnn.against.weights if w.folded]
    assert len(folded) == 12  # 6 Conv weights + 6 biases, each with its BatchNormalization folded in first
    assert {f.rule for f in cnn.findings} == {"MI706"}  # BN folded, Relu absorbed by the QDQ ranges


def test_weight_sqnr_is_the_hand_computed_value(cnn_pair, tmp_path):
    """Dequantise one Conv weight with numpy and compute its SQNR against the BN-folded float weight."""
    fp32, int8, _ = cnn_pair
    result = validate_model(int8, ValidateConfig(against=str(fp32)))
    check = next(w for w in result.against.weights if w.node == "conv_4" and "weight" in w.tensor)
    f, q = onnx.load(str(fp32)), onnx.load(str(int8))
    ref = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in f.graph.initializer}
    mine = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    w = ref["conv_4.weight"] * (ref["bn_5.scale"] / np.sqrt(ref["bn_5.var"] + 1e-5))[:, None, None, None]
    stem = check.tensor[: -len("_quantized")]
    # dequantised in float32, the package's one precision (core/quantparams.py)
    deq = (mine[check.tensor].astype(np.float32) - mine[stem + "_zero_point"][:, None, None, None].astype(np.float32)) \
        * mine[stem + "_scale"][:, None, None, None].astype(np.float32)
    expected = 10 * math.log10(np.sum(w ** 2) / np.sum((w - deq) ** 2))
    assert check.sqnr_db == pytest.approx(expected, rel=1e-9)
    assert check.folded == "bn_5"


def test_kernel_scan_finds_no_gap_in_clean_models(cnn_pair, transformer_pair):
    for path in (*cnn_pair[:2], *transformer_pair):
        graph = load_model(path)
        ctx = Context(Path(path), graph, ValidateConfig(), Reporter(ValidateConfig()))
        assert kernel_gaps(ctx) == []


def test_wrong_skip_connection_in_a_resnet_is_reported_with_both_shapes(tmp_path):
    """The downsample branch of the second stage built with 16 instead of 32 channels."""
    model = build_cnn(channels=(16, 32), blocks=1, image=32)
    weights = {t.name: t for t in model.graph.initializer}
    for name in ("down_16.weight", "down_16.bias", "bn_17.scale", "bn_17.bias", "bn_17.mean", "bn_17.var"):
        value = numpy_helper.to_array(weights[name])[:16]
        weights[name].CopyFrom(numpy_helper.from_array(value, name))
    path = tmp_path / "broken.onnx"
    onnx.save(model, str(path))
    result = validate_model(path)
    assert [(f.rule, f.node) for f in result.findings if f.severity.value == "error"] == [("MI202", "add_18")]
    shape = [f for f in result.findings if f.rule == "MI202"]
    assert "[1, 32, 16, 16]" in shape[0].message and "[1, 16, 16, 16]" in shape[0].message
    assert not [f for f in result.findings if f.rule == "MI404"]  # onnxruntime's refusal is the same defect


def test_torch_exported_encoder_is_clean(tmp_path):
    torch = pytest.importorskip("torch")
    import warnings

    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    path = tmp_path / "torch_encoder.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(encoder, (torch.randn(1, 8, 32),), str(path), dynamo=False, opset_version=17,
                              input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "seq"}})
        except Exception as exc:  # an exporter that needs packages CI does not have
            pytest.skip(f"torch export unavailable: {exc}")
    result = validate_model(path)
    assert result.passed and not errors(result), errors(result)
    assert not [f for f in result.findings if f.severity.value == "warning"]


@pytest.mark.parametrize("fmt", ["qdq-unfolded", "qoperator"])
def test_other_quantisation_layouts_against_fp32(cnn_pair, tmp_path, fmt):
    """QDQ without BN folding (BN stays after Q/DQ) and QOperator (QLinearConv, QGemm): no false alarms."""
    import logging

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from inspector_cli.testing.models import image_samples

    logging.getLogger().setLevel(logging.ERROR)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.samples = iter(image_samples(4, seed=5))

        def get_next(self):
            return next(self.samples, None)

    fp32 = cnn_pair[0]
    out = tmp_path / f"{fmt}.onnx"
    quantize_static(str(fp32), str(out), Reader(), per_channel=True, weight_type=QuantType.QInt8,
                    activation_type=QuantType.QUInt8,
                    quant_format=QuantFormat.QOperator if fmt == "qoperator" else QuantFormat.QDQ)
    result = validate_model(out, ValidateConfig(against=str(fp32)))
    assert not [f for f in result.findings if f.severity.value != "info"], result.findings
    weights = result.against.weights
    assert min(w.sqnr_db for w in weights) > 30
    if fmt == "qoperator":
        assert sorted(w.node for w in weights) == sorted(
            ["stem_1_quant", "conv_4_quant", "conv_7_quant", "conv_11_quant", "conv_14_quant", "down_16_quant",
             "fc_quant"])
        assert {f.rule for f in result.findings} == {"MI705", "MI706"}  # Conv -> QLinearConv is expected
    else:
        assert not any(w.folded for w in weights)  # the BatchNormalizations are still in the model
