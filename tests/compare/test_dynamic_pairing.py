"""Pairing a dynamically quantised model (issue 14): DynamicQuantizeLinear -> ConvInteger/MatMulInteger ->
Cast -> Mul(scales). Cause of the defect: the integer op's int32 output is no float tensor, so the chain
started at the rescaling Mul and was rejected as 'computed by Mul, not Conv' even with the same name."""
from __future__ import annotations

import pytest

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.compare.pairing.semantic import SemanticGraph
from inspector_cli.core.graph import load_model
from inspector_cli.testing.models import build_cnn, image_samples, save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import save


@pytest.fixture(scope="module")
def dynamic_pair(tmp_path_factory):  # type: ignore[no-untyped-def]
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = tmp_path_factory.mktemp("dynq")
    a = save(build_cnn(seed=0, softmax=False), folder / "a.onnx")
    b = folder / "b.onnx"
    quantize_dynamic(str(a), str(b), weight_type=QuantType.QUInt8, op_types_to_quantize=["Conv", "MatMul", "Gemm"])
    save_samples(image_samples(2, seed=5), folder / "data")
    return a, b, folder / "data"


def test_integer_chains_stand_for_the_float_op(dynamic_pair):  # type: ignore[no-untyped-def]
    _, b, _ = dynamic_pair
    sem = SemanticGraph.build(load_model(b))
    rescaled = [c for c in sem.chains if c.kind in ("ConvInteger", "MatMulInteger")]
    assert rescaled and all(c.head.op_type == "Mul" and c.family in ("Conv", "MatMul") for c in rescaled)
    assert all(len(c.inputs) == 1 for c in rescaled)  # the float tensor DynamicQuantizeLinear quantised


def test_dynamic_variant_pairs_as_many_layers_as_itself(dynamic_pair):  # type: ignore[no-untyped-def]
    a, b, data = dynamic_pair
    config = CompareConfig(inputs=(str(data),), layers=LayerConfig())
    own = compare_models(a, a, config).layers
    dyn = compare_models(a, b, config).layers
    assert len(dyn.layers) == len(own.layers) and not dyn.unpaired_a
    cos = {row.name: row.dataset["cosine"] for row in dyn.layers}
    assert min(cos.values()) > 0.9  # uint8 activations and weights on a random CNN
