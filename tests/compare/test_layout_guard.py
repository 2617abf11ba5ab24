"""Layouts of a dynamic export (issue 14, zoo: swin fp16 '/model/swin/embeddings/norm/Sub_output_0'
compared as [1, 3136, 32] vs [1, 32, 3136], cosine 0.0004 where the truth is 1.0).

Cause: onnxruntime's transpose optimiser moves the model's Transpose past the LayerNorm Sub and puts it
back as `Transpose_token_N`, whose output keeps the Sub's tensor name; optgraph.py takes that Transpose
for a relayout and reads the (correctly laid out) array transposed. settle_layout checked the permutation
against the declared shape, but a dynamic export declares every dim of that tensor symbolic, so it could
not tell. The reference's run-time shape now decides; and a pair whose captured shapes are still not one
layout is never compared element-wise: it is listed as not compared, with the reason.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from inspector_cli.compare.capture import Reader, settle_layout
from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.compare.layout import channels_last_perm, same_layout
from inspector_cli.testing.models import save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, make_model, save, vi
from .test_moved_transpose import (
    assert_fp16_read_in_the_reference_layout,
    layernorm_weights,
    transpose_then_layernorm,
)


def _dynamic_layernorm_after_transpose() -> onnx.ModelProto:
    """x[batch,8,4,6] -> Reshape to [batch, 8, -1] (shape computed from x, as exporters do: every dim of
    what follows is symbolic) -> Transpose [batch,24,8] -> LayerNorm over the last axis, unfused."""
    nodes = [helper.make_node("Shape", ["x"], ["sx"], name="shape", end=2),
             helper.make_node("Concat", ["sx", "m1"], ["s3"], name="cat", axis=0),
             helper.make_node("Reshape", ["x", "s3"], ["r"], name="flat"), *transpose_then_layernorm()]
    inits = [init("m1", np.array([-1], np.int64)), *layernorm_weights()]
    return make_model(nodes, [vi("x", ["batch", 8, 4, 6])], [vi("out", ["batch", 24, 8])], inits)


def test_moved_transpose_in_a_dynamic_export_is_read_in_the_reference_layout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert_fp16_read_in_the_reference_layout(_dynamic_layernorm_after_transpose(), tmp_path)


def test_settle_layout_asks_the_reference_when_the_declared_shape_cannot_tell() -> None:
    relaid = Reader("t", None, (0, 2, 1))
    raw = np.zeros((1, 3136, 32), np.float32)
    symbolic = ("unk__0", "unk__2", "unk__1")
    assert settle_layout(relaid, raw, symbolic) is relaid  # alone, the declared shape cannot tell
    assert settle_layout(relaid, raw, symbolic, (1, 3136, 32)).perm is None  # the array is already as A's
    assert settle_layout(relaid, np.zeros((1, 32, 3136)), symbolic, (1, 3136, 32)) is relaid  # a real relayout


def test_same_layout() -> None:
    assert same_layout((1, 3136, 1), (1, 1, 3136))  # size-1 dims only
    assert same_layout((1, 49, 768), (1, 7, 7, 768))  # a reshape that splits a dim: the same C order
    assert not same_layout((1, 3136, 32), (1, 32, 3136))  # a permutation
    assert not same_layout((8, 49, 32), (49, 256))  # heads split off the other side: needs a transpose
    assert not same_layout((2, 3), (7,))


def test_a_pair_in_two_layouts_is_not_compared_element_wise(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # B computes the same values in the transposed layout and names the tensor as A does (an exporter that
    # kept the name): [2, 3] vs [3, 2] must not be compared element-wise, and says why
    a_nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
               helper.make_node("Transpose", ["h"], ["out"], name="tr", perm=[1, 0])]
    b_nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="tr"),
               helper.make_node("Relu", ["xt"], ["h"], name="relu")]
    b_nodes[0].attribute.extend([helper.make_attribute("perm", [1, 0])])
    b_nodes.append(helper.make_node("Identity", ["h"], ["out"], name="id"))
    a = save(make_model(a_nodes, [vi("x", [2, 3])], [vi("out", [3, 2])]), tmp_path / "a.onnx")
    b = save(make_model(b_nodes, [vi("x", [2, 3])], [vi("out", [3, 2])]), tmp_path / "b.onnx")
    save_samples([{"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2}], tmp_path / "data")
    result = compare_models(a, b, CompareConfig(inputs=(str(tmp_path / "data"),), output_map=(("h", "h"),),
                                                layers=LayerConfig(patterns=("h",), granularity="tensor")))
    assert [row.name for row in result.layers.layers if row.name == "h"] == []
    (entry,) = [u for u in result.layers.unpaired_a if u.tensor == "h"]
    assert "[2, 3] (A) and [3, 2] (B) are not one layout" in entry.reason


def test_channels_last_is_read_off_the_shapes_only_when_unambiguous() -> None:
    # efficientnet int8, deployed: a Pad between NHWC QLinearConvs is relaid where optgraph.py cannot follow
    assert channels_last_perm((1, 48, 113, 113), (1, 113, 113, 48)) == (0, 2, 3, 1)
    assert channels_last_perm((1, 32, 3136), (1, 3136, 32)) == (0, 2, 1)
    assert channels_last_perm((1, 8, 8, 8), (1, 8, 8, 8)) is None  # C = H = W: the shapes cannot tell
    assert channels_last_perm((1, 48, 113, 113), (1, 113, 48, 113)) is None  # not channels-last
