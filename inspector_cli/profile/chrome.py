"""`--trace PATH`: the kept runs as a Chrome trace (opens in Perfetto or chrome://tracing).

Each model is a process; its runs are a lane of their own, kernels sit on the threads that ran
them, and every kernel carries its op type, provider, shapes and the original nodes it executed.
Warm-up runs are left out and each model's first kept run starts at 0, so two models line up.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from .analysis import Analysis
from .trace import iter_kept_events

RUN_LANE = 0


def trace_events(analysis: Analysis, pid: int, label: str) -> List[Dict[str, Any]]:
    """Chrome-trace events ("X" complete events plus "M" names) for one model's kept runs."""
    trace = analysis.trace
    kept = trace.kept_runs
    origin = int(trace.run_start[kept[0]]) if len(kept) else 0
    events: List[Dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": label}},
        {"ph": "M", "pid": pid, "tid": RUN_LANE, "name": "thread_name", "args": {"name": "runs"}},
    ]
    for number, r in enumerate(kept):
        events.append({"ph": "X", "pid": pid, "tid": RUN_LANE, "cat": "run", "name": f"run {number}",
                       "ts": int(trace.run_start[r]) - origin, "dur": int(trace.run_dur[r])})
    by_kernel = {k.name: k for k in analysis.profile.kernels}
    groups = analysis.mapping.groups
    args_of: Dict[str, Dict[str, Any]] = {}
    threads = set()
    for name, ts, dur, tid, _ in iter_kept_events(trace):
        args = args_of.get(name)
        if args is None:
            stat = by_kernel.get(name)
            info = trace.info.get(name)
            group = analysis.mapping.group_of_kernel.get(name)
            args = args_of[name] = {
                "op_type": info.op_type if info else "?", "provider": info.provider if info else "?",
                "group": groups[group].kind if group is not None else "?",
                "original_nodes": (stat.original_nodes[:12] if stat else []),
                "inputs": [s.text() for s in info.inputs] if info else [],
                "outputs": [s.text() for s in info.outputs] if info else [],
            }
        threads.add(tid)
        events.append({"ph": "X", "pid": pid, "tid": tid + 1 if tid == RUN_LANE else tid, "cat": args["op_type"],
                       "name": name, "ts": ts - origin, "dur": dur, "args": args})
    for tid in sorted(threads):
        events.append({"ph": "M", "pid": pid, "tid": tid + 1 if tid == RUN_LANE else tid, "name": "thread_name",
                       "args": {"name": f"thread {tid}"}})
    return events


def write_chrome_trace(path: "str | Path", models: Sequence[Tuple[str, Analysis]]) -> None:
    """Write the Chrome-trace JSON object form ({"traceEvents": [...]}), atomically."""
    from ..serialize import write_atomic

    events: List[Dict[str, Any]] = []
    for pid, (label, analysis) in enumerate(models, start=1):
        events.extend(trace_events(analysis, pid, label))
    document = {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"producer": "mi profile", "models": [label for label, _ in models]}}
    write_atomic(path, json.dumps(document, default=_plain, separators=(",", ":")))


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")
