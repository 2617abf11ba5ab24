"""Running a session into reused output arrays, alternating sets, and new shapes."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from inspector_cli.core.binding import BoundRunner
from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.runner import open_session

from ..fixtures.helpers import make_model


def relu_neg(dims):  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    return open_session(ModelGraph.from_proto(model), extra_outputs=["r"])


def test_two_sets_alternate_and_keep_the_previous_sample_intact():
    runner = BoundRunner(relu_neg([2, 3]), ["r", "y"], sets=2)
    seen = []
    for k in range(5):
        out = runner.run({"x": np.full((2, 3), float(k), np.float32)})
        seen.append(out["r"])
        if k:
            assert seen[-2][0, 0] == k - 1  # the sample before is still readable while this one ran
    assert seen[1] is not seen[2] and seen[1] is seen[3] and seen[2] is seen[4]
    assert [float(a[0, 0]) for a in seen[-2:]] == [3.0, 4.0]


def test_new_input_shapes_rebind_without_errors():
    runner = BoundRunner(relu_neg(["N", 3]), ["r", "y"], sets=2)
    for n in (1, 1, 3, 3, 2, 2):
        out = runner.run({"x": np.full((n, 3), float(n), np.float32)})
        assert out["r"].shape == (n, 3) and float(out["y"].sum()) == -3.0 * n * n
    assert runner.runs == 6


def test_onnxruntime_arrays_of_the_first_run_become_the_first_set():
    # onnxruntime's arrays do not own their memory (they wrap the output OrtValue); binding them
    # instead of allocating a copy of every output keeps peak memory at one set
    runner = BoundRunner(relu_neg([2, 3]), ["r", "y"], sets=1)
    first = runner.run({"x": np.full((2, 3), 2.0, np.float32)})
    assert not first["r"].flags.owndata
    second = runner.run({"x": np.full((2, 3), -5.0, np.float32)})
    assert second["r"] is first["r"] and second["y"] is first["y"]
    assert float(second["r"][0, 0]) == 0.0 and float(second["y"][1, 2]) == -0.0


def test_views_and_overlapping_arrays_are_not_bound():
    from inspector_cli.core.binding import _reusable

    shared = bytearray(32)  # two arrays over one buffer, neither a view of an ndarray
    outputs = {"view": np.zeros(10, np.float32)[:5], "own": np.ones(4, np.float32),
               "overlap_a": np.frombuffer(shared, np.float32, count=4),
               "overlap_b": np.frombuffer(shared, np.float32, count=4, offset=8),
               "apart": np.frombuffer(bytearray(16), np.float32), "readonly": np.frombuffer(b"\0" * 16, np.float32)}
    assert _reusable(outputs) == {"own", "apart"}


def test_an_overlap_behind_a_neighbour_is_found():
    """[0, 64) holds [8, 16) and [32, 40): the last overlaps the first though its neighbour does not."""
    from inspector_cli.core.binding import _reusable

    whole = bytearray(64)
    outputs = {"whole": np.frombuffer(whole, np.uint8), "early": np.frombuffer(whole, np.uint8, count=8, offset=8),
               "late": np.frombuffer(whole, np.uint8, count=8, offset=32), "own": np.zeros(4, np.float32)}
    assert _reusable(outputs) == {"own"}
