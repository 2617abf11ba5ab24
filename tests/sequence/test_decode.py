"""Decode mode on a tiny GPT-2 (transformers, random init) fp32 vs int8, KV cache fed back.

The fp32 reference decodes without any cache: the whole sequence is re-run every step, so it checks
the wiring of past_key_values/present, the derived attention mask and the greedy choice at once. The
int8 model (quantize_dynamic) is checked against a plain KV-cached loop: its activation scales come
from each run's whole input, so a one-token step and a whole-sequence rerun are different arithmetic
(measured on an AMD EPYC without VNNI, full-range weights: the two loops' tokens part at step 3).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from inspector_cli.errors import InputDataError
from inspector_cli.sequence import DecodeConfig, DecodeMode, decode_compare, read_prompt
from inspector_cli.sequence.decode import read_prompts

from .models import gpt2_greedy_with_cache, gpt2_greedy_without_cache

PROMPT = [1, 2, 3]
STEPS = 40


def test_free_running_tokens_agreement_and_first_difference(gpt_models, tmp_path):
    ref_a, _ = gpt2_greedy_without_cache(gpt_models["fp32"], PROMPT, STEPS)
    ref_b, _ = gpt2_greedy_with_cache(gpt_models["int8"], PROMPT, STEPS)
    first = next(i for i, (x, y) in enumerate(zip(ref_a, ref_b)) if x != y)
    assert first == 7  # this seed's int8 model parts from fp32 at the 8th generated token (exact int8 sums: every CPU)
    (tmp_path / "prompt.json").write_text(json.dumps(PROMPT))
    result = decode_compare(gpt_models["fp32"], gpt_models["int8"], tmp_path / "prompt.json",
                            DecodeConfig(steps=STEPS, journal=tmp_path / "decode.jsonl"))
    decode = result.decode
    assert result.mode == "decode" and decode.mode == "free-running" and decode.prompt_length == 3
    assert decode.tokens_a == ref_a and decode.tokens_b == ref_b
    assert decode.first_difference == first and result.first_decision_difference == first
    assert decode.agreement == pytest.approx(sum(x == y for x, y in zip(ref_a, ref_b)) / STEPS)
    assert result.divergence.step == first and result.divergence.trigger == "token"
    assert result.passed  # no gates: token differences are reported, not failed
    assert f"first differing token at step {first}" in result.summary()
    lines = [json.loads(line) for line in (tmp_path / "decode.jsonl").read_text().splitlines()]
    assert [ln["tokens"] for ln in lines] == [[x, y] for x, y in zip(ref_a, ref_b)]


def test_int4_decoder_tokens_and_first_difference(gpt_models, gpt_int4, tmp_path):
    """fp32 vs int4 weights (MatMulNBits): mi's KV-cached decode against the cache-free greedy loop."""
    import onnx

    assert [n.op_type for n in onnx.load(str(gpt_int4)).graph.node].count("MatMulNBits") == 1  # lm_head
    ref_a, _ = gpt2_greedy_without_cache(gpt_models["fp32"], PROMPT, STEPS)
    ref_b, _ = gpt2_greedy_without_cache(gpt_int4, PROMPT, STEPS)
    first = next(i for i, (x, y) in enumerate(zip(ref_a, ref_b)) if x != y)
    assert first == 5  # this seed's int4 lm_head parts from fp32 at the 6th generated token
    result = decode_compare(gpt_models["fp32"], gpt_int4, PROMPT,
                            DecodeConfig(steps=STEPS, journal=tmp_path / "int4.jsonl"))
    decode = result.decode
    assert decode.tokens_a == ref_a and decode.tokens_b == ref_b
    per_step = [json.loads(line)["tokens"] for line in (tmp_path / "int4.jsonl").read_text().splitlines()]
    assert [x == y for x, y in per_step] == [x == y for x, y in zip(ref_a, ref_b)]
    assert decode.first_difference == first == result.divergence.step
    assert decode.agreement == pytest.approx(sum(x == y for x, y in zip(ref_a, ref_b)) / STEPS)
    assert f"first differing token at step {first}" in result.summary()


