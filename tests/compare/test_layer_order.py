"""Layer rows and the first divergence follow the reference's topological order (issue 41): a second output
of a multi-output node (Split, LayerNormalization's Mean/InvStdDev, an attention node's `present`) sits where
its node runs. Before, extra outputs of a chain had no order and were listed before the first layer, so
`/model/layers.1/input_layernorm/output_3` was "first" on onnxruntime-genai's exports."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.diff.gates import Gate
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import init, make_model, save, save_npz, vi

MAX_ABS = Gate(flag="layer-max-abs", metric="max_abs", threshold=1e-4)


def _split_model(scale: float) -> onnx.ModelProto:
    """x*scale -> Tanh -> Split(s0, s1); s0 + 1 and Sigmoid(s1) multiplied. Split's second output s1 is an
    extra output of its chain, read only by a node placed after s0's Add."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="scale"),
             helper.make_node("Tanh", ["m"], ["t"], name="tanh"),
             helper.make_node("Split", ["t", "sizes"], ["s0", "s1"], name="split", axis=1),
             helper.make_node("Add", ["s0", "one"], ["a0"], name="add"),
             helper.make_node("Sigmoid", ["s1"], ["g1"], name="gate"),
             helper.make_node("Mul", ["a0", "g1"], ["y"], name="out")]
    inits = [init("k", np.array(scale, np.float32)), init("one", np.array(1.0, np.float32)),
             init("sizes", np.array([4, 4], np.int64))]
    return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 4])], inits, opset=18)


def _layernorm_model(scale: float) -> onnx.ModelProto:
    """LayerNormalization with its Mean and InvStdDev outputs; InvStdDev (output 2) is read last, by the
    final Mul, after a Relu branch on the normalised output that comes first in the file."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="scale"),
             helper.make_node("LayerNormalization", ["m", "gamma"], ["ln", "mean", "inv"], name="norm", axis=-1),
             helper.make_node("Relu", ["ln"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sig"),
             helper.make_node("Mul", ["s", "inv"], ["y"], name="out")]
    outputs = [vi("y", [2, 8])]
    inits = [init("k", np.array(scale, np.float32)), init("gamma", np.ones(8, np.float32))]
    model = make_model(nodes, [vi("x", [2, 8])], outputs, inits, opset=17)
    return model


def _compare(tmp_path, build, shape, granularity="tensor"):
    a = save(build(2.0), tmp_path / "a.onnx")
    b = save(build(2.2), tmp_path / "b.onnx")  # B differs from the first node on: every tensor diverges
    rng = np.random.default_rng(0)
    data = save_npz(tmp_path / "data", [{"x": rng.standard_normal(shape).astype(np.float32)}])
    config = CompareConfig(inputs=(str(data),), layers=LayerConfig(granularity=granularity, gates=(MAX_ABS,)))
    return compare_models(a, b, config).layers


def test_split_second_output_sits_where_split_runs(tmp_path):
    """Hand-computed order: tanh's t (node 1), split's s0 then s1 (node 2, outputs 0 and 1), add's a0 (3),
    gate's g1 (4), y (5); m is inside the Mul+Tanh chain (not a row at chain granularity). Every tensor
    diverges, so the first divergence is t. Before: s1 was listed first and named the first divergence."""
    section = _compare(tmp_path, _split_model, (1, 8), granularity="chain")
    assert [row.name for row in section.layers] == ["t", "s0", "s1", "a0", "g1", "y"]
    assert section.first_divergence == "t"


def test_layernorm_extra_outputs_follow_their_node(tmp_path):
    """Tensor granularity: m (node 0), ln, mean, inv (node 1, outputs 0-2), r (2), s (3), y (4). The first
    divergence is m, the first node B changes. Before: mean and inv came first and inv was "first"."""
    section = _compare(tmp_path, _layernorm_model, (2, 8))
    assert [row.name for row in section.layers] == ["m", "ln", "mean", "inv", "r", "s", "y"]
    assert section.first_divergence == "m"


def test_rows_follow_topological_order_not_chain_order(tmp_path):
    """A branch that runs between a chain's first and last node: x*k -> (Sigmoid(x) in between) -> Relu.
    File and topological order: m (0), g (1), r (2), y (3). Chains were listed chain by chain (m, r, then
    g); rows now follow the nodes: g before r."""
    def build(scale: float) -> onnx.ModelProto:
        nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="scale"),
                 helper.make_node("Sigmoid", ["x"], ["g"], name="gate"),
                 helper.make_node("Relu", ["m"], ["r"], name="relu"),
                 helper.make_node("Add", ["r", "g"], ["y"], name="out")]
        return make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])], [init("k", np.array(scale, np.float32))])
    section = _compare(tmp_path, build, (1, 8))
    assert [row.name for row in section.layers] == ["m", "g", "r", "y"]
    assert section.first_divergence == "m"
