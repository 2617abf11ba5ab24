"""Batch bookkeeping: the JSONL log (append, flush, resume) and the summary grouped by origin."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, TextIO, Tuple

from ..errors import ReportError, UsageError
from ..results.codec import from_jsonable, to_jsonable
from ..results.nan_bisect import Group, SampleRecord
from ..serialize import os_error_text

KIND_ORDER = {"origin": 0, "masked": 1, "fp16-overflow": 2, "fp16-underflow": 3, "error": 4}


def record_line(record: SampleRecord) -> str:
    """One strict-JSON line (non-finite numbers as strings), keys in a stable order."""
    return json.dumps(to_jsonable(record), allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def read_records(path: Path) -> Tuple[List[SampleRecord], int]:
    """Records of a JSONL log and the byte length of its complete lines (a torn last line, left by a
    killed run, is not counted: it is cut off before appending)."""
    records: List[SampleRecord] = []
    good = 0
    with open(path, "rb") as handle:
        data = handle.read()
    offset = 0
    for raw in data.splitlines(keepends=True):
        end = offset + len(raw)
        if not raw.endswith(b"\n"):
            break
        offset = end
        text = raw.strip()
        if not text:
            good = end
            continue
        try:
            records.append(from_jsonable(SampleRecord, json.loads(text)))
        except (ValueError, TypeError, KeyError) as exc:
            raise ReportError(f"{path}: line {len(records) + 1} is not a nan-bisect record ({exc})",
                              hint="give --jsonl a new file, or delete this one") from exc
        good = end
    return records, good


def check_jsonl(path: Optional[str], *, resume: bool, overwrite: bool = False) -> None:
    """Refuse (exit 2) to start a fresh log over an existing non-empty file: a run without --resume
    must never delete earlier records silently (issue 15 item 6)."""
    if path is None or resume or overwrite:
        return
    target = Path(path)
    try:
        non_empty = target.is_file() and target.stat().st_size > 0
    except OSError:
        return  # unreadable: opening it for writing says why, naming the path
    if non_empty:
        raise UsageError(f"{path} exists: use --resume or --overwrite",
                         hint="--jsonl: --resume skips the samples it records, --overwrite starts a new log")


class JsonlLog:
    """Appends one line per sample and flushes it, so a killed run leaves every finished sample.

    Without `resume`, an existing non-empty file is refused unless `overwrite` (see check_jsonl).
    Every OSError (a full disk, a read-only folder) is a `ReportError` naming the file."""

    def __init__(self, path: Optional[str], *, resume: bool, overwrite: bool = False) -> None:
        self.path = Path(path) if path else None
        self.previous: List[SampleRecord] = []
        self._handle: Optional[TextIO] = None
        if self.path is None:
            return
        check_jsonl(path, resume=resume, overwrite=overwrite)
        try:
            if resume and self.path.exists():
                self.previous, good = read_records(self.path)
                with open(self.path, "r+b") as handle:
                    handle.truncate(good)
            elif self.path.exists():
                self.path.unlink()  # --overwrite (or an empty file): a fresh run starts a fresh log
            self._handle = open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: OSError) -> ReportError:
        return ReportError(f"{self.path}: cannot write the JSONL log: {os_error_text(exc)}")

    @property
    def done(self) -> Set[str]:
        return {r.sample for r in self.previous}

    def write(self, record: SampleRecord) -> None:
        if self._handle is not None:
            try:
                self._handle.write(record_line(record) + "\n")
                self._handle.flush()
            except OSError as exc:
                raise self._error(exc) from exc

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                handle.flush()
                os.fsync(handle.fileno())
            except OSError as exc:
                raise self._error(exc) from exc
            finally:
                try:
                    handle.close()
                except OSError:
                    pass  # the flush above already reported the failure


@dataclass
class Summary:
    """Counts and groups over every sample seen (resumed ones included); mergeable."""

    examples: int = 5
    keep_records: int = 200
    scanned: int = 0
    resumed: int = 0
    nonfinite: int = 0
    masked: int = 0
    fp16: int = 0
    errors: int = 0
    runs: int = 0
    intended: int = 0
    records: List[SampleRecord] = field(default_factory=list)
    _groups: Dict[Tuple[str, str], Group] = field(default_factory=dict)
    """(kind, node) -> its group so far; insertion order is first-seen order, the tie-break of groups().
    Groups are frozen: each update replaces the entry (which keeps its place in the dict)."""

    def add(self, record: SampleRecord, *, resumed: bool = False) -> None:
        if resumed:
            self.resumed += 1
        else:
            self.scanned += 1
            self.runs += record.runs
        if record.status == "error":
            self.errors += 1
            self._group("error", "(worker or input error)", "", record.sample, None, record.error or "")
        self.nonfinite += record.status == "nonfinite"
        self.masked += bool(record.masked)
        self.fp16 += bool(record.fp16)
        self.intended += bool(record.intended)
        for origin in (record.origins or ([record.origin] if record.origin else [])):
            self._group("origin", origin.node, origin.op_type, record.sample,
                        origin.hints[0].rule if origin.hints else None, origin.describe())
        for origin in record.masked:
            self._group("masked", origin.node, origin.op_type, record.sample,
                        origin.hints[0].rule if origin.hints else None, origin.describe())
        for event in record.fp16:
            self._group(event.rule, event.node, event.op_type, record.sample, event.rule, event.message)
        if record.status != "clean" and len(self.records) < self.keep_records:
            self.records.append(record)

    def _group(self, kind: str, node: str, op_type: str, sample: str, hint: Optional[str], message: str) -> None:
        key = (kind, node)
        group = self._groups.get(key) or Group(node=node, op_type=op_type, kind=kind, samples=0, hint=hint,
                                                message=message)
        examples = group.examples + [sample] if len(group.examples) < self.examples else group.examples
        self._groups[key] = replace(group, samples=group.samples + 1, examples=examples)

    def merge(self, other: "Summary") -> "Summary":
        """Fold another summary in (samples of `other` come after ours)."""
        for name in ("scanned", "resumed", "nonfinite", "masked", "fp16", "errors", "runs", "intended"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, theirs in other._groups.items():
            mine = self._groups.get(key)
            if mine is None:
                self._groups[key] = theirs  # appended: first seen after all of ours
            else:
                self._groups[key] = replace(mine, samples=mine.samples + theirs.samples,
                                            examples=(mine.examples + theirs.examples)[: self.examples])
        self.records = (self.records + other.records)[: self.keep_records]
        return self

    def groups(self) -> List[Group]:
        """The groups, by kind, then most samples first, then first seen (sorted() is stable)."""
        return sorted(self._groups.values(), key=lambda g: (KIND_ORDER.get(g.kind, 9), -g.samples))

    def iter_groups(self, kind: str) -> Iterator[Group]:
        return (g for g in self.groups() if g.kind == kind)
