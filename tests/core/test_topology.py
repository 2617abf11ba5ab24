"""core/topology: the one-pass node order equals Kahn's algorithm by file position, on sorted and shuffled files."""
from __future__ import annotations

import heapq
import random

import numpy as np
import onnx
from onnx import helper

from inspector_cli.core.graph import ModelGraph, NodeInfo
from inspector_cli.core.topology import assign_node_names, topological_nodes

from ..fixtures.helpers import init, make_model, vi


def _random_dag(count: int, seed: int) -> list:
    """`count` Add nodes in topological file order, each reading two earlier tensors (or the input)."""
    rng = random.Random(seed)
    tensors = ["x"]
    nodes = []
    for i in range(count):
        a, b = rng.choice(tensors), rng.choice(tensors)
        nodes.append(helper.make_node("Add", [a, b], [f"t{i}"], name=f"n{i}"))
        tensors.append(f"t{i}")
    return nodes


def _kahn_reference(nodes: list) -> list:
    """Textbook Kahn's algorithm, ties broken by the smallest file position."""
    producer = {out: i for i, n in enumerate(nodes) for out in n.output}
    deps = [{producer[t] for t in n.input if t in producer} for n in nodes]
    remaining = [len(d) for d in deps]
    heap = [i for i, r in enumerate(remaining) if r == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        i = heapq.heappop(heap)
        order.append(nodes[i].name)
        for j, d in enumerate(deps):
            if i in d:
                remaining[j] -= 1
                if remaining[j] == 0:
                    heapq.heappush(heap, j)
    return order


def _model(nodes: list) -> onnx.ModelProto:
    last = nodes[-1].output[0]
    return make_model(nodes, [vi("x", [2])], [vi(last, [2])])


def test_sorted_file_keeps_its_order_and_shuffled_file_is_ordered_as_kahn():
    nodes = _random_dag(60, seed=3)
    graph = ModelGraph.from_proto(_model(nodes))
    assert [n.name for n in graph.nodes] == [f"n{i}" for i in range(60)]
    assert [n.order for n in graph.nodes] == list(range(60)) and graph.cycle_nodes == []
    shuffled = list(nodes)
    random.Random(5).shuffle(shuffled)
    model = _model(shuffled)
    model.graph.output[0].name = "t59"
    ordered = ModelGraph.from_proto(model)
    assert [n.name for n in ordered.nodes] == _kahn_reference(shuffled)
    assert [n.name for n in ordered.nodes] != [n.name for n in shuffled]  # the shuffle did need the heap


def test_nodes_filled_directly_equal_constructed_ones():
    nodes = [helper.make_node("Mul", ["x", "", "two"], ["a"], name=""),
             helper.make_node("Relu", ["a"], ["y", ""], name="r")]
    model = make_model(nodes, [vi("x", [2])], [vi("y", [2])], [init("two", np.array(2.0, np.float32))])
    renamed = assign_node_names(model.graph)
    built, cycle = topological_nodes(model.graph, renamed)
    expected = [NodeInfo("Mul_0", "Mul", "", ("x", "", "two"), ("a",), (), 0, ""),
                NodeInfo("r", "Relu", "", ("a",), ("y", ""), (), 1, "r")]
    assert built == expected and cycle == [] and renamed == {"Mul_0": ""}
    assert [n.all_inputs for n in built] == [("x", "two"), ("a",)] == [n.all_inputs for n in expected]
    assert {built[0]: 1}[expected[0]] == 1  # same hash
