"""Small models with a known NaN/Inf origin, for the nan-bisect tests."""
from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper

from .helpers import init, make_model, save, vi

F = TensorProto.FLOAT
H = TensorProto.FLOAT16


def node(op: str, inputs: Sequence[str], output: str, name: str, **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), [output], name=name, **attrs)


def chain(length_before: int = 12, length_after: int = 15) -> onnx.ModelProto:
    """x -> Add x12 -> Log ('log') -> Mul x15 -> y: NaN born at 'log' for x < -12*0.01."""
    nodes, t = [], "x"
    for i in range(length_before):
        nodes.append(node("Add", [t, "c"], f"a{i}", f"add{i}"))
        t = f"a{i}"
    nodes.append(node("Log", [t], "lg", "log"))
    t = "lg"
    for i in range(length_after):
        nodes.append(node("Mul", [t, "k"], f"m{i}", f"mul{i}"))
        t = f"m{i}"
    nodes.append(node("Identity", [t], "y", "out"))
    return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])],
                      [init("c", np.array(0.01, np.float32)), init("k", np.array(1.01, np.float32))])


def branches() -> onnx.ModelProto:
    """Two branches off x; the NaN is born in branch A ('sqrt_a'), whose nodes all come first in
    topological order; branch B is clean and computed after it; they meet in 'merge'."""
    nodes = [node("Neg", ["x"], "a0", "neg_a"),
             node("Sqrt", ["a0"], "a1", "sqrt_a"),
             node("Mul", ["a1", "k"], "a2", "mul_a"),
             node("Mul", ["a2", "k"], "a3", "mul_a2")]
    t = "x"
    for i in range(10):
        nodes.append(node("Mul", [t, "k"], f"b{i}", f"mul_b{i}"))
        t = f"b{i}"
    nodes.append(node("Add", ["a3", t], "m", "merge"))
    nodes.append(node("Relu", ["m"], "y", "relu"))
    return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])], [init("k", np.array(1.5, np.float32))])


def inf_then_nan() -> onnx.ModelProto:
    """Exp overflows to Inf at 'exp'; Sub(e, e) turns it into NaN at 'sub' later."""
    nodes = [node("Mul", ["x", "k"], "s", "scale"), node("Exp", ["s"], "e", "exp"),
             node("Relu", ["e"], "r", "relu"), node("Sub", ["r", "r"], "d", "sub"), node("Abs", ["d"], "y", "abs")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], [init("k", np.array(10.0, np.float32))])


def two_origins() -> onnx.ModelProto:
    """NaN born at 'log' (first) and Inf at 'div' (later), both reaching outputs."""
    nodes = [node("Log", ["x"], "l", "log"), node("Relu", ["l"], "y1", "relu"),
             node("Abs", ["x"], "ax", "abs"), node("Div", ["ax", "zero"], "d", "div"),
             node("Add", ["d", "d"], "y2", "add")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y1", [1, 4]), vi("y2", [1, 4])],
                      [init("zero", np.zeros((1, 4), np.float32))])


def masked(with_real: bool = False) -> onnx.ModelProto:
    """Log of negatives at 'log' is masked by Where(IsNaN(...), 0, ...) before the output; with
    `with_real`, a later 'sqrt' makes NaN that does reach the output."""
    nodes = [node("Log", ["x"], "l", "log"), node("IsNaN", ["l"], "isn", "isnan"),
             node("Where", ["isn", "zero", "l"], "w", "where")]
    out = "w"
    if with_real:
        nodes += [node("Neg", ["x"], "nx", "neg"), node("Sqrt", ["nx"], "sq", "sqrt"),
                  node("Add", ["w", "sq"], "s", "add")]
        out = "s"
    nodes.append(node("Identity", [out], "y", "out"))
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], [init("zero", np.array(0.0, np.float32))])


def if_model() -> onnx.ModelProto:
    """If 'branch_if' on cond: the then_branch divides x by an outer zero ('div_then')."""
    then_body = helper.make_graph([node("Div", ["x1", "zero"], "t_out", "div_then")], "then_g", [],
                                  [vi("t_out", [1, 4])])
    else_body = helper.make_graph([node("Identity", ["x1"], "e_out", "id_else")], "else_g", [],
                                  [vi("e_out", [1, 4])])
    nodes = [node("Abs", ["x"], "x1", "abs"),
             helper.make_node("If", ["cond"], ["z"], name="branch_if", then_branch=then_body, else_branch=else_body),
             node("Relu", ["z"], "y", "relu")]
    return make_model(nodes, [vi("x", [1, 4]), vi("cond", [], TensorProto.BOOL)], [vi("y", [1, 4])],
                      [init("zero", np.zeros((1, 4), np.float32))], opset=17)


