"""`mi inspect A --diff B`: conversions named scope by scope (quantised, fp16, one op replaced)."""
from __future__ import annotations

import pytest

from inspector_cli.testing.transformer import build_transformer
from inspector_cli.workflows.inspect import InspectConfig, inspect_model

from ..fixtures.helpers import invoke, read_json, save
from .models import replace_op, to_fp16


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diff")
    model = build_transformer(layers=3)
    return folder, model, save(model, folder / "fp32.onnx")


def _changes(a, b, depth=3):
    result = inspect_model(str(a), InspectConfig(diff=str(b), depth=depth))
    return result, {c.scope: c for c in result.changes}


def test_one_softmax_replaced_names_its_scope_and_the_change(transformer):
    folder, model, fp32 = transformer
    other = save(replace_op(model, "layers.1.self_attn/Softmax", "HardSigmoid"), folder / "hs.onnx")
    result, changes = _changes(fp32, other)
    changed = [c.scope for c in result.changes if c.changed]
    # the scope and its ancestors differ, nothing else; differing scopes come first
    assert changed == ["layers", "layers/1", "layers/1/self_attn", ""]
    assert [c.scope for c in result.changes[:3]] == changed[:3]
    assert changes["layers/1/self_attn"].replaced == ["Softmax -> HardSigmoid"]
    # in the stack of identical layers the ops are aligned in place, not shifted by a layer
    assert changes["layers"].replaced == ["Softmax -> HardSigmoid"]
    assert changes["layers"].added == {} and changes["layers"].removed == {}
    assert changes["layers/1/self_attn"].matched_by == "name"
    assert not changes["layers/0/self_attn"].changed and changes["layers/0/self_attn"].summary == "same"


def test_fp16_changes_boundary_dtypes(transformer):
    folder, model, fp32 = transformer
    half = save(to_fp16(model), folder / "fp16.onnx")
    result, changes = _changes(fp32, half, depth=1)
    final = changes["final_norm"]
    assert final.changed and not final.replaced and not final.added
    assert final.boundary == ["in layers.2/Add_ffn_out: float32[batch, unk__17, 64] -> float16[batch, unk__17, 64]",
                              "out final_norm/LayerNormalization_out: float32[batch, unk__17, 64] -> "
                              "float16[batch, unk__17, 64]"]
    assert changes[""].boundary == ["out last_hidden_state: float32[batch, seq, 64] -> float16[batch, seq, 64]"]


def test_qdq_version_inserts_qdq_in_every_block(cnn_pair, tmp_path):
    fp32, int8, _ = cnn_pair
    out = tmp_path / "d.json"
    invoke(["inspect", fp32, "--diff", int8, "--json", out])
    doc = read_json(out)["results"]
    blocks = [c for c in doc["changes"] if c["scope"] and c["other"]]
    assert [c["scope"] for c in blocks] == [c["other"] for c in blocks]
    assert all(c["matched_by"] == "structure" and c["qdq_inserted"] > 0 for c in blocks)
    stem = next(c for c in blocks if c["scope"] == "block0")
    # quantize_static folds BatchNormalization into the Conv and the Relu into the quantised range
    assert stem["fused"] == ["Conv+BatchNormalization+Relu -> Conv"]
    assert stem["qdq_inserted"] == 4


def test_identical_models_have_no_change(transformer):
    _, _, fp32 = transformer
    result, _ = _changes(fp32, fp32)
    assert result.changes and not any(c.changed for c in result.changes)
