"""The background build's parts driven directly (`prebuild.py`): stand-in values by tensor type,
and a `Prebuilder` handing its session over once, to the right key only, rebuilding when the
background build failed (issue 15, mutation testing of prebuild.py)."""
from __future__ import annotations

import threading
from typing import List

import numpy as np
import pytest
from onnx import TensorProto, helper

from inspector_cli.core.graph import load_model
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.nanbisect.locate import Locator
from inspector_cli.nanbisect.model import PreparedModel
from inspector_cli.nanbisect.prebuild import Planned, Prebuilder, stand_in_values, timed

from ..fixtures.helpers import make_model, save, vi


def test_stand_ins_are_nan_for_floats_and_zero_for_integers(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Shape", ["r"], ["s"], name="shape"),
             helper.make_node("Cast", ["r"], ["h"], name="half", to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["r"], ["d"], name="double", to=TensorProto.DOUBLE),
             helper.make_node("Cast", ["r"], ["b"], name="bool", to=TensorProto.BOOL)]
    model = make_model(nodes, [vi("x", [1, 4])], [vi("s", [2], TensorProto.INT64), vi("h", [1, 4], TensorProto.FLOAT16),
                                                  vi("d", [1, 4], TensorProto.DOUBLE), vi("b", [1, 4], TensorProto.BOOL)])
    prepared = PreparedModel(load_model(save(model, tmp_path / "m.onnx")), RuntimeConfig())
    locator = Locator(prepared, 1 << 20, 4, expose_all_root=False)
    values = stand_in_values(locator, ("r", "s", "h", "d", "b", "nowhere"))
    assert list(values) == ["r", "s", "h", "d", "b", "nowhere"]
    floats = {n for n, v in values.items() if v.dtype == np.float32 and v.shape == (1,) and np.isnan(v[0])}
    ints = {n for n, v in values.items() if v.dtype == np.int64 and v.tolist() == [0]}
    assert floats == {"r", "h", "d", "nowhere"} and ints == {"s", "b"}  # an unknown type counts as float
    locator.close()


class FakeSession:
    def __init__(self, name: str) -> None:
        self.name = name


def test_the_prebuilt_session_goes_to_its_key_once():
    builder = Prebuilder()
    assert builder.take("k", lambda: FakeSession("plain")).name == "plain" and not builder.used  # nothing started
    built: List[str] = []
    builder.start("k", lambda: built.append("bg") or FakeSession("background"))
    assert builder.take("other", lambda: FakeSession("other")).name == "other" and not builder.used
    assert builder.take("k", lambda: FakeSession("again")).name == "background" and builder.used
    assert builder.take("k", lambda: FakeSession("again")).name == "again"  # handed over once only
    builder.close()
    assert built == ["bg"] and builder.future is None


def test_a_failed_background_build_is_built_again_where_it_is_needed():
    builder = Prebuilder()

    def fails() -> FakeSession:
        raise ValueError("no memory in the background")

    builder.start("k", fails)
    assert builder.take("k", lambda: FakeSession("here")).name == "here" and builder.used
    builder.close()  # the failure is not raised again
    builder.start("k2", fails)
    builder.close()
    assert builder.future is None
    with pytest.raises(ValueError, match="in the foreground"):  # a failure where it is needed is raised
        Prebuilder().take("k", lambda: (_ for _ in ()).throw(ValueError("in the foreground")))


def test_builds_are_one_at_a_time():
    builder = Prebuilder()
    gate, inside = threading.Event(), []

    def slow() -> FakeSession:
        inside.append(builder.lock.locked())
        gate.wait(5)
        return FakeSession("slow")

    builder.start("k", slow)
    while not inside:
        gate.wait(0.01)
    assert inside == [True]  # the background build holds the lock: a foreground build would wait
    gate.set()
    builder.close()


def test_timed_returns_the_session_and_its_thread_seconds():
    session, seconds = timed(lambda: FakeSession("s"))
    assert session.name == "s" and isinstance(seconds, float) and seconds >= 0.0
    planned = Planned(("k",), None, ("a",))  # type: ignore[arg-type]
    assert (planned.key, planned.exposed, str(planned)) == (("k",), ("a",), "first replay")
