"""Trials of a remedy search: evaluated in this process or on `--workers`, remembered in a journal.

A trial is one model variant evaluated on every sample (`evaluate.Evaluator`). Independent trials (the
sensitivity of each candidate) go to the executor together: each worker opens the samples and the reference
outputs once (`TrialJob`) and evaluates the serialised models it is sent, in input order, so the search reads
the same answers whatever the number of workers. Every answer is appended to the journal (JSON lines, like
nan-bisect's), keyed by the variant; `--resume` reads it back and the search, deterministic, replays its
steps from it without running them again.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..errors import InferenceError, UsageError
from ..executor.base import ExecutorSpec, Job, Runner, WorkItem, make_shards
from .evaluate import Evaluation, Evaluator, Target

JOURNAL_KIND = "mi-fix-journal"


def evaluation_record(result: Evaluation) -> Dict[str, Any]:
    return {"metrics": result.metrics, "nonfinite_samples": list(result.nonfinite_samples),
            "latency_ms": result.latency_ms, "shortfall": result.shortfall, "meets": result.meets,
            "partial": result.partial}


def evaluation_from_record(record: Dict[str, Any]) -> Evaluation:
    return Evaluation(dict(record["metrics"]), list(record["nonfinite_samples"]), float(record["latency_ms"]),
                      shortfall=float(record["shortfall"]), meets=bool(record["meets"]),
                      partial=int(record.get("partial", 0)))


@dataclass(frozen=True)
class TrialJob(Job):
    """What a worker needs to evaluate variants: the samples, the reference outputs, the targets."""

    samples: Tuple[TensorMap, ...]
    sample_ids: Tuple[str, ...]
    targets: Tuple[Target, ...]
    runtime: RuntimeConfig
    reference: Tuple[TensorMap, ...]
    extra: Any = None
    """Anything else the evaluator judges with (the labels of an accuracy target)."""

    def open(self) -> Runner:
        evaluator = Evaluator(self.samples, self.sample_ids, self.targets, self.runtime,
                              reference=list(self.reference), extra=self.extra)
        return _TrialRunner(evaluator)


class _TrialRunner(Runner):
    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    def run_item(self, item: WorkItem) -> Any:
        model, label, early = item.payload
        try:
            return evaluation_record(self.evaluator.evaluate(model, label=label, early_stop=early))
        except (InferenceError, ValueError) as exc:
            return {"error": str(exc).splitlines()[0][:300]}


class Journal:
    """The answers of a search, one JSON line each after a header naming what was searched (`identity`)."""

    def __init__(self, path: Path, identity: Dict[str, Any], resume: bool) -> None:
        self.path = Path(path)
        self.identity = identity
        self.records: Dict[str, Dict[str, Any]] = {}
        if resume and self.path.is_file():
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("w") as handle:
                handle.write(json.dumps({"kind": JOURNAL_KIND, **identity}) + "\n")

    def _load(self) -> None:
        lines = self.path.read_text().splitlines()
        header = json.loads(lines[0]) if lines else {}
        if header.get("kind") != JOURNAL_KIND:
            raise UsageError(f"--resume {self.path}: not a journal of mi fix")
        differs = [k for k, v in self.identity.items() if header.get(k) != v]
        if differs:
            raise UsageError(f"--resume {self.path}: the journal is of another search ({differs[0]} differs)",
                             hint="give the same models, samples, targets and remedies, or a new --journal")
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except ValueError:
                break  # a line cut by the interruption: the trials after it run again
            self.records[entry["key"]] = entry["record"]

    def get(self, key: str) -> Optional[Dict[str, Any]]:
        return self.records.get(key)

    def add(self, key: str, record: Dict[str, Any]) -> None:
        self.records[key] = record
        with self.path.open("a") as handle:
            handle.write(json.dumps({"key": key, "record": record}) + "\n")


def identity_of(models: Iterable[bytes], sample_ids: Sequence[str], targets: Sequence[Target],
                settings: Dict[str, Any]) -> Dict[str, Any]:
    """What a journal must match to be resumed: the models' and samples' digests, the targets, the settings."""
    digest = hashlib.sha256()
    for model in models:
        digest.update(hashlib.sha256(model).digest())
    return {"models": digest.hexdigest()[:32],
            "samples": hashlib.sha256("\n".join(sample_ids).encode()).hexdigest()[:32],
            "targets": [t.describe() for t in targets], **settings}


@dataclass
class Trials:
    """Evaluates variants for a search: cached, journalled, independent ones on the executor together."""

    evaluator: Evaluator
    executor: ExecutorSpec = ExecutorSpec()
    journal: Optional[Journal] = None
    replayed: int = 0
    """Answers read back from the journal instead of run."""
    failed: Dict[str, str] = field(default_factory=dict)

    def run(self, variants: Sequence[Tuple[str, "bytes | None", str]], early_stop: bool = False) -> List[Evaluation]:
        """Evaluations of (key, serialised model or None when it could not be built, label), in order. A model
        onnxruntime refuses misses every target (its reason in `failed`). `early_stop`: a trial may stop once a
        target is out of reach (a journal record that stopped early is run again when it may not)."""
        out: Dict[str, Evaluation] = {}
        todo: List[Tuple[str, bytes, str]] = []
        for key, model, label in variants:
            record = self.journal.get(key) if self.journal is not None else None
            if record is not None and record.get("partial") and not early_stop:
                record = None
            if record is not None:
                self.replayed += 1
                self.evaluator.runs += 1  # a replayed trial counts against the budget as the first run did
                out[key] = self._from(key, record)
            elif model is None:
                out[key] = self._from(key, {"error": self.failed.get(key, "could not be built")})
            else:
                todo.append((key, model, label))
        for (key, _model, _label), record in zip(todo, self._evaluate(todo, early_stop)):
            if self.journal is not None:
                self.journal.add(key, record)
            out[key] = self._from(key, record)
        return [out[key] for key, _m, _l in variants]

    def _from(self, key: str, record: Dict[str, Any]) -> Evaluation:
        if "error" in record:
            self.failed[key] = record["error"]
            return Evaluation({}, [], 0.0, shortfall=float("inf"), meets=False)
        return evaluation_from_record(record)

    def _evaluate(self, todo: List[Tuple[str, bytes, str]], early: bool) -> List[Dict[str, Any]]:
        if len(todo) <= 1 or self.executor.in_process:
            return [_TrialRunner(self.evaluator).run_item(WorkItem(key, (model, label, early)))
                    for key, model, label in todo]
        from ..executor.factory import make_executor

        ev = self.evaluator
        job = TrialJob(tuple(ev.samples), tuple(ev.sample_ids), tuple(ev.targets), ev.runtime,
                       tuple(ev.reference), ev.extra)
        items = [WorkItem(key, (model, label, early)) for key, model, label in todo]
        records: List[Dict[str, Any]] = []
        with make_executor(self.executor) as executor:
            for outcome in executor.map(job, make_shards(items, 1)):
                records.append(outcome.value if outcome.ok else {"error": outcome.error or "worker failed"})
        ev.runs += len(todo)
        ev.inferences += len(todo) * len(ev.samples)
        return records