def test_teacher_forced_keeps_logits_comparable(gpt_models):
    ref_a, logits_a = gpt2_greedy_without_cache(gpt_models["fp32"], PROMPT, STEPS)
    ref_b, logits_b = gpt2_greedy_with_cache(gpt_models["int8"], PROMPT, STEPS, teacher=ref_a)
    result = decode_compare(gpt_models["fp32"], gpt_models["int8"], PROMPT,
                            DecodeConfig(steps=STEPS, mode=DecodeMode.TEACHER_FORCED))
    assert result.decode.tokens_a == ref_a and result.decode.tokens_b == ref_b
    cos = []
    for a, b in zip(logits_a, logits_b):
        a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
        cos.append(float(a @ b / np.sqrt((a @ a) * (b @ b))))
    assert result.outputs[0].worst["cosine"] == pytest.approx(min(cos), abs=1e-6)
    assert 0.99 < result.outputs[0].worst["cosine"] < 1.0
    assert result.decode.agreement == pytest.approx(sum(x == y for x, y in zip(ref_a, ref_b)) / STEPS)
    # KV caches of both models: drift per step, one summary per present tensor
    assert [s.tensor for s in result.states] == [f"present.{i}.{k}" for i in range(2) for k in ("key", "value")]


def test_prompt_files(tmp_path):
    np.save(tmp_path / "p.npy", np.array([[4, 5, 6]], np.int64))
    assert read_prompt(tmp_path / "p.npy") == [4, 5, 6]
    (tmp_path / "p.json").write_text('{"input_ids": [[7, 8]]}')
    assert read_prompt(tmp_path / "p.json") == [7, 8]
    (tmp_path / "bad.json").write_text('["a"]')
    with pytest.raises(InputDataError, match="expected a JSON list of token ids"):
        read_prompt(tmp_path / "bad.json")
    np.save(tmp_path / "f.npy", np.zeros(3, np.float32))
    with pytest.raises(InputDataError, match="token ids must be integers"):
        read_prompt(tmp_path / "f.npy")


def test_several_prompts_are_several_decode_runs_in_one_result(gpt_models, tmp_path):
    """A .txt with one prompt per line: each prompt decoded from empty caches, one summary per prompt,
    steps numbered across the run (prompt i's step k is step i * steps + k)."""
    prompts = [[1, 2, 3], [9, 4], [30, 31, 32, 33]]
    steps = 30
    # fp32 against the cache-free loop, int8 against the cached one (its dynamic activation scales differ
    # between a one-token step and a whole-sequence rerun), and each prompt against itself decoded alone
    refs = [gpt2_greedy_without_cache(gpt_models["fp32"], p, steps)[0] for p in prompts]
    refs_b = [gpt2_greedy_with_cache(gpt_models["int8"], p, steps)[0] for p in prompts]
    alone = [decode_compare(gpt_models["fp32"], gpt_models["int8"], p, DecodeConfig(steps=steps)).decode for p in prompts]
    assert [d.tokens_b for d in alone] == refs_b
    firsts = [d.first_difference for d in alone]
    (tmp_path / "prompts.txt").write_text("1 2 3\n9, 4\n\n30 31 32 33\n")
    assert read_prompts(tmp_path / "prompts.txt") == prompts
    result = decode_compare(gpt_models["fp32"], gpt_models["int8"], tmp_path / "prompts.txt",
                            DecodeConfig(steps=steps, journal=tmp_path / "runs.jsonl"))
    assert [r.prompt for r in result.decode_runs] == [0, 1, 2] and result.steps == 3 * steps
    for run, ref_a, single, prompt in zip(result.decode_runs, refs, alone, prompts):
        assert run.tokens_a == ref_a == single.tokens_a and run.tokens_b == single.tokens_b
        assert run.first_difference == single.first_difference and run.prompt_length == len(prompt)
    differing = [i for i, f in enumerate(firsts) if f is not None]
    assert differing, "the int8 model should part from fp32 on some prompt within 30 tokens"
    k = differing[0]
    assert result.decode.prompt == k and result.divergence.step == k * steps + firsts[k]
    assert result.first_decision_difference == k * steps + firsts[k]
    assert f"tokens differ in {len(differing)} of 3 prompts" in result.summary()
    lines = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [ln["step"] for ln in lines] == list(range(3 * steps))
    assert [ln.get("prompt", 0) for ln in lines] == [i // steps for i in range(3 * steps)]
    np.save(tmp_path / "two.npy", np.array([[1, 2, 3], [5, 6, 7]], np.int64))
    assert read_prompts(tmp_path / "two.npy") == [[1, 2, 3], [5, 6, 7]]
    (tmp_path / "two.json").write_text('{"input_ids": [[1, 2], [3]]}')
    assert read_prompts(tmp_path / "two.json") == [[1, 2], [3]]
    with pytest.raises(InputDataError, match="holds 2 prompts, one was expected"):
        read_prompt(tmp_path / "two.json")
