"""Parsing onnxruntime's profiler output (a Chrome-trace JSON array) into per-run kernel times.

onnxruntime writes one event per line. Parsing 50 runs of a 2,000-node model with `json.load`
takes seconds (every event carries thread-pool statistics), so the fast path reads only the
fixed header of each line (`cat`, `tid`, `dur`, `ts`, `name`: a split on quotes, or one regular
expression when the spacing differs) and decodes the full JSON of a kernel's *first* event only
(op type, provider, shapes, sizes: the same in every run). Lines that look like neither fall
back to `json.loads`, and a file that is not one event per line is read with `json.load`, so
other writers still parse.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InferenceError
from .kernel_info import KernelInfo, kernel_info, parse_int

KERNEL_SUFFIX = "_kernel_time"
_HEADER = re.compile(
    rb'\s*\{\s*"cat"\s*:\s*"(?P<cat>[^"]*)"\s*,\s*"pid"\s*:\s*-?\d+\s*,\s*"tid"\s*:\s*(?P<tid>-?\d+)\s*,'
    rb'\s*"dur"\s*:\s*(?P<dur>\d+)\s*,\s*"ts"\s*:\s*(?P<ts>\d+)\s*,\s*"ph"\s*:\s*"X"\s*,'
    rb'\s*"name"\s*:\s*"(?P<name>(?:[^"\\]|\\.)*)"')

@dataclass
class Trace:
    """Kernel events of one or more profiled sessions, assigned to runs.

    `runs` holds every model_run window in order (warm-up ones included, see `kept`); `kernel`,
    `run`, `ts`, `dur`, `tid` are parallel arrays over kernel events (`run` is -1 outside any run).
    """

    names: List[str]
    info: Dict[str, KernelInfo]
    run_start: np.ndarray
    run_dur: np.ndarray
    run_session: np.ndarray
    kept: np.ndarray
    kernel: np.ndarray
    run: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    tid: np.ndarray
    session_offset: List[int] = field(default_factory=list)
    arena_peak: Optional[int] = None
    notes: List[str] = field(default_factory=list)

    @property
    def kept_runs(self) -> np.ndarray:
        return np.flatnonzero(self.kept)


class _Raw:
    """Accumulates events of one file."""

    def __init__(self) -> None:
        self.runs: List[Tuple[int, int]] = []
        self.events: List[Tuple[str, int, int, int]] = []
        self.first_args: Dict[str, Dict[str, Any]] = {}

    def add(self, cat: str, name: str, ts: int, dur: int, tid: int, args: Any) -> None:
        if cat == "Session" and name == "model_run":
            self.runs.append((ts, dur))
        elif cat == "Node" and name.endswith(KERNEL_SUFFIX):
            kernel = name[: -len(KERNEL_SUFFIX)]
            self.events.append((kernel, ts, dur, tid))
            if kernel not in self.first_args:
                self.first_args[kernel] = args() if callable(args) else (args or {})


def _read_file(path: Path) -> _Raw:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InferenceError(f"{path}: cannot read the profile ({exc.strerror})") from exc
    lines = data.split(b"\n")
    if len(lines) < 3 and data.strip():
        return _json_raw(path, data)  # not one event per line: another writer
    raw = _Raw()
    kernels: Dict[bytes, str] = {}
    for line in lines:
        # Fastest: onnxruntime's fixed layout split on quotes ('{"cat" : "Node","pid" :1,"tid" :1,"dur" :5,
        # "ts" :9,"ph" : "X","name" :"n_kernel_time","args" : ...'); then the regex; then json.
        t = line.split(b'"', 20)
        if len(t) == 21 and t[1] == b"cat" and t[7] == b"tid" and t[9] == b"dur" and t[11] == b"ts" \
                and t[17] == b"name" and not t[19].endswith(b"\\"):
            cat, name_bytes, numbers = t[3], t[19], (t[12], t[10], t[8])
        else:
            m = _HEADER.match(line)
            if m is None:
                stripped = line.strip().rstrip(b",")
                if stripped in (b"", b"[", b"]"):
                    continue
                try:
                    _add_json_events(raw, [json.loads(stripped)])
                except json.JSONDecodeError:
                    return _json_raw(path, data)
                continue
            cat, name_bytes, numbers = m.group("cat"), m.group("name"), m.group("ts", "dur", "tid")
        if cat == b"Session":
            if name_bytes == b"model_run":
                raw.runs.append((int(numbers[0].strip(b" :,")), int(numbers[1].strip(b" :,"))))
            continue
        if cat != b"Node" or not name_bytes.endswith(b"_kernel_time"):
            continue
        kernel = kernels.get(name_bytes)
        if kernel is None:  # first event of this kernel: decode its name and its static facts once
            full = json.loads(b'"' + name_bytes + b'"') if b"\\" in name_bytes else name_bytes.decode("utf-8", "replace")
            kernel = kernels[name_bytes] = full[: -len(KERNEL_SUFFIX)]
            raw.first_args[kernel] = _line_args(line)
        raw.events.append((kernel, int(numbers[0].strip(b" :,")), int(numbers[1].strip(b" :,")),
                           int(numbers[2].strip(b" :,"))))
    return raw


def _line_args(line: bytes) -> Dict[str, Any]:
    try:
        return json.loads(line.strip().rstrip(b",")).get("args") or {}
    except (json.JSONDecodeError, AttributeError):
        return {}


def _json_raw(path: Path, data: bytes) -> _Raw:
    raw = _Raw()
    _add_json_events(raw, _load_json(path, data))
    return raw


def _load_json(path: Path, data: bytes) -> List[Any]:
    try:
        document = json.loads(data)
    except json.JSONDecodeError as exc:
        raise InferenceError(f"{path}: the profile is not valid JSON ({exc.msg} at line {exc.lineno})",
                             hint="onnxruntime may have been interrupted while writing it") from exc
    if isinstance(document, dict):
        document = document.get("traceEvents", [])
    return document if isinstance(document, list) else []


def _add_json_events(raw: _Raw, events: Sequence[Any]) -> None:
    for e in events:
        if isinstance(e, dict) and e.get("ph", "X") == "X" and "dur" in e:
            raw.add(str(e.get("cat", "")), str(e.get("name", "")), int(e.get("ts", 0)), int(e["dur"]),
                    int(e.get("tid", 0) or 0), e.get("args") or {})


def parse_trace(paths: Sequence["str | Path"], warmup: int = 0) -> Trace:
    """Read the profile files of one model's sessions (in order) and assign kernels to runs.

    The first `warmup` runs of every session are marked as not kept. Runs whose kernel events are
    incomplete (the profiler's event limit was reached) are dropped with a note.
    """
    names: List[str] = []
    index: Dict[str, int] = {}
    info: Dict[str, KernelInfo] = {}
    parts: List[Tuple[np.ndarray, ...]] = []
    run_rows: List[Tuple[int, int, int]] = []
    offsets: List[int] = []
    offset = 0
    for session, path in enumerate(paths):
        raw = _read_file(Path(path))
        offsets.append(offset)
        for kernel, args in raw.first_args.items():
            if kernel not in info:
                info[kernel] = kernel_info(kernel, args)
            if kernel not in index:
                index[kernel] = len(names)
                names.append(kernel)
        end = 0
        if raw.events:
            kernel_names, ts, dur, tid = zip(*raw.events)
            k = np.fromiter(map(index.__getitem__, kernel_names), dtype=np.int64, count=len(kernel_names))
            ts_a, dur_a = np.asarray(ts, dtype=np.int64), np.asarray(dur, dtype=np.int64)
            parts.append((k, ts_a + offset, dur_a, np.asarray(tid, dtype=np.int64)))
            end = int((ts_a + dur_a).max())
        run_rows.extend((ts + offset, dur, session) for ts, dur in sorted(raw.runs))
        end = max([end] + [ts + dur for ts, dur in raw.runs])
        offset += end + 1000  # sessions laid end to end on one time axis
    empty = np.zeros(0, dtype=np.int64)
    kernel, ts, dur, tid = (np.concatenate(c) if c else empty for c in zip(*parts)) if parts else (empty,) * 4
    runs = np.asarray(run_rows, dtype=np.int64).reshape(-1, 3)
    trace = Trace(names=names, info=info, run_start=runs[:, 0], run_dur=runs[:, 1], run_session=runs[:, 2],
                  kept=np.ones(len(runs), dtype=bool), kernel=kernel, run=_assign_runs(ts, runs), ts=ts, dur=dur,
                  tid=tid, session_offset=offsets, arena_peak=_arena_peak(info))
    _mark_warmup(trace, warmup)
    _drop_incomplete(trace)
    return trace


def _assign_runs(ts: np.ndarray, runs: np.ndarray) -> np.ndarray:
    if not len(runs):
        return np.full(len(ts), -1, dtype=np.int64)
    starts, ends = runs[:, 0], runs[:, 0] + runs[:, 1]
    pos = np.searchsorted(starts, ts, side="right") - 1
    inside = (pos >= 0) & (ts <= ends[np.clip(pos, 0, None)])
    return np.where(inside, pos, -1)


def _mark_warmup(trace: Trace, warmup: int) -> None:
    for session in np.unique(trace.run_session):
        runs = np.flatnonzero(trace.run_session == session)
        trace.kept[runs[:warmup]] = False


def _drop_incomplete(trace: Trace) -> None:
    """A session's last run with fewer kernel events than its typical run was cut by the event limit."""
    kept = trace.kept_runs
    if not len(kept):
        return
    counts = np.bincount(trace.run[trace.run >= 0], minlength=len(trace.run_start))
    typical = int(np.median(counts[kept]))
    last = [int(np.flatnonzero(trace.run_session == s)[-1]) for s in np.unique(trace.run_session)]
    short = [r for r in last if trace.kept[r] and counts[r] < typical]
    if short:
        trace.kept[short] = False
        trace.notes.append(f"{len(short)} profiled run(s) had incomplete kernel events (the profiler's event "
                           "limit was reached) and were dropped")


def _arena_peak(info: Dict[str, KernelInfo]) -> Optional[int]:
    peaks = [parse_int(k.args.get("mem_in_use_peak")) for k in info.values()]
    values = [p for p in peaks if p is not None]
    return max(values) if values else None


def per_run_matrix(trace: Trace) -> Tuple[np.ndarray, np.ndarray]:
    """(time, calls): kernels x kept runs; time is the summed duration of a kernel's events in a run."""
    kept = trace.kept_runs
    column = np.full(len(trace.run_start), -1, dtype=np.int64)
    column[kept] = np.arange(len(kept))
    valid = trace.run >= 0
    cols = column[trace.run[valid]]
    use = cols >= 0
    k = trace.kernel[valid][use]
    c = cols[use]
    size = len(trace.names) * len(kept)
    flat = k * len(kept) + c
    time = np.bincount(flat, weights=trace.dur[valid][use], minlength=size).reshape(len(trace.names), len(kept))
    calls = np.bincount(flat, minlength=size).reshape(len(trace.names), len(kept))
    return time, calls


def iter_kept_events(trace: Trace) -> Iterator[Tuple[str, int, int, int, int]]:
    """(kernel name, ts, dur, tid, run) of every kernel event inside a kept run."""
    keep = (trace.run >= 0) & trace.kept[np.clip(trace.run, 0, None)]
    for i in np.flatnonzero(keep):
        yield trace.names[trace.kernel[i]], int(trace.ts[i]), int(trace.dur[i]), int(trace.tid[i]), int(trace.run[i])
