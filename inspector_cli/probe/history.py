"""Run summaries of `mi probe`, kept per model and selection so later runs can say what changed.

Layout: `DIR/<key>/<run_id>.json`, where `key` hashes the model's resolved path and the sorted
selection patterns (a re-exported model at the same path keeps its history; the file's sha256
is recorded in each run). The newest `keep` runs of a key are kept; older ones are deleted after
each save. Files are written atomically.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import UsageError

DEFAULT_DIR = ".mi/history"
DEFAULT_KEEP = 10
SUMMARY_STATS = ("min", "max", "mean", "std", "absmax", "p0.1", "p1", "p50", "p99", "p99.9", "zero_frac",
                 "outlier_ratio", "nan", "inf", "dead_channels", "zero_samples")
FORMAT = 1


def history_key(model_path: str, selection: Sequence[str]) -> str:
    """Stable key of a model path and a selection (order and duplicates of patterns do not matter)."""
    text = json.dumps({"model": str(Path(model_path).resolve()), "select": sorted(set(selection))})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def new_run_id(now: Optional[_dt.datetime] = None) -> str:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class StoredRun:
    """One run's summary as stored: tensor -> statistic -> value, plus where it came from."""

    path: Path
    data: Dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.data.get("run_id", self.path.stem))

    @property
    def created_ns(self) -> int:
        return int(self.data.get("created_ns", 0))

    @property
    def tensors(self) -> Dict[str, Dict[str, Any]]:
        return dict(self.data.get("tensors") or {})


class HistoryStore:
    """The history folder; every method names the folder in its errors."""

    def __init__(self, directory: "str | os.PathLike[str]" = DEFAULT_DIR, keep: int = DEFAULT_KEEP) -> None:
        self.directory = Path(directory)
        self.keep = keep

    def runs(self, key: Optional[str] = None) -> List[StoredRun]:
        """Stored runs, oldest first (of one key, or of all keys)."""
        if not self.directory.is_dir():
            return []
        folders = [self.directory / key] if key else sorted(p for p in self.directory.iterdir() if p.is_dir())
        found: List[StoredRun] = []
        for folder in folders:
            for path in folder.glob("*.json") if folder.is_dir() else []:
                run = _read(path)
                if run is not None:
                    found.append(run)
        return sorted(found, key=lambda r: (r.created_ns, r.run_id))

    def find(self, run_id: str, key: str) -> StoredRun:
        """`last` (the newest run of `key`) or a run id (any key)."""
        if run_id == "last":
            runs = self.runs(key)
            if not runs:
                raise UsageError(f"--since last: no earlier run of this model and selection in {self.directory}",
                                 hint="run once without --since first (history is saved unless --no-history)")
            return runs[-1]
        for run in self.runs():
            if run.run_id == run_id:
                return run
        raise UsageError(f"--since {run_id}: no such run in {self.directory}", hint="'mi probe --history' lists runs")

    def check_writable(self) -> None:
        """Fail (exit 2, naming the folder) before any work when the folder cannot take a run: a
        finished probe must not be the first to find out (issue 15 item 5). Tries a real write,
        since os.access says yes to root on a read-only mount or a path through a file."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            probe = self.directory / f".mi-write-check-{os.getpid()}-{secrets.token_hex(3)}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise UsageError(f"{self.directory}: cannot write the probe history ({exc.strerror or exc})",
                             hint="choose another place with --history-dir or skip it with --no-history") from exc

    def save(self, key: str, summary: Dict[str, Any]) -> Tuple[Path, int]:
        """Write a run summary and prune the key's older runs; returns (path, runs deleted)."""
        from ..serialize import write_atomic

        folder = self.directory / key
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{summary['run_id']}.json"
            write_atomic(path, json.dumps(summary, indent=1, allow_nan=False) + "\n")
        except OSError as exc:
            raise UsageError(f"{folder}: cannot write the probe history ({exc.strerror or exc})",
                             hint="choose another place with --history-dir or skip it with --no-history") from exc
        return path, self.prune(key)

    def prune(self, key: str) -> int:
        runs = self.runs(key)
        stale = runs[:-self.keep] if self.keep > 0 else runs
        for run in stale:
            try:
                run.path.unlink()
            except OSError:
                pass
        return len(stale)


def _read(path: Path) -> Optional[StoredRun]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a foreign or broken file is skipped, not fatal
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return StoredRun(path, data)


def make_summary(run_id: str, key: str, *, model: str, model_sha256: Optional[str], selection: Sequence[str],
                 inputs: str, samples: int, tensors: Iterable[Any]) -> Dict[str, Any]:
    """The stored form of a run: the summary statistics of every tensor (non-finite as strings)."""
    from ..results.codec import encode_float

    now = _dt.datetime.now(_dt.timezone.utc)
    table: Dict[str, Dict[str, Any]] = {}
    for stats in tensors:
        row: Dict[str, Any] = {}
        for name in SUMMARY_STATS:
            value = stats.stat(name)
            row[name] = encode_float(value) if isinstance(value, float) else value
        table[stats.name] = row
    return {"format": FORMAT, "run_id": run_id, "key": key, "created": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "created_ns": int(now.timestamp() * 1e9), "model": str(Path(model).resolve()),
            "model_sha256": model_sha256, "selection": list(selection), "inputs": inputs, "samples": samples,
            "tensors": table}


def changes_since(before: StoredRun, tensors: Sequence[Any]) -> Tuple[List[Any], List[str], List[str]]:
    """Each summary statistic's change per tensor present in both runs: (changes, only now, only before)."""
    from ..results.codec import decode_value
    from ..results.probe import StatChange

    old = before.tensors
    changes: List[StatChange] = []
    for stats in tensors:
        previous = old.get(stats.name)
        if previous is None:
            continue
        for name in SUMMARY_STATS:
            was, now = decode_value(previous.get(name)), stats.stat(name)
            if was is None and now is None:
                continue
            change = rel = None
            if isinstance(was, (int, float)) and isinstance(now, (int, float)):
                change = float(now) - float(was)
                rel = change / abs(was) if was else (0.0 if change == 0 else None)
            changes.append(StatChange(tensor=stats.name, stat=name, before=_num(was), now=_num(now),
                                      change=change, rel_change=rel))
    names = {s.name for s in tensors}
    return changes, [s.name for s in tensors if s.name not in old], [n for n in old if n not in names]


def _num(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) else None
