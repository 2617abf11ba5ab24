"""A BERT-style encoder with every operation spelled out, for profile tests and benchmarks.

Every operation is spelled out the way exporters emit it (LayerNorm as ReduceMean/Sub/Pow/...,
GELU through Erf, attention with Reshape/Transpose), so onnxruntime's fusions (LayerNormalization,
Gelu, attention pieces) have real work to do and the optimised graph differs from the original.
About 50 nodes per layer: `layers=40` gives a ~2,000-node model.
"""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Encoder:
    def __init__(self, seed: int, hidden: int, heads: int, seq: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.hidden, self.heads, self.seq = hidden, heads, seq
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: List[str], name: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def linear(self, x: str, n_in: int, n_out: int, name: str) -> str:
        w = self.const(f"{name}.weight", self.rng.normal(0, n_in ** -0.5, (n_in, n_out)).astype(np.float32))
        b = self.const(f"{name}.bias", self.rng.normal(0, 0.02, (n_out,)).astype(np.float32))
        return self.node("Add", [self.node("MatMul", [x, w], f"{name}/MatMul"), b], f"{name}/Add")

    def layer_norm(self, x: str, name: str) -> str:
        """The nine-node LayerNorm that PyTorch exporters produce before opset 17."""
        h = self.hidden
        mean = self.node("ReduceMean", [x], f"{name}/ReduceMean", axes=[-1], keepdims=1)
        diff = self.node("Sub", [x, mean], f"{name}/Sub")
        sq = self.node("Pow", [diff, self.const(f"{name}.two", np.array(2.0, np.float32))], f"{name}/Pow")
        var = self.node("ReduceMean", [sq], f"{name}/ReduceMean_1", axes=[-1], keepdims=1)
        eps = self.node("Add", [var, self.const(f"{name}.eps", np.array(1e-5, np.float32))], f"{name}/Add")
        std = self.node("Sqrt", [eps], f"{name}/Sqrt")
        norm = self.node("Div", [diff, std], f"{name}/Div")
        scaled = self.node("Mul", [norm, self.const(f"{name}.weight", np.ones(h, np.float32))], f"{name}/Mul")
        return self.node("Add", [scaled, self.const(f"{name}.bias", np.zeros(h, np.float32))], f"{name}/Add_1")

    def gelu(self, x: str, name: str) -> str:
        div = self.node("Div", [x, self.const(f"{name}.sqrt2", np.array(2 ** 0.5, np.float32))], f"{name}/Div")
        erf = self.node("Erf", [div], f"{name}/Erf")
        plus = self.node("Add", [erf, self.const(f"{name}.one", np.array(1.0, np.float32))], f"{name}/Add")
        mul = self.node("Mul", [x, plus], f"{name}/Mul")
        return self.node("Mul", [mul, self.const(f"{name}.half", np.array(0.5, np.float32))], f"{name}/Mul_1")

    def heads_split(self, x: str, name: str, shape: str, perm: List[int]) -> str:
        return self.node("Transpose", [self.node("Reshape", [x, shape], f"{name}/Reshape")], f"{name}/Transpose",
                         perm=perm)

    def attention(self, x: str, name: str) -> str:
        h, n, s = self.hidden, self.heads, self.seq
        split = self.const(f"{name}.split_shape", np.array([1, s, n, h // n], np.int64))
        merge = self.const(f"{name}.merge_shape", np.array([1, s, h], np.int64))
        q = self.heads_split(self.linear(x, h, h, f"{name}/query"), f"{name}/q", split, [0, 2, 1, 3])
        k = self.heads_split(self.linear(x, h, h, f"{name}/key"), f"{name}/k", split, [0, 2, 3, 1])
        v = self.heads_split(self.linear(x, h, h, f"{name}/value"), f"{name}/v", split, [0, 2, 1, 3])
        scores = self.node("MatMul", [q, k], f"{name}/scores")
        scaled = self.node("Div", [scores, self.const(f"{name}.scale", np.array((h // n) ** 0.5, np.float32))],
                           f"{name}/scale")
        probs = self.node("Softmax", [scaled], f"{name}/Softmax", axis=-1)
        context = self.node("MatMul", [probs, v], f"{name}/context")
        merged = self.node("Reshape", [self.node("Transpose", [context], f"{name}/merge/Transpose", perm=[0, 2, 1, 3]),
                                       merge], f"{name}/merge/Reshape")
        return self.linear(merged, h, h, f"{name}/output")

    def layer(self, x: str, index: int) -> str:
        name = f"layer.{index}"
        attended = self.node("Add", [self.attention(x, f"{name}/attention"), x], f"{name}/attention/residual")
        x = self.layer_norm(attended, f"{name}/attention/LayerNorm")
        inner = self.gelu(self.linear(x, self.hidden, 4 * self.hidden, f"{name}/intermediate"), f"{name}/gelu")
        out = self.node("Add", [self.linear(inner, 4 * self.hidden, self.hidden, f"{name}/output"), x],
                        f"{name}/output/residual")
        return self.layer_norm(out, f"{name}/output/LayerNorm")


def build_encoder(layers: int = 2, *, hidden: int = 64, heads: int = 4, seq: int = 32, seed: int = 0,
                  opset: int = 17) -> onnx.ModelProto:
    """Encoder with input 'hidden_states' [1, seq, hidden] float32 and output 'last_hidden_state'."""
    enc = _Encoder(seed, hidden, heads, seq)
    x = "hidden_states"
    for index in range(layers):
        x = enc.layer(x, index)
    enc.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        enc.nodes, "encoder",
        [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, seq, hidden])], enc.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="mi-testing")
    model.ir_version = 8
    return model
