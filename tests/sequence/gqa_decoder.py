"""Decoders laid out as onnxruntime-genai's model builder writes them (issue 41), small enough to build
with onnx.helper: `past_key_values.0.key/value` declared `[batch_size, 2, past_sequence_length,
kv_cache_dim]` (the head dimension is a symbol), a packed QKV projection into com.microsoft
GroupQueryAttention (4 query heads, 2 key-value heads, head size 16), whose seqlens_k and
total_sequence_length are computed in the graph from the attention mask, as the builder does.

Variants: the QKV projection as MatMulNBits (ONNX shape inference cannot see its width: the head
size is read off its N), behind a Reshape to a computed shape (nothing in the graph tells the width:
only genai_config.json or --shape can), and MultiHeadAttention with its past_key/past_value inputs.
`plain_greedy` is the reference: a plain onnxruntime loop with the head size given by hand.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD = 50, 64, 4, 2, 16
MS = "com.microsoft"


def _weights(seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"embed": rng.normal(0, 1, (VOCAB, HIDDEN)).astype(np.float32),
            "qkv_w": rng.normal(0, 0.3, (HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD)).astype(np.float32),
            "o_w": rng.normal(0, 0.3, (HEADS * HEAD, HIDDEN)).astype(np.float32),
            "head_w": rng.normal(0, 0.3, (HIDDEN, VOCAB)).astype(np.float32)}


def _nbits(weight: np.ndarray, name: str) -> List[onnx.TensorProto]:
    """MatMulNBits' 4-bit blocks (block 32, symmetric, zero point 8) of a [K, N] weight."""
    k, n = weight.shape
    blocks = k // 32
    w = weight.T.reshape(n, blocks, 32)
    scales = np.maximum(np.abs(w).max(axis=2), 1e-6) / 7.0
    q = (np.clip(np.round(w / scales[..., None]), -8, 7) + 8).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    return [numpy_helper.from_array(packed, f"{name}_q"),
            numpy_helper.from_array(scales.astype(np.float32).reshape(-1), f"{name}_scales")]


def gqa_decoder(seed: int = 0, qkv: str = "matmul") -> onnx.ModelProto:
    """`qkv`: "matmul" (a plain weight), "nbits" (MatMulNBits) or "opaque" (a Reshape to [batch, sequence,
    -1]: neither shape inference nor a weight tells the attention's query width)."""
    w = _weights(seed)
    inits = [numpy_helper.from_array(w["embed"], "embed"), numpy_helper.from_array(w["o_w"], "o_w"),
             numpy_helper.from_array(w["head_w"], "head_w"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array(1, np.int64), "axis1")]
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["hidden"], axis=0)]
    if qkv == "nbits":
        inits += _nbits(w["qkv_w"], "qkv_w")
        nodes.append(helper.make_node("MatMulNBits", ["hidden", "qkv_w_q", "qkv_w_scales"], ["qkv"], domain=MS,
                                      K=HIDDEN, N=w["qkv_w"].shape[1], bits=4, block_size=32))
    else:
        inits.append(numpy_helper.from_array(w["qkv_w"], "qkv_w"))
        nodes.append(helper.make_node("MatMul", ["hidden", "qkv_w"], ["qkv" if qkv == "matmul" else "qkv_raw"]))
        if qkv == "opaque":  # Reshape to [batch, sequence, -1]: shape inference cannot size -1 of symbolic dims
            inits += [numpy_helper.from_array(np.array([0], np.int64), "zero"),
                      numpy_helper.from_array(np.array([2], np.int64), "two"),
                      numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
            nodes += [helper.make_node("Shape", ["qkv_raw"], ["qkv_shape"]),
                      helper.make_node("Slice", ["qkv_shape", "zero", "two"], ["qkv_lead"]),
                      helper.make_node("Concat", ["qkv_lead", "minus_one"], ["qkv_target"], axis=0),
                      helper.make_node("Reshape", ["qkv_raw", "qkv_target"], ["qkv"])]
    # the builder's mask reformat: seqlens_k = sum(mask) - 1, total_sequence_length = mask.shape[1]
    nodes += [helper.make_node("ReduceSum", ["attention_mask", "one"], ["mask_sum"], keepdims=0),
              helper.make_node("Sub", ["mask_sum", "one"], ["seqlens_64"]),
              helper.make_node("Cast", ["seqlens_64"], ["seqlens_k"], to=TensorProto.INT32),
              helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
              helper.make_node("Gather", ["mask_shape", "axis1"], ["total_64"], axis=0),
              helper.make_node("Cast", ["total_64"], ["total_len"], to=TensorProto.INT32),
              helper.make_node("GroupQueryAttention", ["qkv", "", "", "past_key_values.0.key",
                                                       "past_key_values.0.value", "seqlens_k", "total_len"],
                               ["attn", "present.0.key", "present.0.value"], domain=MS, num_heads=HEADS,
                               kv_num_heads=KV_HEADS),
              *_head()]
    return _decoder(nodes, inits, "gqa_decoder", KV_HEADS, mask=True)


def mha_decoder(seed: int = 0) -> onnx.ModelProto:
    """com.microsoft MultiHeadAttention (4 heads of 16) with past_key/past_value [B, 4, past, kv_cache_dim]
    (inputs 6 and 7) and present_key/present_value out; no mask (one prompt, then one token a step)."""
    w = _weights(seed)
    rng = np.random.default_rng(seed + 1)
    proj = {n: rng.normal(0, 0.3, (HIDDEN, HEADS * HEAD)).astype(np.float32) for n in ("q_w", "k_w", "v_w")}
    inits = [numpy_helper.from_array(w["embed"], "embed"), numpy_helper.from_array(w["o_w"], "o_w"),
             numpy_helper.from_array(w["head_w"], "head_w")] + [numpy_helper.from_array(v, n) for n, v in proj.items()]
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["hidden"], axis=0)]
    nodes += [helper.make_node("MatMul", ["hidden", n], [n[0]]) for n in proj]
    nodes += [helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "", "past_key_values.0.key",
                                                      "past_key_values.0.value"],
                               ["attn", "present.0.key", "present.0.value"], domain=MS, num_heads=HEADS),
              *_head()]
    return _decoder(nodes, inits, "mha_decoder", HEADS, mask=False)


