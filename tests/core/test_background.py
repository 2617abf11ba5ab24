"""core/background: background native work is waited for before exit, whatever interrupts its start or
the wait for it."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from inspector_cli.core import background


def test_drain_joins_every_started_thread() -> None:
    release, done = threading.Event(), threading.Event()

    def work() -> None:
        release.wait(10)
        done.set()

    background.start(work, name="t-work")
    assert background.pending() == 1 and not background.drain(timeout=0.05)  # bounded: gives up, says so
    release.set()
    assert background.drain(timeout=10) and done.is_set() and background.pending() == 0


def test_a_ctrl_c_during_start_is_raised_after_the_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (or SIGTERM) pending while start() waits for the new thread used to be raised inside
    start(): the thread then ran unseen by drain and aborted the process at exit (issue 28)."""
    ran = threading.Event()
    original = threading.Thread.start

    def start_with_a_signal_pending(self: threading.Thread) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode: inside start() without the guard
        original(self)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(threading.Thread, "start", start_with_a_signal_pending)
    try:
        with pytest.raises(KeyboardInterrupt):
            background.start(ran.set, name="t-interrupted")
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGINT, previous)
    assert background.drain(timeout=10)
    assert ran.is_set()  # the thread was started, and it ran


def _signal_when_main_waits_in(function: str, signum: int) -> threading.Thread:
    """A helper thread that sends `signum` to this process once the main thread is blocked inside
    `function` (read from its current frames, so the signal never lands before the wait)."""
    main = threading.main_thread().ident

    def watch() -> None:
        while True:
            frame = sys._current_frames().get(main)
            names = []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            if function in names[:4]:
                break
            time.sleep(0.001)
        os.kill(os.getpid(), signum)

    watcher = threading.Thread(target=watch, name="t-signal", daemon=True)
    watcher.start()
    return watcher


def test_a_ctrl_c_during_join_leaves_the_thread_counted_until_its_work_returns() -> None:
    """CPython 3.10/3.11: a `Thread.join` interrupted by a signal releases the state lock of the thread
    it waits for, which then counts as stopped while it still runs (python/cpython#90882). compare's
    early sessions were joined so when Ctrl-C came: the thread was left to the finalising interpreter
    inside onnxruntime, and the process aborted (issue 40). Fails on the code before: pending() was 0."""
    release = threading.Event()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        work = background.start(release.wait, 30, name="t-joined")
        _signal_when_main_waits_in("join", signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            work.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert work.is_alive() and background.pending() == 1  # still running: drain still waits for it
        assert not background.drain(timeout=0.05)
    finally:
        release.set()
    assert background.drain(timeout=30) and not work.is_alive()
    work.join()


def test_run_all_returns_in_order_and_raises_the_first_failure() -> None:
    assert background.run_all([lambda: 1, lambda: 2, lambda: 3], name="t-all") == [1, 2, 3]

    def fail(message: str):  # type: ignore[no-untyped-def]
        def call() -> None:
            raise ValueError(message)
        return call

    with pytest.raises(ValueError, match="first"):
        background.run_all([lambda: 0, fail("first"), fail("second")], name="t-all")
    assert background.pending() == 0


def test_inside_onnxruntime_names_a_thread_in_an_onnxruntime_call_and_nothing_else() -> None:
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", value[:1],
                                                value[1:]), opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    idle, stop, started = threading.Event(), threading.Event(), threading.Event()

    def waits() -> None:
        idle.wait(60)

    def runs() -> None:
        while not stop.is_set():
            session.run(None, {"x": np.zeros(1, np.float32)})
            started.set()

    waiting = threading.Thread(target=waits, name="t-idle")
    running = threading.Thread(target=runs, name="t-ort")
    waiting.start()
    running.start()
    try:
        assert started.wait(60)
        found: list = []
        deadline = time.monotonic() + 60
        while not found and time.monotonic() < deadline:  # between two runs at times: ask until inside
            time.sleep(0.001)  # the GIL to the running thread
            found = background.inside_onnxruntime()
        assert found == ["t-ort"]
    finally:
        stop.set()
        idle.set()
        running.join()
        waiting.join()
    assert background.inside_onnxruntime() == []


FIRST_IMPORTS = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from inspector_cli.core import background
from inspector_cli.workflows import validate as flow
assert "onnxruntime" not in sys.modules, "imported before the threads: nothing to check"
seen = []

class Spy(ThreadPoolExecutor):
    def submit(self, *args, **kwargs):
        seen.append(("validate", "onnxruntime" in sys.modules))
        return super().submit(*args, **kwargs)

flow.ThreadPoolExecutor = Spy
if sys.argv[1] == "threads":
    seen.append(("run_all", background.run_all([lambda: "onnxruntime" in sys.modules], name="t")[0]))
else:
    flow.validate_model(Path(sys.argv[2]))
print(seen)
"""


@pytest.mark.parametrize("where", ["threads", "validate"])
def test_onnxruntime_is_imported_before_the_threads_that_use_it(tmp_path, where: str) -> None:
    """A thread started by core.background, and validate's rules worker, never import onnxruntime for
    the first time beside another thread: importlib's deadlock avoidance then hands one of them a
    partially initialised module (CI, under load: `validate --strict` exit 4, "cannot import name
    'ExecutionMode' from partially initialized module 'onnxruntime.capi._pybind_state'"). Checked in
    a fresh process: onnxruntime is in sys.modules when the threads start. Fails on the code before."""
    import subprocess

    import onnx
    from onnx import TensorProto, helper

    model = tmp_path / "identity.onnx"
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    root = str(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    done = subprocess.run([sys.executable, "-c", FIRST_IMPORTS, where, str(model)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    expected = [("run_all", True)] if where == "threads" else [("validate", True)]
    assert done.stdout.strip() == repr(expected)
