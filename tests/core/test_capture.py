"""Bounded-memory capture: planning under a budget, and chunked runs equal to all-at-once."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.core.capture import (BYTES_PER_EXPOSED, CaptureTarget, Strategy, estimate_sizes, parse_size,
                                        plan_capture, run_capture)
from inspector_cli.core.graph import load_model
from inspector_cli.core.inputs import discover_samples
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.core.select import select_tensors


def test_plan_all_at_once_and_chunked():
    sizes = [100, 200, None, 50]
    plan = plan_capture(sizes, budget_bytes=10_000)
    assert plan.strategy == Strategy.ALL_AT_ONCE and plan.chunks == ((0, 1, 2, 3),)
    assert plan.estimated_bytes == (100 + 200 + 200 + 50) * BYTES_PER_EXPOSED and plan.unknown_sizes == 1
    tight = plan_capture(sizes, budget_bytes=600)
    assert tight.strategy == Strategy.CHUNKED
    assert tight.chunks == ((0, 1), (2, 3))  # costs 200+400 | 400+100 against 600
    assert sorted(i for c in tight.chunks for i in c) == [0, 1, 2, 3]
    alone = plan_capture([5000, 10], budget_bytes=100)  # too big for the budget: a chunk of its own
    assert alone.chunks == ((0,), (1,))


def test_parse_size():
    assert parse_size("512M") == 512 << 20 and parse_size("2G") == 2 << 30 and parse_size("1.5GB") == 3 << 29
    assert parse_size(4096) == 4096
    with pytest.raises(ValueError):
        parse_size("lots")


def test_sizes_from_concrete_input_shapes(cnn_pair):
    fp32, _, _ = cnn_pair
    graph = load_model(fp32)
    names = select_tensors(graph, ["all"])
    sizes = estimate_sizes(graph, names)
    first = graph.node_by_name[graph.producer[names[0]].name]
    assert first.op_type == "Conv" and sizes[0] == 1 * 16 * 32 * 32 * 4
    assert None not in sizes


def test_chunked_capture_equals_all_at_once(cnn_pair):
    fp32, _, data = cnn_pair
    graph = load_model(fp32)
    names = select_tensors(graph, ["op:Relu", "op:Add"])
    samples = discover_samples([str(data)], graph.inputs)
    sizes = estimate_sizes(graph, names)

    def collect(plan):
        got = {}
        target = CaptureTarget(graph, RuntimeConfig(), [[names[i] for i in chunk] for chunk in plan.chunks])
        runs = run_capture([target], samples, lambda sid, ci, outs: got.update(
            {(sid, k): v.copy() for k, v in outs[0].items()}))
        return got, runs

    whole, runs_whole = collect(plan_capture(sizes, budget_bytes=1 << 30))
    plan = plan_capture(sizes, budget_bytes=max(s for s in sizes if s) * BYTES_PER_EXPOSED * 2)
    assert plan.strategy == Strategy.CHUNKED and plan.runs_per_sample >= 3
    chunked, runs_chunked = collect(plan)
    assert runs_whole == len(samples) and runs_chunked == len(samples) * plan.runs_per_sample
    assert whole.keys() == chunked.keys() and len(whole) == len(names) * len(samples)
    for key in whole:
        np.testing.assert_array_equal(whole[key], chunked[key])


def test_reused_buffers_give_the_same_values_without_new_arrays(cnn_pair):
    fp32, _, data = cnn_pair
    graph = load_model(fp32)
    names = select_tensors(graph, ["op:Relu"])
    samples = discover_samples([str(data)], graph.inputs)

    def collect(reuse):
        got, seen = {}, []
        target = CaptureTarget(graph, RuntimeConfig(), [names], reuse_buffers=reuse)
        run_capture([target], samples, lambda sid, ci, outs: (
            got.update({(sid, k): v.copy() for k, v in outs[0].items()}), seen.append(outs[0][names[0]])))
        return got, seen

    fresh, fresh_arrays = collect(False)
    reused, reused_arrays = collect(True)
    assert fresh.keys() == reused.keys() and len(fresh) == len(names) * len(samples)
    for key in fresh:
        np.testing.assert_array_equal(fresh[key], reused[key])
    # from the second sample on, onnxruntime writes into the same arrays (IOBinding): no allocation per sample
    assert all(a is reused_arrays[1] for a in reused_arrays[2:])
    assert len({id(a) for a in fresh_arrays}) == len(fresh_arrays)
