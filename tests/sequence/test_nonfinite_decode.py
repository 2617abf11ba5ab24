"""NaN/Inf in decode and sequence mode (issue 30): never agreement, the first non-finite step and
model named, --repro with --decode, and decisions read at a decoder's last position.

The tiny decoder (tiny_decoder.py) makes every value known by hand: greedy decoding from token t
gives t+1, t+2, ... (mod 6); an NaN in row 2 of its lm_head-like table enters when token 2 is fed.
"""
from __future__ import annotations

import json
import math

import numpy as np

from inspector_cli.sequence import DecodeConfig, SequenceConfig, decode_compare, run_sequence
from inspector_cli.sequence.fused import fuse
from tests.fixtures.helpers import save

from .tiny_decoder import embedding, own_greedy, step_folder, tiny_decoder


def _models(tmp_path, b_table=None, nan_from=None):
    a = save(tiny_decoder(embedding()), tmp_path / "a.onnx")
    b = save(tiny_decoder(embedding() if b_table is None else b_table, nan_from), tmp_path / "b.onnx")
    return a, b


def test_a_nan_weight_fails_the_decode_at_the_step_it_enters_naming_model_b(tmp_path):
    a, b = _models(tmp_path, embedding(nan_at=(2, 4)))
    tokens_a, _ = own_greedy(str(a), [1], 6)
    assert tokens_a == [2, 3, 4, 5, 0, 1]
    result = decode_compare(a, b, [1], DecodeConfig(steps=6, journal=tmp_path / "d.jsonl"))
    # step 0 (prompt [1]) is finite in both; step 1 feeds token 2, whose row holds the NaN
    assert not result.passed and result.summary().startswith("FAIL")
    nf = result.nonfinite
    assert (nf.step, nf.model, nf.tensors, nf.in_state, nf.inputs_finite) == (1, "B", ["logits", "present.0.key"],
                                                                             True, True)
    assert result.decode.tokens_a == tokens_a[:2] and result.steps == 2  # the decode stops there
    logits = result.outputs[0]
    assert logits.nonfinite == {"nonfinite_b": 1, "nonfinite_mismatch": 1, "steps": 1, "first_step": 1}
    assert math.isnan(logits.worst["cosine"]) and logits.worst["max_abs"] == math.inf
    assert logits.worst["sqnr"] == -math.inf and logits.worst_step["cosine"] == 1
    assert result.states[0].nonfinite["nonfinite_b"] == 1
    lines = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    step1 = lines[1]["outputs"]["logits"]
    assert (step1["nonfinite_b"], step1["nonfinite_mismatch"], step1["cosine"], step1["max_abs"]) == (1, 1, "nan", "inf")
    assert "nonfinite_b" not in lines[0]["outputs"]["logits"]


def test_a_nan_that_enters_at_a_later_step_is_named_and_the_replay_agrees_with_its_report(tmp_path):
    a, b = _models(tmp_path, nan_from=3)  # B adds NaN once its cache holds 3 positions: step 3
    tokens_a, _ = own_greedy(str(a), [1], 8)
    tokens_b, logits_b = own_greedy(str(b), [1], 8)
    assert tokens_a[:4] == [2, 3, 4, 5] and tokens_b[:4] == [2, 3, 4, 0] and np.isnan(logits_b[3]).all()
    result = decode_compare(a, b, [1], DecodeConfig(steps=8))
    nf = result.nonfinite
    assert (nf.step, nf.model, nf.tensors, nf.in_state) == (3, "B", ["logits"], False)
    assert result.decode.tokens_a == tokens_a[:4] and result.decode.tokens_b == tokens_b[:4]
    assert not result.passed
    # the token differs at step 3 (argmax of NaN is 0); B replayed with A's cache still emits NaN:
    # the replay says so (cosine NaN) and does not agree
    div = result.divergence
    assert div.step == 3 and div.born == "step" and div.replay_agrees is False
    assert math.isnan(div.replay["cosine"]) and div.replay["max_abs"] == math.inf


def test_allow_nonfinite_reports_without_failing_or_stopping(tmp_path):
    a, b = _models(tmp_path, nan_from=3)
    result = decode_compare(a, b, [1], DecodeConfig(steps=6, allow_nonfinite=True))
    assert result.passed and result.nonfinite.step == 3 and result.steps == 6
    assert result.outputs[0].nonfinite["steps"] == 3  # steps 3, 4, 5 all NaN


