"""Shared result pieces: model references, findings, gate outcomes, and the result base class.

Results are plain data: frozen dataclasses that serialise with `to_dict` and come back with
`from_dict`, so a saved JSON re-renders exactly like a fresh run (`mi report`).
"""
from __future__ import annotations

import enum
import importlib
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
    graph_name: str = ""
    renamed_nodes: Dict[str, str] = field(default_factory=dict)
    """Nodes analysed under another name because theirs was taken (new -> original): only with
    `--rename-duplicate-nodes`; onnxruntime refuses the file itself (core/refusals.py)."""

    @classmethod
    def of(cls, graph: Any, role: str = "", hash_file: bool = True) -> "ModelRef":
        path = graph.path
        model = graph.model
        producer = " ".join(p for p in (model.producer_name, model.producer_version) if p)
        return cls(path=str(path) if path else graph.display_name,
                   sha256=file_sha256(path) if (path and hash_file) else None,
                   size_bytes=path.stat().st_size if path else model.ByteSize(),
                   opset=graph.opset, ir_version=model.ir_version, producer=producer, role=role,
                   graph_name=model.graph.name,
                   renamed_nodes={new: old for new, old in getattr(graph, "renamed_nodes", {}).items() if old})


def file_sha256(path: Path) -> str:
    """The file's sha256; usually already computed in the background since the model was loaded
    (core/filehash.py)."""
    from ..core.filehash import sha256

    return sha256(path)


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


@dataclass(frozen=True)
class Check:
    """One pass/fail check of a run, as CI sees it (a JUnit test case, a line of a run-to-run diff)."""

    name: str
    """Stable identity across runs, e.g. '--min-cosine 0.99 on logits' or 'MI201 on node Add_3'."""
    group: str
    passed: bool
    message: str = ""
    value: Optional[float] = None
    threshold: Optional[float] = None


@dataclass(frozen=True)
class NodeValues:
    """One per-tensor (or per-node) quantity of a result, in topological order where it has one."""

    metric: str
    higher_is_better: bool
    values: Dict[str, float]
    key: str = "tensor"
    """'tensor' (keys are output tensor names) or 'node' (keys are node names)."""
    unit: str = ""
    thresholds: List[float] = field(default_factory=list)
    """Boundaries for colouring (Model Explorer, HTML), from bad to good or as the metric defines."""


_KINDS: Dict[str, Type["Result"]] = {}


@dataclass(frozen=True)
class Result:
    """Base of every command's result. Subclasses set `kind` and implement `passed`/`summary`."""

    kind: ClassVar[str] = ""

    fingerprint: Dict[str, Any] = field(default_factory=dict, kw_only=True, compare=False, repr=False)
    """The environment of the run (core.fingerprint.run_fingerprint): written at the top of the JSON
    envelope, filled when the result is first written; keyword-only so subclasses keep their field order."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("kind"):  # a class defining its kind; a subclass inheriting one registers nothing
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

    def checks(self) -> List[Check]:
        """The run's pass/fail checks: every gate outcome, then every error-level finding.

        Kinds override this when their notion of a check differs (validate: findings at --fail-on).
        """
        checks: List[Check] = []
        for gate in getattr(self, "gates", []) or []:
            checks.append(Check(name=f"{gate.gate} on {gate.tensor}", group=f"{self.kind}.gates",
                                passed=gate.passed, message=gate.message(), value=gate.worst,
                                threshold=gate.threshold))
        for finding in getattr(self, "findings", []) or []:
            if finding.severity == Severity.ERROR:
                where = finding.node or finding.tensor or ""
                checks.append(Check(name=f"{finding.rule} {where}".strip(), group=f"{self.kind}.findings",
                                    passed=False, message=finding.message))
        return checks

    def node_values(self) -> List[NodeValues]:
        """Per-tensor or per-node numbers worth overlaying on the graph (Model Explorer, diffs)."""
        return []

    def to_dict(self) -> Dict[str, Any]:
        return to_jsonable(self)

    @classmethod
    def from_dict(cls: Type[R], data: Dict[str, Any]) -> R:
        return from_jsonable(cls, data)


def result_class(kind: str) -> Type[Result]:
    """The result class registered for `kind` (importing the result modules on first use)."""
    load_all_kinds()
    if kind not in _KINDS:
        raise KeyError(kind)
    return _KINDS[kind]


def known_kinds() -> List[str]:
    load_all_kinds()
    return sorted(_KINDS)


# One module per result kind; each registers its class by defining `kind`.
RESULT_MODULES = ("compare", "report_diff", "suite", "inputs", "profile", "probe", "validate", "nan_bisect",
                  "sequence", "inspect", "fix")


def load_all_kinds() -> None:
    """Import every result module, so that each kind is registered."""
    for name in RESULT_MODULES:
        importlib.import_module(f"{__package__}.{name}")
