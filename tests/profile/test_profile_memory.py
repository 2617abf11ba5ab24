"""Peak activation memory by liveness, parameters, and onnxruntime's node memory CSV."""
from __future__ import annotations

import numpy as np
from onnx import helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.profile.memory import memory_profile, read_node_memory_stats
from inspector_cli.profile.shapes import runtime_tensors

from ..fixtures.helpers import init, make_model, vi


def chain_graph() -> ModelGraph:
    """x[1,256] -> a=Relu(x) -> b=Concat(a,a)[1,512] -> c=Relu(b) -> d=ReduceSum(c)[1,1] -> y=Add(d,x)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="n1"),
             helper.make_node("Concat", ["a", "a"], ["b"], name="n2", axis=1),
             helper.make_node("Relu", ["b"], ["c"], name="n3"),
             helper.make_node("ReduceSum", ["c"], ["d"], name="n4", keepdims=1),
             helper.make_node("Add", ["d", "x"], ["y"], name="n5")]
    return ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 256])], [vi("y", [1, 256])],
                                            [init("unused_w", np.zeros((10, 10), np.float32))], opset=13))


def test_peak_by_liveness_on_a_hand_checked_graph():
    graph = chain_graph()
    mem = memory_profile(graph, runtime_tensors(graph, {"x": (1, 256)}))
    # x (1024 B) lives until n5; after n3 allocates c, x + b + c = 1024 + 2048 + 2048 are live (a was freed by n2).
    assert mem.peak_bytes == 5120 and mem.peak_node == "n3"
    assert {t.name: t.bytes for t in mem.live_at_peak} == {"x": 1024, "b": 2048, "c": 2048}
    assert mem.live_at_peak[0].shape == "[1, 512]" and mem.live_at_peak[0].producer in ("n2", "n3")
    assert mem.activation_bytes == 1024 + 1024 + 2048 + 2048 + 4 + 1024
    assert mem.parameter_bytes == 400 and mem.parameter_count == 100 and mem.unknown_tensors == 0


def test_execution_order_changes_the_peak():
    # Two independent branches from x; running both big producers before their consumers raises the peak.
    nodes = [helper.make_node("Concat", ["x", "x"], ["p"], name="p", axis=1),
             helper.make_node("ReduceSum", ["p"], ["ps"], name="ps", keepdims=1),
             helper.make_node("Concat", ["x", "x"], ["q"], name="q", axis=1),
             helper.make_node("ReduceSum", ["q"], ["qs"], name="qs", keepdims=1),
             helper.make_node("Add", ["ps", "qs"], ["y"], name="y")]
    graph = ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 100])], [vi("y", [1, 1])], opset=13))
    tensors = runtime_tensors(graph, {"x": (1, 100)})
    default = memory_profile(graph, tensors)
    assert (default.peak_bytes, default.peak_node) == (400 + 800 + 4, "ps")              # x + p + ps
    eager = memory_profile(graph, tensors, order=[0, 2, 1, 3, 4])
    assert (eager.peak_bytes, eager.peak_node) == (400 + 800 + 800, "q")                 # x + p + q


def test_node_memory_csv_names_lose_the_hash_suffix(tmp_path):
    path = tmp_path / "mem.csv"
    path.write_text("#name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations\n"
                    "conv_1_15147057074853553784,128,64,4096,16\nrelu_2,4096,0,0,0\nbad,row\n")
    rows = read_node_memory_stats(path)
    assert [(r.node, r.dynamic_output_bytes, r.temp_bytes, r.initializer_bytes) for r in rows] == \
        [("conv_1", 4096, 16, 64), ("relu_2", 0, 0, 0)]
    assert read_node_memory_stats(tmp_path / "missing.csv") == []
