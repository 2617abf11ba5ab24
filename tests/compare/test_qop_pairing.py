"""Pairing a QOperator model (issue 14): the quantizer names each integer output '<float name>_quantized'
('<name>quantized' for Split outputs) and runs Split/Transpose on the integers.

Causes of the defect: that name was not read as the float tensor's, so where shape inference stops at
com.microsoft ops (sizes unknown) a Transpose had only its node name (0.65, below the threshold); and
only a Split's first output kept the quantisation, so the others were no tensors to compare at all.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, make_model, save, vi


def _split_heads():  # type: ignore[no-untyped-def]
    """x[batch,8,16] -> MatMul [.,8,48] -> Split 3 -> each Transpose [.,16,8] -> MatMul(q^T, k) ... -> Add -> y."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
             helper.make_node("Split", ["h", "sizes"], ["q", "k", "v"], name="split", axis=2),
             helper.make_node("Transpose", ["q"], ["qt"], name="tq", perm=[0, 2, 1]),
             helper.make_node("Transpose", ["k"], ["kt"], name="tk", perm=[0, 2, 1]),
             helper.make_node("Transpose", ["v"], ["vt"], name="tv", perm=[0, 2, 1]),
             helper.make_node("Add", ["qt", "kt"], ["s"], name="add1"),
             helper.make_node("Add", ["s", "vt"], ["y"], name="add2")]
    inits = [init("w", rng.normal(size=(16, 48)).astype(np.float32) * 0.3),
             init("sizes", np.array([16, 16, 16], np.int64))]
    return make_model(nodes, [vi("x", ["batch", 8, 16])], [vi("y", ["batch", 16, 8])], inits, opset=17)


@pytest.mark.parametrize("fmt", ["QOperator"])
def test_qoperator_pairs_what_qdq_pairs(tmp_path, fmt) -> None:  # type: ignore[no-untyped-def]
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    a = save(_split_heads(), tmp_path / "a.onnx")
    rng = np.random.default_rng(1)
    samples = [{"x": rng.normal(size=(1, 8, 16)).astype(np.float32)} for _ in range(6)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(samples[2:])

        def get_next(self):  # type: ignore[no-untyped-def]
            return next(self.it, None)

    paths = {}
    for name, form in (("qdq", QuantFormat.QDQ), ("qop", QuantFormat.QOperator)):
        paths[name] = tmp_path / f"{name}.onnx"
        quantize_static(str(a), str(paths[name]), Reader(), quant_format=form, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Split", "Transpose", "Add"])
    save_samples(samples[:2], tmp_path / "data")
    config = CompareConfig(inputs=(str(tmp_path / "data"),), layers=LayerConfig(granularity="tensor"))
    qdq = {row.name for row in compare_models(a, paths["qdq"], config).layers.layers}
    qop = compare_models(a, paths["qop"], config).layers
    names = {row.name for row in qop.layers}
    assert {"qt", "kt", "vt", "q", "k", "v"} <= names, sorted(names)
    assert len(names) >= 0.9 * len(qdq)
    assert all(row.dataset["cosine"] > 0.99 for row in qop.layers)
