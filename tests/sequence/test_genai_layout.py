"""Decode and sequence mode on decoders laid out as onnxruntime-genai's model builder writes them (issue 41):
the empty cache's head dimension is the symbol `kv_cache_dim`, read off the attention op (GroupQueryAttention's
packed QKV width, MatMulNBits' N, MultiHeadAttention's width / heads), genai_config.json beside the model,
or `--shape`; what nothing fixes is a one-line error naming the dim and the flag. The tokens come from a
plain onnxruntime loop with the head size given by hand (tests/sequence/gqa_decoder.py), not from mi.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from inspector_cli.core.synthetic import make_synthetic_spec, generate_sample
from inspector_cli.core.types import TensorInfo
from inspector_cli.errors import InputDataError
from inspector_cli.sequence.model import open_stepped
from tests.fixtures.subproc import assert_status, run_mi

from .gqa_decoder import HEAD, cache_after, genai_config, gqa_decoder, mha_decoder, plain_greedy

PROMPT = [3, 7, 11, 2]
STEPS = 6


@pytest.fixture(scope="module")
def builder_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("genai")
    paths = {}
    for kind, model in (("matmul", gqa_decoder(0)), ("nbits", gqa_decoder(0, "nbits")),
                        ("other", gqa_decoder(1)), ("opaque", gqa_decoder(0, "opaque")), ("mha", mha_decoder(0))):
        paths[kind] = folder / f"{kind}.onnx"
        onnx.save(model, paths[kind])
    (folder / "prompt.json").write_text(json.dumps(PROMPT))
    paths["prompt"] = folder / "prompt.json"
    paths["folder"] = folder
    return paths


def _decode(models, a, b, tmp_path, *extra, status=0):
    out = tmp_path / "r.json"
    ran = run_mi(["compare", models[a], models[b], "--decode", "--prompt", models["prompt"], "--steps", STEPS,
                  "--json", out, *extra], cwd=tmp_path)
    assert_status(ran, status)
    return (json.loads(out.read_text())["results"] if status in (0, 1) else None), ran


@pytest.mark.parametrize("a,b", [("matmul", "matmul"), ("matmul", "nbits"), ("matmul", "other")])
def test_decode_gqa_builder_layout_equals_plain_loop(builder_models, tmp_path, a, b):
    """Fails before issue 41: exit 3 at step 0, GroupQueryAttention's `past_key dimension 3 should match the
    packed KV head dimension, got 0 expected 16` (every free dim of the empty cache was 0)."""
    results, ran = _decode(builder_models, a, b, tmp_path)
    want_a, want_b = plain_greedy(builder_models[a], PROMPT, STEPS), plain_greedy(builder_models[b], PROMPT, STEPS)
    assert (results["decode"]["tokens_a"], results["decode"]["tokens_b"]) == (want_a, want_b)
    first = next((k for k, (x, y) in enumerate(zip(want_a, want_b)) if x != y), None)
    assert results["decode"]["first_difference"] == first
    if b == "other":
        assert first == 0  # another random init: the models part at once (the check above is not vacuous)
    # the resolved head dim is said, with where it came from (MatMulNBits' N for the int4 one)
    assert "state dim kv_cache_dim = 16 (GroupQueryAttention" in ran.stderr
    assert "packed QKV width 128 / (4 + 2 x 2) heads" in ran.stderr


def test_decode_multihead_attention_past_inputs(builder_models, tmp_path):
    """MultiHeadAttention's past_key/past_value (inputs 6, 7): head size = query width 64 / 4 heads."""
    results, ran = _decode(builder_models, "mha", "mha", tmp_path)
    assert results["decode"]["tokens_a"] == plain_greedy(builder_models["mha"], PROMPT, STEPS, heads=4)
    assert "state dim kv_cache_dim = 16 (MultiHeadAttention" in ran.stderr


def test_unresolvable_head_dim_is_one_line_naming_the_flag(builder_models, tmp_path):
    """Nothing in the graph tells the width (a Reshape to [batch, sequence, -1]): exit 3, one line naming the
    input, the dim and --shape; `--shape kv_cache_dim:16` (or the whole initial shape) then decodes the loop's
    tokens. Before issue 41 --shape was ignored in decode mode and the run died in onnxruntime."""
    _, ran = _decode(builder_models, "opaque", "opaque", tmp_path, status=3)
    errors = [line for line in ran.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in ran.stderr
    assert "state input 'past_key_values.0.key' [batch_size, 2, past_sequence_length, kv_cache_dim]: dim 3 " \
           "('kv_cache_dim')" in errors[0]
    assert "--shape kv_cache_dim:N, --shape past_key_values.0.key:1x2x0xN or --init-state FILE.npz" in errors[0]
    want = plain_greedy(builder_models["opaque"], PROMPT, STEPS)
    results, _ = _decode(builder_models, "opaque", "opaque", tmp_path, "--shape", "kv_cache_dim:16")
    assert results["decode"]["tokens_a"] == want
    whole = ["--shape", "past_key_values.0.key:1x2x0x16", "--shape", "past_key_values.0.value:1x2x0x16"]
    results, _ = _decode(builder_models, "opaque", "opaque", tmp_path, *whole)
    assert results["decode"]["tokens_a"] == want
    # a step input is no state: refused, naming what --shape sets here
    _, ran = _decode(builder_models, "opaque", "opaque", tmp_path, "--shape", "input_ids:1x4", status=2)
    assert "--shape input_ids: a step input" in ran.stderr


def test_genai_config_beside_the_model_gives_the_head_size(builder_models, tmp_path):
    """The same opaque graph as model.onnx beside onnxruntime-genai's genai_config.json: head_size 16 from it.
    A config that describes another file (its decoder's filename) is not read."""
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(builder_models["opaque"].read_bytes())
    genai_config(folder)
    model = open_stepped(folder / "model.onnx")
    assert model.dims.size("past_key_values.0.key", 3) == (16, "genai_config.json beside the model: head_size 16")
    state, _ = model.initial_state({"input_ids": np.zeros((1, 4), np.int64),
                                    "attention_mask": np.ones((1, 4), np.int64)})
    assert state["past_key_values.0.key"].shape == (1, 2, 0, HEAD)
    genai_config(folder, filename="decoder.onnx")
    with pytest.raises(InputDataError, match="dim 3 \\('kv_cache_dim'\\)"):
        open_stepped(folder / "model.onnx").initial_state({"input_ids": np.zeros((1, 4), np.int64)})


def test_init_state_with_decode_continues_the_cache(builder_models, tmp_path):
    """`--init-state` with `--decode` (refused before issue 41: "does not apply"): the cache of the first two
    prompt tokens, then the other two as the prompt, decodes what the whole prompt decodes; the mask and the
    past length count the given cache."""
    cache = cache_after(builder_models["matmul"], PROMPT[:2])
    init = tmp_path / "init.npz"
    np.savez(init, **cache)
    (tmp_path / "rest.json").write_text(json.dumps(PROMPT[2:]))
    out = tmp_path / "r.json"
    ran = run_mi(["compare", builder_models["matmul"], builder_models["nbits"], "--decode", "--prompt",
                  tmp_path / "rest.json", "--steps", STEPS, "--init-state", init, "--json", out], cwd=tmp_path)
    assert_status(ran, 0)
    results = json.loads(out.read_text())["results"]
    assert results["decode"]["tokens_a"] == plain_greedy(builder_models["matmul"], PROMPT, STEPS)
    assert results["decode"]["tokens_b"] == plain_greedy(builder_models["nbits"], PROMPT[2:], STEPS, cache=cache,
                                                         past=2)


def test_sequence_mode_on_the_builder_layout(builder_models, tmp_path):
    """`compare --sequence steps/` (input_ids and attention_mask per step, the caches wired): fails before
    issue 41 at step 0 as decode did. The first differing decision is the loop's first differing
    teacher-forced token."""
    tokens = plain_greedy(builder_models["matmul"], PROMPT, STEPS)
    steps = tmp_path / "steps"
    steps.mkdir()
    fed, past = list(PROMPT), 0
    for k in range(STEPS):
        np.savez(steps / f"step_{k:04d}.npz", input_ids=np.array([fed], np.int64),
                 attention_mask=np.ones((1, past + len(fed)), np.int64))
        past, fed = past + len(fed), [tokens[k]]
    forced = _forced(builder_models["nbits"], tokens)
    want = next((k for k in range(STEPS) if tokens[k] != forced[k]), None)
    out = tmp_path / "s.json"
    ran = run_mi(["compare", builder_models["matmul"], builder_models["nbits"], "--sequence", steps, "--json", out],
                 cwd=tmp_path)
    assert_status(ran, 0)
    assert json.loads(out.read_text())["results"]["first_decision_difference"] == want


def _forced(path, tokens):
    """B's greedy choice at each step while fed A's tokens (plain onnxruntime)."""
    out = []
    for k in range(len(tokens)):
        out.append(plain_greedy(path, PROMPT + tokens[:k], 1)[0])
    return out


def test_synthetic_attention_mask_is_ones(builder_models, tmp_path):
    """Synthetic samples of a model with an attention mask feed ones (a random mask made GroupQueryAttention
    fail with onnxruntime's raw `seqlens_k[0] = 8 is out of range [0, 5)`, exit 3, before issue 41); a
    --val-range for the mask still draws it."""
    shapes = ["--shape", "input_ids:1x5", "--shape", "attention_mask:1x5", "--shape",
              "past_key_values.0.key:1x2x0x16", "--shape", "past_key_values.0.value:1x2x0x16"]
    ran = run_mi(["probe", builder_models["matmul"], *shapes, "--json", tmp_path / "p.json"], cwd=tmp_path)
    assert_status(ran, 0)
    spec = make_synthetic_spec(1, 0, (), ("attention_mask:1x5", "input_ids:1x5"))
    specs = (TensorInfo("input_ids", 7, ("b", "s")), TensorInfo("attention_mask", 7, ("b", "t")))
    sample = generate_sample(type(spec)(spec.count, spec.seed, spec.val_ranges, spec.shapes, specs), 0)
    assert sample["attention_mask"].tolist() == [[1, 1, 1, 1, 1]]
    assert sample["input_ids"].max() > 1  # the other integer inputs are still drawn
    drawn = make_synthetic_spec(1, 0, ("attention_mask:0,1",), ("attention_mask:1x64",))
    drawn = type(drawn)(drawn.count, drawn.seed, drawn.val_ranges, drawn.shapes, specs[1:])
    assert set(generate_sample(drawn, 0)["attention_mask"].ravel().tolist()) == {0, 1}
    assert "input 'attention_mask': an attention mask, generated as ones" in \
        " ".join(type(spec)(spec.count, spec.seed, spec.val_ranges, spec.shapes, specs).defaulted())
