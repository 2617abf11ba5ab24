"""Critical path through the original DAG with injected latencies, end to end through the analysis."""
from __future__ import annotations

import json

import pytest
from onnx import helper

from inspector_cli.core.graph import ModelGraph
from inspector_cli.profile.analysis import AnalysisInput, analyse
from inspector_cli.profile.critical import graph_predecessors, longest_path

from ..fixtures.helpers import make_model, vi


def test_longest_path_on_a_weighted_dag():
    #      1 -> 3
    #  0 <        > 4 -> 5      weights: 0:1 1:5 2:2 3:1 4:1 5:2 ; 0 -> 5 is a shortcut edge
    #      2 ----/
    weights = [1, 5, 2, 1, 1, 2]
    preds = [[], [0], [0], [1], [3, 2], [4, 0]]
    length, path = longest_path(weights, preds)
    assert length == 1 + 5 + 1 + 1 + 2 and path == [0, 1, 3, 4, 5]
    assert longest_path([], []) == (0.0, [])
    assert longest_path([3.0], [[]]) == (3.0, [0])


def diamond() -> ModelGraph:
    """a -> (b, c) -> d: two parallel branches."""
    nodes = [helper.make_node("Relu", ["x"], ["a_out"], name="a"),
             helper.make_node("Sigmoid", ["a_out"], ["b_out"], name="b"),
             helper.make_node("Tanh", ["a_out"], ["c_out"], name="c"),
             helper.make_node("Add", ["b_out", "c_out"], ["y"], name="d")]
    return ModelGraph.from_proto(make_model(nodes, [vi("x", [1, 8])], [vi("y", [1, 8])]))


def test_graph_predecessors():
    graph = diamond()
    assert graph_predecessors(graph) == [[], [0], [0], [1, 2]]


def fake_trace(path, latencies, runs=3, warmup=1):
    """An onnxruntime-style profile: `latencies[node]` µs per kernel, nodes run in sequence."""
    lines, ts = [], 1000
    for _ in range(warmup + runs):
        start = ts
        for node, dur in latencies.items():
            args = ('{"op_name" : "Relu","provider" : "CPUExecutionProvider","output_type_shape" : '
                    '[{"float":[1,8]}],"activation_size" : "32","parameter_size" : "0","output_size" : "32"}')
            lines.append(f'{{"cat" : "Node","pid" :1,"tid" :1,"dur" :{dur},"ts" :{ts},"ph" : "X",'
                         f'"name" :"{node}_kernel_time","args" : {args}}}')
            ts += dur + 1
        lines.append(f'{{"cat" : "Session","pid" :1,"tid" :1,"dur" :{ts - start},"ts" :{start},"ph" : "X",'
                     f'"name" :"model_run","args" : {{}}}}')
        ts += 50
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    return path


@pytest.mark.parametrize("b,c,path", [(40, 10, ["a", "b", "d"]), (10, 40, ["a", "c", "d"])])
def test_analysis_critical_path_with_injected_latencies(tmp_path, b, c, path):
    graph = diamond()
    latencies = {"a": 5, "b": b, "c": c, "d": 7}
    trace = fake_trace(tmp_path / "p.json", latencies)
    result = analyse(AnalysisInput(graph=graph, trace_files=[trace], warmup=1, e2e_us=[60.0, 61.0, 62.0],
                                   input_shapes={"x": (1, 8)}))
    crit = result.profile.critical_path
    assert [s.node for s in crit.steps] == path
    assert crit.length_us == 5 + max(b, c) + 7
    assert crit.sum_us == sum(latencies.values()) == result.profile.kernel_sum_us
    assert crit.parallelism == pytest.approx(sum(latencies.values()) / (12 + max(b, c)))
    assert crit.e2e_p50_us == 61.0
    assert result.profile.warmup_dropped == 1 and result.profile.profiled.runs == 3
    assert json.loads(json.dumps(result.profile.timings))  # every post-processing step is timed
    assert set(result.profile.timings) >= {"parse", "map", "aggregate", "critical_path", "memory"}