def loop_model(trips: int = 10) -> onnx.ModelProto:
    """Loop 'grow_loop' multiplies v by 1e10 each iteration ('mul_body'): Inf at iteration 3 for v=1."""
    body = helper.make_graph(
        [node("Identity", ["cond_in"], "cond_out", "cond_id"), node("Mul", ["v_in", "big"], "v_out", "mul_body")],
        "loop_body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("v_in", [1, 4])],
        [vi("cond_out", [], TensorProto.BOOL), vi("v_out", [1, 4])])
    nodes = [node("Abs", ["x"], "v0", "abs"),
             helper.make_node("Loop", ["trips", "", "v0"], ["v_final"], name="grow_loop", body=body),
             node("Relu", ["v_final"], "y", "relu")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                      [init("trips", np.array(trips, np.int64)), init("big", np.array(1e10, np.float32))])


def unary(op: str, elem: int = F, **attrs: object) -> onnx.ModelProto:
    """y = Relu(op(x)) with the op node named 'target'."""
    nodes = [node(op, ["x"], "t", "target", **attrs), node("Identity", ["t"], "y", "out")]
    return make_model(nodes, [vi("x", [1, 4], elem)], [vi("y", [1, 4], elem)])


def binary(op: str, second: np.ndarray, elem: int = F, *, second_is_weight: bool = True) -> onnx.ModelProto:
    """y = op(x, w) with the op node named 'target' (w a weight, or a second input 'w')."""
    nodes = [node(op, ["x", "w"], "t", "target"), node("Identity", ["t"], "y", "out")]
    inputs = [vi("x", [1, 4], elem)] + ([] if second_is_weight else [vi("w", list(second.shape), elem)])
    inits = [init("w", second)] if second_is_weight else []
    return make_model(nodes, inputs, [vi("y", [1, 4], elem)], inits)


def batchnorm_zero_var() -> onnx.ModelProto:
    c = 2
    nodes = [node("BatchNormalization", ["x", "s", "b", "mean", "var"], "t", "target", epsilon=0.0),
             node("Identity", ["t"], "y", "out")]
    inits = [init("s", np.ones(c, np.float32)), init("b", np.zeros(c, np.float32)),
             init("mean", np.zeros(c, np.float32)), init("var", np.array([1.0, 0.0], np.float32))]
    return make_model(nodes, [vi("x", [1, c, 2, 2])], [vi("y", [1, c, 2, 2])], inits)


def write(folder: Path, model: onnx.ModelProto, samples: List[dict], name: str = "model.onnx") -> Tuple[Path, Path]:
    """Save the model and one .npz per sample (x_0000.npz...); returns (model path, data folder)."""
    path = save(model, folder / name)
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    for i, feeds in enumerate(samples):
        np.savez(data / f"x_{i:04d}.npz", **feeds)
    return path, data


def row(*values: float, dtype: type = np.float32) -> np.ndarray:
    return np.array([values], dtype)


def log_batch(size: int = 4, depth: int = 0) -> onnx.ModelProto:
    """y = Relu(Log(x @ I @ I ... - 0.5)): NaN at 'log' exactly for samples with a value below 0.5.
    `depth` identity MatMuls of [size, size] make each sample cost real work (for kill tests)."""
    nodes, t, inits = [], "x", [init("half", np.array(0.5, np.float32))]
    for i in range(depth):
        inits.append(init(f"w{i}", np.eye(size, dtype=np.float32)))
        nodes.append(node("MatMul", [t, f"w{i}"], f"h{i}", f"matmul{i}"))
        t = f"h{i}"
    nodes += [node("Sub", [t, "half"], "s", "sub"), node("Log", ["s"], "l", "log"), node("Relu", ["l"], "y", "relu")]
    shape = [size, size] if depth else [1, size]
    return make_model(nodes, [vi("x", shape)], [vi("y", shape)], inits)


def log_samples(count: int, failing: Sequence[int], shape: Tuple[int, int] = (1, 4)) -> List[dict]:
    samples = []
    for i in range(count):
        x = np.full(shape, 0.75, np.float32)
        x[0, 0] = 0.25 if i in failing else 0.9
        samples.append({"x": x})
    return samples


def softmax_mask_then_log() -> onnx.ModelProto:
    """An attention-style -Inf mask ('mask_add') is squashed to 0 by 'softmax'; much later 'log'
    makes the NaN that reaches the output. Only 'log' is the origin of the output's NaN."""
    nodes = [node("Add", ["x", "mask"], "scores", "mask_add"),
             helper.make_node("Softmax", ["scores"], ["p"], name="softmax", axis=-1)]
    t = "p"
    for i in range(8):
        nodes.append(node("Add", [t, "c"], f"q{i}", f"shift{i}"))
        t = f"q{i}"
    nodes += [node("Sub", [t, "x"], "d", "diff"), node("Log", ["d"], "l", "log"), node("Mul", ["l", "c"], "y", "scale")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                      [init("mask", np.array([[0, 0, -np.inf, -np.inf]], np.float32)),
                       init("c", np.array(0.01, np.float32))])
