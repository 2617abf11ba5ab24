"""Resumable per-step JSONL, with state checkpoints so a resumed run continues the same trajectory.

Each step appends one JSON line (`{"step": k, ...}`, no timings: a resumed run writes the same
bytes as an uninterrupted one). Every `checkpoint_every` steps the states of both models are saved
atomically to `<journal>.state.npz`; on resume the journal is cut back to the last checkpointed
step, the states are restored, and the loop continues at the next step.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, TextIO, Tuple

import numpy as np

from ..core.types import TensorMap
from ..errors import InputDataError

_PREFIX = {"a": "a::", "b": "b::"}


def _strict(value: Any) -> Any:
    """JSON without NaN/Infinity literals (strings instead, as serialize.py writes them)."""
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def _line(record: Dict[str, Any]) -> str:
    """One JSONL line. A record with no NaN/Inf is dumped as is (the common case: walking it through
    `_strict` first cost more than the dump); one with them is rewritten with strings."""
    try:
        return json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(_strict(record), sort_keys=True) + "\n"


def unstrict(value: Any) -> Any:
    """The inverse of `_strict` for numbers read back."""
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    if isinstance(value, dict):
        return {k: unstrict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unstrict(v) for v in value]
    return value


@dataclass
class Checkpoint:
    step: int
    """Last step whose outputs the states come from."""
    state_a: TensorMap
    state_b: TensorMap
    extra: Dict[str, Any]


class StepJournal:
    """Append-only per-step records plus periodic state checkpoints."""

    def __init__(self, path: "str | Path", checkpoint_every: int = 100) -> None:
        self.path = Path(path)
        self.state_path = self.path.with_name(self.path.name + ".state.npz")
        self.checkpoint_every = max(1, int(checkpoint_every))
        self._handle: Optional[TextIO] = None

    # ---- resume ----------------------------------------------------------------------------------
    def resume(self) -> Tuple[Optional[Checkpoint], List[Dict[str, Any]]]:
        """The last checkpoint and the records up to it (the journal file is cut back to them)."""
        if not self.path.exists() or not self.state_path.exists():
            return None, []
        checkpoint = self._read_checkpoint()
        records = [r for r in self._read_records() if r["step"] <= checkpoint.step]
        if [r["step"] for r in records] != list(range(checkpoint.step + 1)):
            raise InputDataError(f"{self.path}: journal does not hold steps 0..{checkpoint.step} of its checkpoint",
                                 hint="delete the journal and its .state.npz to start over")
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(_strict(record), sort_keys=True) + "\n")
        os.replace(tmp, self.path)
        return checkpoint, [unstrict(r) for r in records]

    def _read_records(self) -> Iterator[Dict[str, Any]]:
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    return  # a line cut by an interruption: everything after it is redone

    def _read_checkpoint(self) -> Checkpoint:
        try:
            with np.load(self.state_path, allow_pickle=False) as archive:
                arrays = {k: archive[k] for k in archive.files}
        except (ValueError, OSError, EOFError) as exc:
            raise InputDataError(f"{self.state_path}: unreadable state checkpoint ({exc})") from exc
        meta = json.loads(bytes(arrays.pop("__meta__")).decode("utf-8"))
        state_a = {k[3:]: v for k, v in arrays.items() if k.startswith(_PREFIX["a"])}
        state_b = {k[3:]: v for k, v in arrays.items() if k.startswith(_PREFIX["b"])}
        return Checkpoint(int(meta["step"]), state_a, state_b, meta.get("extra", {}))

    # ---- writing ---------------------------------------------------------------------------------
    def start(self, fresh: bool) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if fresh:
            self.state_path.unlink(missing_ok=True)
        self._handle = open(self.path, "w" if fresh else "a", encoding="utf-8")

    def append(self, record: Dict[str, Any]) -> None:
        self.append_many([record])

    def append_many(self, records: List[Dict[str, Any]]) -> None:
        """One line per record, written at once."""
        assert self._handle is not None
        self._handle.write("".join(_line(record) for record in records))

    def due(self, step: int) -> bool:
        return (step + 1) % self.checkpoint_every == 0

    def checkpoint(self, step: int, state_a: TensorMap, state_b: TensorMap, extra: Optional[Dict[str, Any]] = None) -> None:
        """Flush the records and save both states after `step` (atomic rename)."""
        assert self._handle is not None
        self._handle.flush()
        os.fsync(self._handle.fileno())
        arrays = {_PREFIX["a"] + k: v for k, v in state_a.items()}
        arrays.update({_PREFIX["b"] + k: v for k, v in state_b.items()})
        meta = json.dumps({"step": step, "extra": extra or {}}).encode("utf-8")
        arrays["__meta__"] = np.frombuffer(meta, dtype=np.uint8)
        tmp = self.state_path.with_name(self.state_path.name + ".tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, self.state_path)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