def test_the_same_inf_in_both_logits_is_equal_but_a_fed_back_cache_holding_it_is_a_finding(tmp_path):
    table = embedding()
    table[:, 3] = -np.inf  # a vocabulary mask: the same -inf in both models' logits, and in the cache
    a = save(tiny_decoder(table), tmp_path / "a.onnx")
    result = decode_compare(a, a, [1], DecodeConfig(steps=4))
    # the logits agree (cosine 1 over the finite positions, the -inf counted as the same) ...
    assert result.outputs[0].nonfinite == {"nonfinite_a": 1, "nonfinite_b": 1, "nonfinite_same": 1}
    assert result.outputs[0].worst["cosine"] == 1.0 and result.outputs[0].worst["max_abs"] == 0.0
    # ... but a cache carrying -inf into the next step is never a mask: named, model A first
    assert (result.nonfinite.step, result.nonfinite.model, result.nonfinite.tensors) == (0, "A", ["present.0.key"])


def test_cli_decode_repro_bundle_is_a_nan_bisect_sample(tmp_path):
    from tests.fixtures.helpers import invoke

    a, b = _models(tmp_path, nan_from=3)
    (tmp_path / "p.json").write_text("[1]")
    invoke(["compare", str(a), str(b), "--decode", "--prompt", str(tmp_path / "p.json"), "--steps", "6",
                  "--repro", str(tmp_path / "repro"), "--json", str(tmp_path / "r.json")], exit_code=1)
    doc = json.loads((tmp_path / "r.json").read_text())
    nf = doc["results"]["nonfinite"]
    assert (nf["step"], nf["model"]) == (3, "B") and nf["handoff"].endswith("step_000003_B/inputs.npz")
    with np.load(nf["handoff"]) as sample:
        assert sample["input_ids"].tolist() == [[4]] and sample["past_key_values.0.key"].shape == (1, 3, 6)
    invoke(["nan-bisect", str(b), "--inputs", nf["handoff"]], exit_code=1)  # nan-bisect takes it and finds NaN


def test_sequence_decisions_read_the_last_position_of_a_decoders_logits(tmp_path):
    # B's row 4 peaks at token 0, A's at 5: they differ at the prompt position of token 4 only,
    # never at a generated (last) position
    a, b = _models(tmp_path, embedding(changed_row=4))
    step_folder(tmp_path / "steps", [[4, 1], [2], [3]])
    result = run_sequence(a, b, tmp_path / "steps", SequenceConfig())
    assert result.first_decision_difference is None and result.decision_agreement == 1.0


def test_fused_decision_of_decoder_logits_uses_the_last_position():
    a = [[np.array([[[0, 9, 0], [0, 0, 9]]], np.float32)], [np.array([[[9, 0, 0], [0, 0, 9]]], np.float32)]]
    b = [[np.array([[[9, 0, 0], [0, 0, 9]]], np.float32)], [np.array([[[9, 0, 0], [0, 0, 9]]], np.float32)]]
    last = fuse(a, b, ["logits"], [0], [0], "logits", last_position=True)
    assert last.decisions() == [[[2], [2]], [[2], [2]]] and not last.differs().any()
    every = fuse(a, b, ["logits"], [0], [0], "logits")
    assert every.differs().tolist() == [True, False]  # every position: step 0's first row differs


def test_gpt2_with_a_nan_in_its_lm_head_fails_at_step_0_naming_model_b(gpt_models, tmp_path):
    """transformers' GPT-2 (causal mask inside, KV cache): one NaN in lm_head's weight makes one vocabulary
    column NaN at every position; fp32 against itself passes with nothing non-finite."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(gpt_models["fp32"]))
    weight = next(i for i in model.graph.initializer if i.name == "onnx::MatMul_672")  # lm_head [32, 64]
    values = numpy_helper.to_array(weight).copy()
    values[0, 7] = np.nan
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    nan = save(model, tmp_path / "gpt_nan.onnx")
    healthy = decode_compare(gpt_models["fp32"], gpt_models["fp32"], [1, 2, 3], DecodeConfig(steps=4))
    assert healthy.passed and healthy.nonfinite is None and healthy.outputs[0].nonfinite == {}
    result = decode_compare(gpt_models["fp32"], nan, [1, 2, 3], DecodeConfig(steps=4))
    nf = result.nonfinite
    assert (nf.step, nf.model, nf.tensors, nf.in_state) == (0, "B", ["logits"], False) and not result.passed
    assert result.outputs[0].nonfinite == {"nonfinite_b": 1, "nonfinite_mismatch": 1, "steps": 1, "first_step": 0}
    assert math.isnan(result.outputs[0].worst["cosine"]) and result.steps == 1
