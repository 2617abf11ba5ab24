"""Shared result pieces: model references, findings, gate outcomes, and the result base class.

Results are plain data: frozen dataclasses that serialise with `to_dict` and come back with
`from_dict`, so a saved JSON re-renders exactly like a fresh run (`mi report`).
"""
from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Optional, Type, TypeVar

from ..errors import EXIT_GATE_FAILED, EXIT_OK
from .codec import from_jsonable, to_jsonable

R = TypeVar("R", bound="Result")


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 2, "warning": 1, "info": 0}[self.value]


@dataclass(frozen=True)
class ModelRef:
    """Which model a result is about: path, content hash and a few facts."""

    path: str
    sha256: Optional[str] = None
    size_bytes: int = 0
    opset: int = 0
    ir_version: int = 0
    producer: str = ""
    role: str = ""

    @classmethod
    def of(cls, graph: Any, role: str = "", hash_file: bool = True) -> "ModelRef":
        path = graph.path
        model = graph.model
        producer = " ".join(p for p in (model.producer_name, model.producer_version) if p)
        return cls(path=str(path) if path else graph.display_name,
                   sha256=file_sha256(path) if (path and hash_file) else None,
                   size_bytes=path.stat().st_size if path else model.ByteSize(),
                   opset=graph.opset, ir_version=model.ir_version, producer=producer, role=role)


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Finding:
    """A defect or observation about a model or a run; `rule` is a stable ID such as MI201."""

    rule: str
    severity: Severity
    message: str
    node: Optional[str] = None
    tensor: Optional[str] = None
    hint: Optional[str] = None
    data: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GateOutcome:
    """How one gate fared on one tensor over all samples."""

    gate: str
    """The gate as written, e.g. '--min-cosine 0.99'."""
    metric: str
    op: str
    threshold: float
    tensor: str
    passed: bool
    worst: Optional[float] = None
    failed_samples: int = 0
    total_samples: int = 0
    examples: List[str] = field(default_factory=list)
    applicable: bool = True
    scope: str = "output"
    """'output' for model outputs, 'layer' for intermediate tensors."""

    def message(self) -> str:
        if not self.applicable:
            return f"{self.gate} on '{self.tensor}': not applicable ({self.metric} is undefined for this tensor)"
        state = "passed" if self.passed else f"failed on {self.failed_samples}/{self.total_samples} samples"
        worst = "n/a" if self.worst is None else f"{self.worst:.6g}"
        return f"{self.gate} on '{self.tensor}': {state} (worst {self.metric} {worst} vs {self.op} {self.threshold:g})"


_KINDS: Dict[str, Type["Result"]] = {}


@dataclass(frozen=True)
class Result:
    """Base of every command's result. Subclasses set `kind` and implement `passed`/`summary`."""

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            _KINDS[cls.kind] = cls

    @property
    def passed(self) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_GATE_FAILED

    def summary(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def model_refs(self) -> List[ModelRef]:
        return list(getattr(self, "models", []))

    def to_dict(self) -> Dict[str, Any]:
        return to_jsonable(self)

    @classmethod
    def from_dict(cls: Type[R], data: Dict[str, Any]) -> R:
        return from_jsonable(cls, data)


def result_class(kind: str) -> Type[Result]:
    """The result class registered for `kind` (importing the result modules on first use)."""
    from . import load_all_kinds

    load_all_kinds()
    if kind not in _KINDS:
        raise KeyError(kind)
    return _KINDS[kind]


def known_kinds() -> List[str]:
    from . import load_all_kinds

    load_all_kinds()
    return sorted(_KINDS)
