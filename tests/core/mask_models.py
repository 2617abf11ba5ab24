"""Small attention graphs with masks, built with onnx.helper (one per rule of core/masks.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.fixtures.helpers import init, make_model, save, vi

F, B = TensorProto.FLOAT, TensorProto.BOOL
HEADS, L = 2, 4
LOWEST = float(np.finfo(np.float32).min)


def _constant(name: str, value: float) -> "helper.NodeProto":
    return helper.make_node("Constant", [], [name], name=f"const_{name}",
                            value=numpy_helper.from_array(np.array([value], np.float32), name))


def where_mask_model(path: Path, weight: Optional[np.ndarray] = None) -> Path:
    """torch's SDPA export: m = Where(causal, 0, -inf); y = Softmax(scores + m) [@ W].

    Inputs: scores [1, HEADS, L, L] (float), causal [1, 1, L, L] (bool)."""
    nodes = [_constant("zero", 0.0), _constant("neginf", -np.inf),
             helper.make_node("Where", ["causal", "zero", "neginf"], ["m"], name="mask_where"),
             helper.make_node("Add", ["scores", "m"], ["s"], name="mask_add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1)]
    inits = []
    out = "p"
    if weight is not None:
        nodes.append(helper.make_node("MatMul", ["p", "w"], ["y"], name="head"))
        inits.append(init("w", weight.astype(np.float32)))
        out = "y"
    model = make_model(nodes, [vi("scores", [1, HEADS, L, L]), vi("causal", [1, 1, L, L], B)],
                       [vi(out, [1, HEADS, L, L])], inits)
    return save(model, path)


def additive_masks_model(path: Path) -> Path:
    """BERT/eager style: two additive masks of finfo.min, causal (a weight) and padding (from a float
    0/1 attention_mask): s = scores + causal_bias + (1 - am) * lowest; their sum is -inf where both mask."""
    causal = np.triu(np.full((L, L), LOWEST, np.float32), k=1)[None, None]
    nodes = [_constant("one", 1.0), _constant("lowest", LOWEST),
             helper.make_node("Sub", ["one", "am"], ["inv"], name="invert"),
             helper.make_node("Mul", ["inv", "lowest"], ["pad"], name="pad_bias"),
             helper.make_node("Unsqueeze", ["pad", "axes"], ["pad4"], name="pad_unsqueeze"),
             helper.make_node("Add", ["scores", "causal"], ["s1"], name="causal_add"),
             helper.make_node("Add", ["s1", "pad4"], ["s"], name="pad_add"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1)]
    model = make_model(nodes, [vi("scores", [1, HEADS, L, L]), vi("am", [1, L])], [vi("p", [1, HEADS, L, L])],
                       [init("causal", causal), init("axes", np.array([1, 2], np.int64))])
    return save(model, path)


def causal(rows_open: bool = True) -> np.ndarray:
    """The causal condition [1, 1, L, L] (True where a query may attend); with `rows_open=False` the
    first row allows nothing (a fully masked row)."""
    allowed = np.tril(np.ones((L, L), bool))[None, None].copy()
    if not rows_open:
        allowed[..., 0, :] = False
    return allowed


def scores(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, HEADS, L, L)).astype(np.float32)


# ---- a tiny Llama (GQA, rotary) decoder with past key/values -------------------------------------------
LLAMA_LAYERS, LLAMA_HEADS, LLAMA_KV_HEADS, LLAMA_HIDDEN, LLAMA_VOCAB = 2, 4, 2, 32, 64


def export_llama(path: Path, seed: int = 0) -> Path:
    """transformers' Llama (random init, 2 layers, 4 query heads sharing 2 key/value heads, rotary)
    exported as optimum lays a decoder out: input_ids, attention_mask, position_ids and
    past_key_values.N.key/value in; logits and present.N.key/value out."""
    import warnings

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.cache_utils import DynamicCache

    config = LlamaConfig(vocab_size=LLAMA_VOCAB, hidden_size=LLAMA_HIDDEN, intermediate_size=64,
                         num_hidden_layers=LLAMA_LAYERS, num_attention_heads=LLAMA_HEADS,
                         num_key_value_heads=LLAMA_KV_HEADS, max_position_embeddings=128, bos_token_id=0,
                         eos_token_id=0)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):  # type: ignore[no-untyped-def]
            cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(LLAMA_LAYERS)],
                                 config=config)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            return (out.logits, *[t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)])

    head = LLAMA_HIDDEN // LLAMA_HEADS
    past = [torch.randn(1, LLAMA_KV_HEADS, 3, head) for _ in range(2 * LLAMA_LAYERS)]
    kv = [f"past_key_values.{i}.{k}" for i in range(LLAMA_LAYERS) for k in ("key", "value")]
    present = [f"present.{i}.{k}" for i in range(LLAMA_LAYERS) for k in ("key", "value")]
    axes = {"input_ids": {1: "sequence"}, "attention_mask": {1: "total_sequence"}, "position_ids": {1: "sequence"},
            "logits": {1: "sequence"}}
    axes.update({n: {2: "past_sequence"} for n in kv})
    axes.update({n: {2: "total_sequence"} for n in present})
    args = (torch.tensor([[5, 7]]), torch.ones(1, 5, dtype=torch.int64), torch.tensor([[3, 4]]), *past)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():  # tracer notes on transformers' Python branches
        warnings.simplefilter("ignore")
        torch.onnx.export(Step().eval(), args, str(path), input_names=["input_ids", "attention_mask", "position_ids"] + kv,
                          output_names=["logits"] + present, dynamic_axes=axes, opset_version=17, dynamo=False)
    return path


def prompt_sample(kind: str, tokens: int = 6, heads: int = 2, head_dim: int = 16) -> dict:
    """A prompt with an empty cache (the first step of generation), as `mi ... --inputs` reads it."""
    ids = np.arange(3, 3 + tokens, dtype=np.int64)[None]
    sample = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if kind == "llama":
        sample["position_ids"] = np.arange(tokens, dtype=np.int64)[None]
    sample.update({f"past_key_values.{i}.{k}": np.zeros((1, heads, 0, head_dim), np.float32)
                   for i in range(2) for k in ("key", "value")})
    return sample


def edit_weight(src: Path, dst: Path, name: str, edit) -> Path:  # type: ignore[no-untyped-def]
    """A copy of the model with initializer `name` replaced by `edit(value)`."""
    import onnx

    model = onnx.load(str(src))
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.name == name:
            value = numpy_helper.to_array(tensor).copy()
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(edit(value).astype(value.dtype), name))
            return save(model, dst)
    raise KeyError(name)


def export_gpt2_eager_fp16(path: Path, seed: int = 0) -> Path:
    """transformers' GPT-2 in half precision with eager attention (no cache): the causal mask is
    Where(causal, scores, finfo(fp16).min) and the padding mask (1 - attention_mask) * finfo.min is
    added to it, so where both mask the sum is -inf in fp16."""
    import warnings

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0,
                        eos_token_id=0, attn_implementation="eager")
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config).eval().half()

    class Plain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):  # type: ignore[no-untyped-def]
            return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Plain(), (torch.tensor([[5, 7, 9]]), torch.ones(1, 3, dtype=torch.int64)), str(path),
                          input_names=["input_ids", "attention_mask"], output_names=["logits"],
                          dynamic_axes={"input_ids": {1: "sequence"}, "attention_mask": {1: "sequence"}},
                          opset_version=17, dynamo=False)
    return path
