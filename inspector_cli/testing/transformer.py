"""A BERT-style transformer encoder built with onnx.helper, for tests and benchmarks.

The graph is what PyTorch's exporter produces for `nn.TransformerEncoder` at opset 17: token and
position embeddings, then per layer a pre-LayerNorm multi-head attention (MatMul/Add projections,
Reshape/Transpose to heads, scaled MatMul, Softmax) and a GELU feed-forward block written out as
Div/Erf/Add/Mul/Mul, with residual Adds. Batch and sequence length are symbolic dimensions.
About 33 nodes per layer: 60 layers give a 2,000-node model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Encoder:
    def __init__(self, seed: int, hidden: int, heads: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.hidden, self.heads = hidden, heads
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []

    def weight(self, name: str, shape: Sequence[int], std: float = 0.02) -> str:
        self.inits.append(numpy_helper.from_array(self.rng.normal(0, std, size=shape).astype(np.float32), name))
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: Sequence[str], name: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, list(inputs), [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def linear(self, x: str, n_in: int, n_out: int, name: str) -> str:
        y = self.node("MatMul", [x, self.weight(f"{name}.weight", (n_in, n_out))], f"{name}/MatMul")
        return self.node("Add", [y, self.weight(f"{name}.bias", (n_out,), 0.01)], f"{name}/Add")

    def layer_norm(self, x: str, name: str) -> str:
        h = self.hidden
        scale = self.const(f"{name}.weight", np.ones(h, np.float32) + self.rng.normal(0, 0.01, h).astype(np.float32))
        bias = self.const(f"{name}.bias", self.rng.normal(0, 0.01, h).astype(np.float32))
        return self.node("LayerNormalization", [x, scale, bias], f"{name}/LayerNormalization", axis=-1, epsilon=1e-5)

    def attention(self, x: str, name: str) -> str:
        h, heads = self.hidden, self.heads
        head_dim = h // heads
        split = self.const(f"{name}.split_shape", np.array([0, -1, heads, head_dim], np.int64))
        merge = self.const(f"{name}.merge_shape", np.array([0, -1, h], np.int64))
        q, k, v = (self.linear(x, h, h, f"{name}.{p}_proj") for p in "qkv")
        q = self.node("Transpose", [self.node("Reshape", [q, split], f"{name}/q/Reshape")], f"{name}/q/Transpose",
                      perm=[0, 2, 1, 3])
        k = self.node("Transpose", [self.node("Reshape", [k, split], f"{name}/k/Reshape")], f"{name}/k/Transpose",
                      perm=[0, 2, 3, 1])
        v = self.node("Transpose", [self.node("Reshape", [v, split], f"{name}/v/Reshape")], f"{name}/v/Transpose",
                      perm=[0, 2, 1, 3])
        scores = self.node("MatMul", [q, k], f"{name}/scores/MatMul")
        scaled = self.node("Mul", [scores, self.const(f"{name}.scale", np.array(head_dim ** -0.5, np.float32))],
                           f"{name}/scores/Mul")
        probs = self.node("Softmax", [scaled], f"{name}/Softmax", axis=-1)
        context = self.node("MatMul", [probs, v], f"{name}/context/MatMul")
        context = self.node("Transpose", [context], f"{name}/context/Transpose", perm=[0, 2, 1, 3])
        context = self.node("Reshape", [context, merge], f"{name}/context/Reshape")
        return self.linear(context, h, h, f"{name}.out_proj")

    def gelu(self, x: str, name: str) -> str:
        root2 = self.const(f"{name}.sqrt2", np.array(np.sqrt(2.0), np.float32))
        one = self.const(f"{name}.one", np.array(1.0, np.float32))
        half = self.const(f"{name}.half", np.array(0.5, np.float32))
        erf = self.node("Erf", [self.node("Div", [x, root2], f"{name}/Div")], f"{name}/Erf")
        gate = self.node("Add", [erf, one], f"{name}/Add")
        return self.node("Mul", [self.node("Mul", [x, gate], f"{name}/Mul"), half], f"{name}/Mul_1")


def build_transformer(*, layers: int = 2, hidden: int = 64, heads: int = 4, ffn: int = 256, vocab: int = 1000,
                      max_positions: int = 512, seed: int = 0, opset: int = 17,
                      seq: Optional[int] = None) -> onnx.ModelProto:
    """Encoder: input 'input_ids' int64 [batch, seq] -> output 'last_hidden_state' float32 [batch, seq, hidden].

    `seq` fixes the sequence length (default: symbolic, like a dynamic-axes export).
    """
    e = _Encoder(seed, hidden, heads)
    seq_dim: object = seq if seq is not None else "seq"
    tokens = e.node("Gather", [e.weight("embeddings.word", (vocab, hidden)), "input_ids"], "embeddings/Gather")
    # Positions 0..seq-1 are sliced from the table with Shape -> Gather -> Slice, as exporters write it.
    shape = e.node("Shape", ["input_ids"], "embeddings/Shape")
    seq_len = e.node("Gather", [shape, e.const("embeddings.axis1", np.array([1], np.int64))], "embeddings/Gather_seq")
    positions = e.node("Slice", [e.weight("embeddings.position", (max_positions, hidden)),
                                 e.const("embeddings.zero", np.array([0], np.int64)), seq_len],
                       "embeddings/Slice")
    x = e.node("Add", [tokens, positions], "embeddings/Add")
    for i in range(layers):
        name = f"layers.{i}"
        x = e.node("Add", [x, e.attention(e.layer_norm(x, f"{name}.norm1"), f"{name}.self_attn")], f"{name}/Add_attn")
        y = e.linear(e.layer_norm(x, f"{name}.norm2"), hidden, ffn, f"{name}.linear1")
        y = e.linear(e.gelu(y, f"{name}.activation"), ffn, hidden, f"{name}.linear2")
        x = e.node("Add", [x, y], f"{name}/Add_ffn")
    out = e.node("LayerNormalization", [x, e.const("final_norm.weight", np.ones(hidden, np.float32)),
                                        e.const("final_norm.bias", np.zeros(hidden, np.float32))],
                 "final_norm/LayerNormalization", axis=-1, epsilon=1e-5)
    e.nodes.append(helper.make_node("Identity", [out], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        e.nodes, "transformer_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq_dim])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", seq_dim, hidden])],
        e.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="mi-testing")
    model.ir_version = 8
    return model


def token_samples(count: int, *, batch: int = 1, seq: int = 16, vocab: int = 1000, seed: int = 1
                  ) -> List[Dict[str, np.ndarray]]:
    """Seeded random token ids, one feed dict per sample."""
    rng = np.random.default_rng(seed)
    return [{"input_ids": rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)} for _ in range(count)]


def build_transformer_pair(folder: Path, *, layers: int = 2, seed: int = 0, calibration_count: int = 4,
                           **kwargs: object) -> Tuple[Path, Path]:
    """fp32 encoder and its int8 QDQ quantisation (MatMul weights and activations), saved in `folder`."""
    from .models import quantize_qdq

    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "encoder_fp32.onnx"
    onnx.save(build_transformer(layers=layers, seed=seed, **kwargs), fp32)  # type: ignore[arg-type]
    vocab = int(kwargs.get("vocab", 1000))  # type: ignore[call-overload]
    calib = token_samples(calibration_count, vocab=vocab, seed=seed + 100)
    int8 = quantize_qdq(fp32, folder / "encoder_int8.onnx", calib, op_types=("MatMul", "Add"))
    return fp32, int8
