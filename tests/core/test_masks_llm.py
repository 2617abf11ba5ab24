"""Masks in real decoder exports: transformers' GPT-2 (MHA) and Llama (GQA, rotary), torch.onnx.export with
a KV cache. Healthy exports pass probe and nan-bisect; real NaN/Inf is still found at its origin."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np
import onnx
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.masks import find_masks

from ..fixtures.helpers import invoke, read_json, save_npz
from .mask_models import LLAMA_HIDDEN, LLAMA_HEADS, LLAMA_KV_HEADS, edit_weight, export_llama, prompt_sample

GPT_HEADS, GPT_HEAD_DIM = 2, 16


@pytest.fixture(scope="session")
def decoders(tmp_path_factory) -> Dict[str, Path]:
    """Both decoders exported once per session (~15 s), with a prompt sample each."""
    pytest.importorskip("transformers")
    from tests.sequence.models import export_gpt2

    folder = tmp_path_factory.mktemp("decoders")
    found = {"gpt2": export_gpt2(folder / "gpt2.onnx"), "llama": export_llama(folder / "llama.onnx")}
    save_npz(folder / "gpt2_prompt", [prompt_sample("gpt2", heads=GPT_HEADS, head_dim=GPT_HEAD_DIM)])
    save_npz(folder / "llama_prompt", [prompt_sample("llama", heads=LLAMA_KV_HEADS,
                                                     head_dim=LLAMA_HIDDEN // LLAMA_HEADS)])
    return found


def prompt(decoders, kind: str) -> Path:
    return decoders[kind].parent / f"{kind}_prompt"


def weight_of(path: Path, node: str, index: int = 1) -> str:
    return next(n.input[index] for n in onnx.load(str(path)).graph.node if n.name == node)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_each_layers_mask_is_recognised(decoders, kind):
    analysis = find_masks(load_model(decoders[kind]))
    assert len(analysis.masks) == 2  # one per layer
    for layer, mask in enumerate(analysis.masks):
        assert mask.fill == -np.inf and len(mask.constants) == 1
        assert [n.rsplit("/", 1)[1].split("_")[0] for n in mask.nodes] == ["Where", "Add", "Softmax"]
        assert f".{layer}/" in mask.ends[0]


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_probe_passes_a_healthy_decoder(decoders, kind, tmp_path):
    # fails on the code before core/masks.py: exit 1, MI821 on each Where/Add output ("holds 0 NaN and 15 Inf")
    out = tmp_path / "p.json"
    invoke(["probe", decoders[kind], "--inputs", prompt(decoders, kind), "--no-history", "--json", out])
    doc = read_json(out)["results"]
    masked = {t["name"]: t["masked"] for t in doc["tensors"] if t["masked"]}
    assert sum(t["inf"] for t in doc["tensors"]) == 0 and sum(t["nan"] for t in doc["tensors"]) == 0
    heads = GPT_HEADS if kind == "gpt2" else LLAMA_HEADS
    # a prompt of 6 tokens: 15 masked pairs above the diagonal, in the mask and in each head's scores
    assert sorted(masked.values()) == sorted([15, 15 * heads] * 2)
    assert [f["rule"] for f in doc["findings"] if f["severity"] != "warning"] == ["MI829", "MI829"]


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_nan_bisect_passes_a_healthy_decoder(decoders, kind, tmp_path):
    # fails on the old code: exit 1, MI901 "weight '.../Constant_15_output_0' holds 0 NaN and 1 Inf" per layer
    for args in ([], ["--deep"]):
        out = tmp_path / "nb.json"
        shown = invoke(["nan-bisect", decoders[kind], "--inputs", prompt(decoders, kind), "--json", out, "--overwrite",
                        *args]).stdout
        assert "2 attention mask(s) recognised, their -Inf intended" in " ".join(shown.split())
        doc = read_json(out)["results"]
        assert doc["static"] == [] and doc["nonfinite"] == doc["masked"] == 0
        assert [f["rule"] for f in doc["findings"]] == ["MI907", "MI907"]


@pytest.mark.parametrize("copies", [1, 2])  # one sample: every tensor exposed; two: the layered walk
def test_nan_in_the_lm_head_is_found_at_its_matmul(decoders, tmp_path, copies):
    # fails on the old code: static also listed both masks' -inf constants
    src = decoders["llama"]
    data = save_npz(tmp_path / "data", [prompt_sample("llama", heads=LLAMA_KV_HEADS,
                                                      head_dim=LLAMA_HIDDEN // LLAMA_HEADS)] * copies)
    head = weight_of(src, "/model/lm_head/MatMul")
    broken = edit_weight(src, tmp_path / "nan.onnx", head, lambda w: np.where(np.arange(w.size).reshape(w.shape) == 7,
                                                                              np.nan, w))
    out = tmp_path / "nb.json"
    invoke(["nan-bisect", broken, "--inputs", data, "--json", out], exit_code=1)
    doc = read_json(out)["results"]
    assert doc["plan"]["strategy"] == ("expose-all" if copies == 1 else "layered")
    assert [s["tensor"] for s in doc["static"]] == [head]
    assert [r["origin"]["node"] for r in doc["records"]] == ["/model/lm_head/MatMul"] * copies
    out = tmp_path / "p.json"
    invoke(["probe", broken, "--inputs", prompt(decoders, "llama"), "--no-history", "--json", out], exit_code=1)
    flagged = [f["tensor"] for f in read_json(out)["results"]["findings"] if f["rule"] == "MI821"]
    assert flagged == ["logits"]  # the NaN column of the head, and nothing of the masks


def test_an_overflow_in_attention_is_found_at_the_scores(decoders, tmp_path):
    # q and k of layer 0 scaled by 1e20: the scores q.k overflow fp32 to +-Inf, Softmax makes NaN
    src = decoders["gpt2"]
    qkv = "model.transformer.h.0.attn.c_attn.weight"

    def scale(w: np.ndarray) -> np.ndarray:
        w = w.copy()
        w[:, :64] *= np.float32(1e20)
        return w
    broken = edit_weight(src, tmp_path / "overflow.onnx", qkv, scale)
    out = tmp_path / "nb.json"
    # torch's SDPA export turns Softmax's NaN into 0 (Where after it): the outputs stay finite, --deep finds it
    invoke(["nan-bisect", broken, "--inputs", prompt(decoders, "gpt2"), "--json", out], exit_code=0)
    invoke(["nan-bisect", broken, "--inputs", prompt(decoders, "gpt2"), "--deep", "--json", out, "--overwrite"],
           exit_code=1)
    doc = read_json(out)["results"]
    origins = [o["node"] for o in doc["records"][0]["masked"]]
    assert origins == ["/model/transformer/h.0/attn/MatMul"]  # not the masks' Where nodes
    assert doc["records"][0]["masked"][0]["hints"][0]["rule"] == "overflow" and doc["static"] == []
    out = tmp_path / "p.json"
    invoke(["probe", broken, "--inputs", prompt(decoders, "gpt2"), "--no-history", "--json", out], exit_code=1)
    tensors = {t["name"]: t for t in read_json(out)["results"]["tensors"]}
    scores = tensors["/model/transformer/h.0/attn/Add_output_0"]
    assert scores["inf"] > 0  # the overflow's Inf at unmasked positions stays Inf beside the masked values
    assert tensors["/model/transformer/h.0/attn/Softmax_output_0"]["nan"] > 0


def test_nan_from_the_cache_input_is_found_at_the_input(decoders, tmp_path):
    sample = prompt_sample("gpt2", heads=GPT_HEADS, head_dim=GPT_HEAD_DIM)
    sample["past_key_values.1.value"] = np.full((1, GPT_HEADS, 2, GPT_HEAD_DIM), np.nan, np.float32)
    sample["past_key_values.1.key"] = np.zeros((1, GPT_HEADS, 2, GPT_HEAD_DIM), np.float32)
    for i in (0,):
        for k in ("key", "value"):
            sample[f"past_key_values.{i}.{k}"] = np.zeros((1, GPT_HEADS, 2, GPT_HEAD_DIM), np.float32)
    sample["attention_mask"] = np.ones((1, 8), np.int64)
    out = tmp_path / "nb.json"
    invoke(["nan-bisect", decoders["gpt2"], "--inputs", save_npz(tmp_path / "d", [sample]), "--json", out],
           exit_code=1)
    origin = read_json(out)["results"]["records"][0]["origin"]
    assert origin["op_type"] == "(input)" and origin["node"] == "past_key_values.1.value"


def test_sequence_modes_pass_a_healthy_decoder_with_a_prompt_step(decoders, tmp_path):
    # step 0 is a prompt of 4 tokens (its causal mask holds -inf), then one token a step with the KV cache;
    # fails on the old code: probe --sequence exit 1, "FAIL: 352 tensor(s) probed"
    folder = tmp_path / "steps"
    folder.mkdir()
    np.savez(folder / "step_0000.npz", input_ids=np.array([[3, 4, 5, 6]], np.int64),
             attention_mask=np.ones((1, 4), np.int64))
    for t in range(1, 5):
        np.savez(folder / f"step_{t:04d}.npz", input_ids=np.array([[6 + t]], np.int64),
                 attention_mask=np.ones((1, 4 + t), np.int64))
    out = tmp_path / "p.json"
    invoke(["probe", decoders["gpt2"], "--sequence", folder, "--no-history", "--json", out])
    doc = read_json(out)["results"]
    assert doc["samples"] == 5 and sum(t["inf"] for t in doc["tensors"]) == 0
    assert sum(t["masked"] for t in doc["tensors"]) == 2 * (6 + 6 * GPT_HEADS)  # step 0: 6 pairs of 4 tokens
    out = tmp_path / "nb.json"
    invoke(["nan-bisect", decoders["gpt2"], "--sequence", folder, "--json", out])


def test_a_nan_entering_at_a_later_step_is_found_beside_the_masks(decoders, tmp_path):
    # the embedding row of token 9 holds NaN: generation is finite until step 2 feeds token 9
    src = decoders["gpt2"]
    wte = "model.transformer.wte.weight"

    def poison(w: np.ndarray) -> np.ndarray:
        w = w.copy()
        w[9, 3] = np.nan
        return w
    broken = edit_weight(src, tmp_path / "late.onnx", wte, poison)
    gather = next(n.name for n in onnx.load(str(broken)).graph.node if n.op_type == "Gather" and wte in n.input)
    folder = tmp_path / "steps"
    folder.mkdir()
    np.savez(folder / "step_0000.npz", input_ids=np.array([[3, 4, 5]], np.int64), attention_mask=np.ones((1, 3), np.int64))
    for t, token in enumerate([6, 9, 10], start=1):
        np.savez(folder / f"step_{t:04d}.npz", input_ids=np.array([[token]], np.int64),
                 attention_mask=np.ones((1, 3 + t), np.int64))
    out = tmp_path / "nb.json"
    invoke(["nan-bisect", broken, "--sequence", folder, "--json", out], exit_code=1)
    doc = read_json(out)
    assert doc["inputs"]["sequence_step"] == 2
    result = doc["results"]
    assert [s["tensor"] for s in result["static"]] == [wte]  # the masks' -inf constants are not listed
    assert result["records"][0]["origin"]["node"] == gather
    assert [f["rule"] for f in result["findings"]].count("MI907") == 2


def test_an_fp16_overflow_in_eager_attention_is_told_apart_from_the_masks(tmp_path_factory, tmp_path):
    # eager fp16 GPT-2, q and k of layer 0 scaled by 3000: q.k overflows fp16 (65504) to +-Inf in the scores.
    # fails on the old code: every -Inf of the masked scores counted as Inf (no `masked`), the overflow's and
    # those at the positions the masks set alike
    pytest.importorskip("transformers")
    from .mask_models import export_gpt2_eager_fp16

    src = export_gpt2_eager_fp16(tmp_path_factory.mktemp("eager16") / "gpt2_fp16.onnx")
    data = save_npz(tmp_path / "left_padded", [{"input_ids": np.array([[5, 7, 9, 11, 13]], np.int64),
                                                "attention_mask": np.array([[0, 1, 1, 1, 1]], np.int64)}])
    out = tmp_path / "ok.json"
    invoke(["probe", src, "--inputs", data, "--no-history", "--json", out])
    healthy = {t["name"]: t for t in read_json(out)["results"]["tensors"]}
    # finite fills (finfo(fp16).min): nothing non-finite in a healthy run, and the mask is still named
    assert not [k for k, v in healthy.items() if v["masked"] or v["inf"] or v["nan"]]
    assert [f["rule"] for f in read_json(out)["results"]["findings"] if f["severity"] == "info"] == ["MI829"]
    qkv = "model.transformer.h.0.attn.c_attn.weight"

    def scale(w: np.ndarray) -> np.ndarray:
        w = w.astype(np.float32)
        w[:, :64] *= 3000
        return w.astype(np.float16)
    broken = edit_weight(src, tmp_path / "overflow16.onnx", qkv, scale)
    out = tmp_path / "p.json"
    invoke(["probe", broken, "--inputs", data, "--no-history", "--json", out], exit_code=1)
    doc = read_json(out)["results"]
    flagged = [f["tensor"] for f in doc["findings"] if f["rule"] == "MI821"]
    assert flagged[0] == "/model/transformer/h.0/attn/MatMul_output_0"  # the first, in topological order
    scores = {t["name"]: t for t in doc["tensors"]}["/model/transformer/h.0/attn/Add_output_0"]
    assert scores["masked"] > 0 and scores["inf"] > 0
    out = tmp_path / "nb.json"
    invoke(["nan-bisect", broken, "--inputs", data, "--deep", "--json", out], exit_code=1)
    record = read_json(out)["results"]["records"][0]
    assert [(o["node"], o["hints"][0]["rule"]) for o in record["masked"]] == [
        ("/model/transformer/h.0/attn/MatMul", "fp16-overflow")]
