#!/usr/bin/env python3
"""Where each sample's time goes: an mi command (or the plain-onnxruntime floor) run in this process
with a timer around every per-sample step, for bench_sample_cost.py.

    python scripts/bench_phases.py mi -q compare A B --inputs DIR [--layers all] --json OUT
    python scripts/bench_phases.py floor A.onnx [B.onnx] DIR

Prints one JSON object: per phase (sample read, feed, run A, run B, copies out of onnxruntime,
metrics, bookkeeping, waiting) the wall and CPU seconds of each thread kind (the main thread, the
metrics thread, others), exclusive of the phases nested inside it; the process's wall and CPU
seconds; and each onnxruntime session's thread settings against onnxruntime's defaults.

The timers are wrappers installed around mi's own functions before the command runs (no code in
mi itself); a wrapper costs ~1 us a call, far below any phase it measures.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent

_local = threading.local()
_lock = threading.Lock()
TOTALS: Dict[Tuple[str, str], List[float]] = {}
"""(phase, thread kind) -> [wall s, cpu s, calls]."""
SESSIONS: List[Dict[str, Any]] = []


def _kind() -> str:
    name = threading.current_thread().name
    if threading.current_thread() is threading.main_thread():
        return "main"
    if name.startswith("mi-metrics") or name.startswith("mi-stats"):
        return "metrics"
    return "other"


def timed(phase: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` with its exclusive wall/CPU time added to the phase `phase(*args)` names."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        frame = [time.perf_counter(), time.thread_time(), 0.0, 0.0]  # start wall, start cpu, nested wall, nested cpu
        stack.append(frame)
        try:
            return fn(*args, **kwargs)
        finally:
            stack.pop()
            wall, cpu = time.perf_counter() - frame[0], time.thread_time() - frame[1]
            if stack:  # the caller's phase excludes this one
                stack[-1][2] += wall
                stack[-1][3] += cpu
            key = (phase(*args, **kwargs), _kind())
            with _lock:
                row = TOTALS.setdefault(key, [0.0, 0.0, 0])
                row[0] += wall - frame[2]
                row[1] += cpu - frame[3]
                row[2] += 1
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def const(name: str) -> Callable[..., str]:
    return lambda *args, **kwargs: name


def patch(owner: Any, attr: str, phase: Callable[..., str]) -> None:
    """Wrap `owner.attr` and every module-level alias of it in inspector_cli (from-imports)."""
    original = getattr(owner, attr)
    wrapped = timed(phase, original)
    setattr(owner, attr, wrapped)
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("inspector_cli") and getattr(module, attr, None) is original:
            setattr(module, attr, wrapped)


def _run_label(session: Any) -> str:
    label = getattr(session, "label", "") or ""
    return "run A" if label.startswith("A ") else "run B" if label.startswith("B ") else "run"


def install_mi() -> None:
    """Timers around mi's per-sample steps (imports every module whose functions are wrapped)."""
    import importlib

    for name in ("inspector_cli.core.inputs", "inspector_cli.core.io_match", "inspector_cli.core.runner",
                 "inspector_cli.core.binding", "inspector_cli.diff.metrics", "inspector_cli.diff.values",
                 "inspector_cli.diff.fast_stats", "inspector_cli.diff.engine", "inspector_cli.compare.plan",
                 "inspector_cli.compare.batch", "inspector_cli.compare.capture", "inspector_cli.compare.layers",
                 "inspector_cli.probe.tracker", "inspector_cli.probe.sketch", "inspector_cli.probe.moments",
                 "inspector_cli.probe.channels", "inspector_cli.probe.runner", "inspector_cli.probe.batch",
                 "inspector_cli.workflows.compare", "inspector_cli.workflows.probe"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    mods = {name: sys.modules.get(f"inspector_cli.{name}") for name in (
        "core.inputs", "core.io_match", "core.runner", "core.binding", "diff.metrics", "diff.values", "diff.fast_stats",
        "diff.engine", "compare.batch", "compare.capture", "compare.layers", "probe.tracker", "probe.sketch",
        "probe.moments", "probe.channels", "probe.runner")}
    m = mods
    patch(m["core.inputs"].SampleSet, "load", const("sample read"))
    patch(m["core.inputs"], "adapt_feeds", const("feed"))
    patch(m["core.io_match"], "rename_feeds", const("feed"))
    session_cls = m["core.runner"].Session
    patch(session_cls, "run", lambda self, *a, **k: _run_label(self))
    init = session_cls.__init__

    def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        runtime = self.runtime
        config = dict(runtime.session_config)
        SESSIONS.append({"label": self.label, "intra_op_threads": self.options.intra_op_num_threads or "default",
                         "spinning": config.get("session.intra_op.allow_spinning", "default")
                         + (" (stops after each run)" if config.get("session.force_spinning_stop") == "1" else ""),
                         "opt_level": str(runtime.opt_level.value)})
    session_cls.__init__ = recording_init
    patch(m["core.binding"].BoundRunner, "run", lambda self, *a, **k: _run_label(self.session))
    patch(m["compare.capture"].Reader, "flat", const("copies out of onnxruntime"))
    patch(m["diff.fast_stats"], "fast_pair_stats", const("metrics"))
    patch(m["diff.metrics"], "compare_arrays", const("metrics"))
    patch(m["diff.values"], "reduce_values", const("metrics"))
    patch(m["diff.engine"].TensorTracker, "add_stats", const("bookkeeping"))
    patch(m["diff.engine"].TensorTracker, "add", const("bookkeeping"))
    patch(m["compare.batch"], "fold", const("bookkeeping"))
    patch(m["compare.layers"].LayerCapture, "_wait", const("waiting for the metrics thread"))
    patch(m["compare.layers"].LayerCapture, "_on_chunk", const("bookkeeping"))
    patch(m["compare.layers"].LayerCapture, "_compare_pair", const("bookkeeping"))
    # probe: the statistics of each captured tensor, by kind
    patch(m["probe.tracker"].ProbeTracker, "update", const("statistics: min/max/zeros, bookkeeping"))
    patch(m["probe.tracker"], "as_float", const("copies out of onnxruntime"))
    patch(m["probe.sketch"].KeyBuffer, "keys", const("statistics: histogram"))
    patch(m["probe.sketch"].LogHistogram, "add_keys", const("statistics: histogram"))
    patch(m["probe.moments"], "sample_moments", const("statistics: moments"))
    patch(m["probe.channels"].ChannelTracker, "update", const("statistics: channels"))
    patch(m["probe.runner"].ProbeRunner, "_consume", const("bookkeeping"))
    for name in ("wait_statistics", "_wait_statistics"):
        for cls in (getattr(m["probe.runner"], "ProbeRunner", None),):
            if cls is not None and hasattr(cls, name):
                patch(cls, name, const("waiting for the metrics thread"))


def install_floor() -> None:
    import numpy as np
    import onnxruntime as ort

    load = np.load

    def timed_load(*args: Any, **kwargs: Any) -> Any:
        with load(*args, **kwargs) as archive:
            return {k: archive[k] for k in archive.files}
    globals()["_floor_load"] = timed(const("sample read"), timed_load)
    runs = {}

    def run_of(session: Any) -> Callable[..., Any]:
        if id(session) not in runs:
            label = "run A" if not runs else "run B"
            runs[id(session)] = timed(const(label), session.run)
        return runs[id(session)]
    globals()["_floor_run"] = run_of
    SESSIONS.append({"label": "floor (each session)", "intra_op_threads": "default", "spinning": "default",
                     "opt_level": "all", "onnxruntime": ort.__version__})


def floor(models: List[str], data: str) -> None:
    """Plain onnxruntime: default session options, CPU provider, sample by sample (as bench_speed_work.py)."""
    import glob

    import onnxruntime as ort

    sessions = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]) for p in models]
    for path in sorted(glob.glob(os.path.join(data, "*.npz"))):
        feeds = _floor_load(path)  # noqa: F821 - installed by install_floor
        for session in sessions:
            _floor_run(session)(None, feeds)  # noqa: F821


def main(argv: List[str]) -> int:
    if not argv or argv[0] not in ("mi", "floor"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    code = 0
    if argv[0] == "floor":
        install_floor()
        floor(argv[1:-1], argv[-1])
    else:
        import gc

        for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as mi's entry point, before numpy loads
            os.environ.setdefault(name, "1")
        gc.set_threshold(10_000, 10, 10)
        sys.path.insert(0, str(ROOT))
        install_mi()
        from inspector_cli.cli import cli

        try:
            cli.main(args=argv[1:])
        except SystemExit as exc:
            code = int(exc.code or 0)
    out = {"code": code, "wall": time.perf_counter() - start_wall, "cpu": time.process_time() - start_cpu,
           "phases": [{"phase": p, "thread": t, "wall": v[0], "cpu": v[1], "calls": v[2]}
                      for (p, t), v in sorted(TOTALS.items())],
           "sessions": SESSIONS}
    print("BENCH_PHASES " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