def _head() -> List[onnx.NodeProto]:
    """o_proj, the residual and the lm head after the attention's output `attn`."""
    return [helper.make_node("MatMul", ["attn", "o_w"], ["o"]), helper.make_node("Add", ["o", "hidden"], ["res"]),
            helper.make_node("MatMul", ["res", "head_w"], ["logits"])]


def _decoder(nodes: List[onnx.NodeProto], inits: List[onnx.TensorProto], name: str, heads: int,
             mask: bool) -> onnx.ModelProto:
    """The builder's signature: input_ids (+ attention_mask), past_key_values.0.key/value [batch_size, heads,
    past_sequence_length, kv_cache_dim] in; logits and present.0.key/value [.., total_sequence_length, ..] out."""
    past = ["batch_size", heads, "past_sequence_length", "kv_cache_dim"]
    present = ["batch_size", heads, "total_sequence_length", "kv_cache_dim"]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    if mask:
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                                    ["batch_size", "total_sequence_length"]))
    inputs += [helper.make_tensor_value_info(f"past_key_values.0.{kv}", TensorProto.FLOAT, past) for kv in ("key", "value")]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", VOCAB])]
    outputs += [helper.make_tensor_value_info(f"present.0.{kv}", TensorProto.FLOAT, present) for kv in ("key", "value")]
    model = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model


def genai_config(folder: Path, filename: str = "model.onnx", head: int = HEAD, kv_heads: int = KV_HEADS) -> Path:
    """onnxruntime-genai's genai_config.json (the parts mi reads) beside a model."""
    import json
    path = folder / "genai_config.json"
    path.write_text(json.dumps({"model": {"type": "llama", "decoder": {
        "filename": filename, "head_size": head, "num_key_value_heads": kv_heads, "num_attention_heads": HEADS,
        "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                   "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
        "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value"}}}}))
    return path


def plain_greedy(path: Path, prompt: Sequence[int], steps: int, heads: int = KV_HEADS,
                 cache: Optional[Dict[str, np.ndarray]] = None, past: int = 0) -> List[int]:
    """Greedy tokens in plain onnxruntime: the cache [1, heads, past, 16] (empty unless given), the mask
    ones over past + new, present fed back to past."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    state = dict(cache) if cache is not None else {
        f"past_key_values.0.{kv}": np.zeros((1, heads, 0, HEAD), np.float32) for kv in ("key", "value")}
    fed, tokens = list(prompt), []
    for _ in range(steps):
        feed = {"input_ids": np.array([fed], np.int64), **state}
        if "attention_mask" in names:
            feed["attention_mask"] = np.ones((1, past + len(fed)), np.int64)
        result = dict(zip(outputs, session.run(None, feed)))
        past += len(fed)
        state = {k: result[k.replace("past_key_values", "present")] for k in state}
        tokens.append(int(np.argmax(result["logits"][0, -1])))
        fed = [tokens[-1]]
    return tokens


def cache_after(path: Path, tokens: Sequence[int], heads: int = KV_HEADS) -> Dict[str, np.ndarray]:
    """The present of one plain run over `tokens` from an empty cache (an --init-state)."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    feed = {"input_ids": np.array([list(tokens)], np.int64),
            **{f"past_key_values.0.{kv}": np.zeros((1, heads, 0, HEAD), np.float32) for kv in ("key", "value")}}
    if "attention_mask" in names:
        feed["attention_mask"] = np.ones((1, len(tokens)), np.int64)
    outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    return {f"past_key_values.0.{kv}": outputs[f"present.0.{kv}"] for kv in ("key", "value")}
