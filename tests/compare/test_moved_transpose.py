"""Deployed capture after onnxruntime moved a model's own Transpose (issue 14: the Swin fp16 false alarm).

Cause: onnxruntime's transpose optimiser pushes the model's Transpose past the LayerNorm's ReduceMean/Sub
and re-inserts it as `Transpose_token_N`, whose output carries the original tensor's name. optgraph.py
took every non-original Transpose for a relayout and "undid" it, so [1, 24, 8] was compared element-wise
with [1, 8, 24] (Swin: cosine 0.02-0.26 where the truth is 0.9999996). The declared shapes now decide.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np
import onnx
import pytest
from onnx import helper

from inspector_cli.compare.capture import Reader, settle_layout
from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, make_model, save, vi


def _layernorm_after_transpose() -> onnx.ModelProto:
    """x[1,8,4,6] -> Reshape [1,8,24] -> Transpose [1,24,8] -> LayerNorm over the last axis (Swin's patch
    embedding followed by its norm, unfused)."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="flat"), *transpose_then_layernorm()]
    inits = [init("s", np.array([1, 8, 24], np.int64)), *layernorm_weights()]
    return make_model(nodes, [vi("x", [1, 8, 4, 6])], [vi("out", [1, 24, 8])], inits)


def transpose_then_layernorm() -> List[onnx.NodeProto]:
    """r[.., 8, 24] -> Transpose t[.., 24, 8] -> LayerNorm over the last axis, unfused, into 'out'."""
    return [helper.make_node("Transpose", ["r"], ["t"], name="tr", perm=[0, 2, 1]),
            helper.make_node("ReduceMean", ["t"], ["mu"], name="mean", axes=[-1]),
            helper.make_node("Sub", ["t", "mu"], ["d"], name="sub"),
            helper.make_node("Mul", ["d", "d"], ["sq"], name="sq"),
            helper.make_node("ReduceMean", ["sq"], ["var"], name="var", axes=[-1]),
            helper.make_node("Add", ["var", "eps"], ["ve"], name="add"),
            helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
            helper.make_node("Div", ["d", "sd"], ["n"], name="div"),
            helper.make_node("Mul", ["n", "g"], ["out"], name="scale")]


def layernorm_weights() -> List[onnx.TensorProto]:
    return [init("eps", np.array(1e-5, np.float32)), init("g", np.linspace(0.5, 1.5, 8).astype(np.float32))]


def assert_fp16_read_in_the_reference_layout(model: onnx.ModelProto, tmp_path: Path) -> None:
    """`model` against its fp16 version, deployed capture: the LayerNorm's tensors are read as [1, 24, 8]
    on both sides and agree to fp16 rounding (the true cosine is 1 - O(1e-7))."""
    pytest.importorskip("onnxconverter_common")
    from onnxconverter_common import float16

    a = save(model, tmp_path / "a.onnx")
    b = save(float16.convert_float_to_float16(model, keep_io_types=True), tmp_path / "b.onnx")
    rng = np.random.default_rng(1)
    save_samples([{"x": rng.normal(size=(1, 8, 4, 6)).astype(np.float32)} for _ in range(2)], tmp_path / "data")
    result = compare_models(a, b, CompareConfig(inputs=(str(tmp_path / "data"),),
                                                layers=LayerConfig(granularity="tensor", capture="deployed")))
    rows = {row.name: row for row in result.layers.layers}
    assert rows["d"].capture_b == "deployed"
    assert rows["d"].shape_b == rows["d"].shape_a == [1, 24, 8]
    for name in ("d", "var", "out"):
        assert rows[name].dataset["cosine"] > 0.9999, name


def test_moved_transpose_is_not_undone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert_fp16_read_in_the_reference_layout(_layernorm_after_transpose(), tmp_path)


def test_settle_layout_keeps_a_permutation_only_when_the_shape_fits() -> None:
    relaid = Reader("t", None, (0, 2, 1))
    raw = np.zeros((1, 24, 8), np.float32)
    assert settle_layout(relaid, raw, ("batch", 24, 8)).perm is None  # already the declared layout
    assert settle_layout(relaid, np.zeros((1, 8, 24)), ("batch", 24, 8)) is relaid  # a real relayout
    assert settle_layout(relaid, raw, None) is relaid  # nothing declared: unchanged


def _transpose_pushed_past_concat() -> onnx.ModelProto:
    """Llama's rotary embedding in small: x[1,8,4] @ w[4,16] -> m[1,8,16] -> Transpose t[1,16,8] ->
    Concat(t, t) c[1,16,16] -> Cos. onnxruntime's transpose optimiser writes m -> Concat 'cat' (a tensor
    of its own, [1,8,32]) -> an inserted Transpose writing 'c': c is square, so its shape cannot tell
    whether the Transpose relays it."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Transpose", ["m"], ["t"], name="tr", perm=[0, 2, 1]),
             helper.make_node("Concat", ["t", "t"], ["c"], name="cat", axis=-1),
             helper.make_node("Cos", ["c"], ["out"], name="cos")]
    return make_model(nodes, [vi("x", [1, 8, 4])], [vi("out", [1, 16, 16])],
                      [init("w", np.linspace(0.1, 2.0, 64, dtype=np.float32).reshape(4, 16))])


def test_a_transpose_moved_past_a_concat_is_not_undone_on_a_square_tensor(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The Llama fp16 zoo export (issue 30): '/model/rotary_emb/Concat_1_output_0' read cosine 0.062
    against fp32 at the default level (the truth: 1.0000). Auto capture: A (fp32) instrumented, B
    deployed. Before the fix 'c' read cosine 0.0317 here."""
    pytest.importorskip("onnxconverter_common")
    from onnxconverter_common import float16

    model = _transpose_pushed_past_concat()
    a = save(model, tmp_path / "a.onnx")
    b = save(float16.convert_float_to_float16(model, keep_io_types=True), tmp_path / "b.onnx")
    rng = np.random.default_rng(3)
    save_samples([{"x": rng.normal(size=(1, 8, 4)).astype(np.float32)} for _ in range(2)], tmp_path / "data")
    result = compare_models(a, b, CompareConfig(inputs=(str(tmp_path / "data"),),
                                                layers=LayerConfig(granularity="tensor", capture="auto")))
    rows = {row.name: row for row in result.layers.layers}
    assert rows["c"].capture_b == "deployed" and rows["c"].shape_b == [1, 16, 16]
    assert rows["c"].dataset["cosine"] > 0.9999
    assert rows["out"].dataset["cosine"] > 0.9999
