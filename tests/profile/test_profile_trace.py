"""Parsing onnxruntime's profiler output: a real file produced here, the JSON fallback, event limits."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.profile import measure
from inspector_cli.profile.kernel_info import TypedShape
from inspector_cli.profile.trace import parse_trace, per_run_matrix

from ..fixtures.helpers import affine_model


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """4 measured runs after 2 warm-up runs of y = x * 2 + 1 (kernels 'mul' and 'add')."""
    graph = ModelGraph.from_proto(affine_model(2.0, 1.0, shape=(2, 8)))
    feeds = [{"x": np.ones((2, 8), np.float32)}]
    runs = measure.profile_runs(graph, RuntimeConfig(opt_level="disable"), feeds, 4, 2,
                                tmp_path_factory.mktemp("prof"), label="affine", memory_stats=False)
    return graph, runs


def test_real_profile_is_parsed_into_runs_and_kernels(profiled):
    _, runs = profiled
    assert runs.runs_per_session == [4] and len(runs.trace_files) == 1
    trace = parse_trace(runs.trace_files, warmup=2)
    assert len(trace.run_start) == 6 and trace.kept.tolist() == [False, False, True, True, True, True]
    assert sorted(trace.names) == ["add", "mul"]
    assert trace.info["mul"].op_type == "Mul" and trace.info["add"].provider == "CPUExecutionProvider"
    assert trace.info["add"].outputs == (TypedShape("float", (2, 8)),)
    assert trace.info["mul"].outputs[0].nbytes() == 64
    # Every kernel event falls inside a run: one 'mul' and one 'add' per run.
    assert (trace.run >= 0).all() and np.bincount(trace.run).tolist() == [2] * 6


def test_per_run_matrix_matches_an_independent_json_read(profiled):
    _, runs = profiled
    trace = parse_trace(runs.trace_files, warmup=2)
    time, calls = per_run_matrix(trace)
    events = json.loads(Path(runs.trace_files[0]).read_text())
    run_events = [e for e in events if e["name"] == "model_run"]
    kernel_events = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    expected = {}
    for number, run in enumerate(run_events[2:]):
        for e in kernel_events:
            if run["ts"] <= e["ts"] <= run["ts"] + run["dur"]:
                expected.setdefault(e["name"][:-12], [0] * 4)[number] += e["dur"]
    for k, name in enumerate(trace.names):
        assert time[k].tolist() == expected[name]
    assert calls.tolist() == [[1] * 4, [1] * 4]


def test_pretty_printed_trace_takes_the_json_path_and_agrees(profiled, tmp_path):
    _, runs = profiled
    fast = parse_trace(runs.trace_files, warmup=2)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps({"traceEvents": json.loads(Path(runs.trace_files[0]).read_text())}, indent=1))
    slow = parse_trace([pretty], warmup=2)
    assert slow.names == fast.names
    assert slow.dur.tolist() == fast.dur.tolist() and slow.run.tolist() == fast.run.tolist()
    assert slow.info["mul"].outputs == fast.info["mul"].outputs


def _line(cat: str, name: str, ts: int, dur: int, args: str = "{}") -> str:
    return (f'{{"cat" : "{cat}","pid" :1,"tid" :1,"dur" :{dur},"ts" :{ts},"ph" : "X","name" :"{name}",'
            f'"args" : {args}}}')


def test_a_run_cut_by_the_event_limit_is_dropped(tmp_path):
    lines = [_line("Session", "session_initialization", 0, 10)]
    ts = 100
    for run in range(3):
        count = 2 if run < 2 else 1  # the profiler filled up during the last run
        for k in range(count):
            lines.append(_line("Node", f"n{k}_kernel_time", ts + k * 10, 5, '{"op_name" : "Relu"}'))
        lines.append(_line("Session", "model_run", ts, 40))
        ts += 100
    path = tmp_path / "cut.json"
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    trace = parse_trace([path], warmup=0)
    assert trace.kept.tolist() == [True, True, False]
    assert "event limit" in trace.notes[0]
    time, _ = per_run_matrix(trace)
    assert time.tolist() == [[5.0, 5.0], [5.0, 5.0]]


def test_runs_are_split_over_sessions_under_a_small_event_budget(tmp_path):
    graph = ModelGraph.from_proto(affine_model(shape=(1, 4)))
    # 2 nodes -> 14 events per run; budget 0.9 * 60 = 54 -> 3 runs per session, minus 1 warm-up.
    assert measure.runs_per_session(2, 1, max_events=60) == 2
    runs = measure.profile_runs(graph, RuntimeConfig(), [{"x": np.ones((1, 4), np.float32)}], 5, 1, tmp_path,
                                label="affine", max_events=60, memory_stats=False)
    assert runs.runs_per_session == [2, 2, 1] and len(runs.trace_files) == 3
    assert "3 sessions" in runs.notes[0]
    trace = parse_trace(runs.trace_files, warmup=1)
    assert len(trace.run_start) == 8 and int(trace.kept.sum()) == 5
    assert (np.diff(trace.run_start) > 0).all()  # sessions laid end to end
    time, calls = per_run_matrix(trace)
    assert time.shape == (2, 5) and calls.tolist() == [[1] * 5, [1] * 5]
