"""The onnxruntime session wrapper. onnxruntime is imported lazily (here, and by core/providers.py for provider resolution)."""
from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import InferenceError, UsageError
from . import elemtypes, failpoints
from .ortlog import log_severity
from .placement import RECORD_ASSIGNMENT, Subgraph, read_assignment
from .providers import PROVIDER_ALIASES, plan_providers, provider_name  # noqa: F401 - re-exported
from .types import TensorInfo, TensorMap, numpy_dtype_from_ort

if TYPE_CHECKING:  # pragma: no cover
    import onnxruntime as ort

    from .graph import ModelGraph


class OptLevel(str, enum.Enum):
    """onnxruntime graph optimisation level (`--opt-level`)."""

    DISABLE = "disable"
    BASIC = "basic"
    EXTENDED = "extended"
    ALL = "all"


@dataclass(frozen=True)
class RuntimeConfig:
    """How onnxruntime runs a model; the same settings apply to both models of a comparison."""

    providers: Tuple[str, ...] = ("cpu",)
    opt_level: OptLevel = OptLevel.ALL
    intra_op_threads: Optional[int] = None
    inter_op_threads: Optional[int] = None
    custom_op_libs: Tuple[str, ...] = ()
    session_config: Tuple[Tuple[str, str], ...] = field(default=())
    """Extra `SessionOptions.add_session_config_entry` pairs (advanced)."""
    device: Optional[str] = None
    """`--device cpu|gpu|npu`: each provider's device among onnxruntime's EP devices (core/providers.py)."""
    provider_options: Tuple[Tuple[str, str, str], ...] = ()
    """`--provider-option PROVIDER:KEY=VALUE` as (provider, key, value)."""
    ep_libraries: Tuple[Tuple[str, str], ...] = ()
    """`--ep-library NAME=PATH`: plugin provider libraries on disk, as (name, absolute path)."""
    ep_policy: Optional[str] = None
    """`--ep-policy`: onnxruntime's device selection policy instead of named providers."""

    rename_duplicate_nodes: bool = False
    """Analyse a model whose nodes share names (onnxruntime refuses the file) as the copy mi renamed
    (`--rename-duplicate-nodes`; core/refusals.py). Off: such a model stops every command that runs it."""

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "providers": list(self.providers),
            "opt_level": self.opt_level.value,
            "intra_op_threads": self.intra_op_threads,
            "inter_op_threads": self.inter_op_threads,
            "custom_op_libs": list(self.custom_op_libs),
        }
        from .providers import runtime_facts  # what the providers resolved to: package, version, device

        out.update(runtime_facts(self))
        if self.rename_duplicate_nodes:  # recorded only when asked: the result analysed a renamed copy
            out["rename_duplicate_nodes"] = True
        return out

    def replace(self, **changes: Any) -> "RuntimeConfig":
        from dataclasses import replace

        return replace(self, **changes)

    def without_spinning(self) -> "RuntimeConfig":
        """This runtime with onnxruntime's idle worker threads sleeping, unless the user chose.

        Whenever something else needs the cores between two runs (statistics in another thread,
        other worker processes), spinning threads compete with it (measured: a third less wall time
        for probe on ResNet-50 with 2 cores).
        """
        if any(key == SPINNING for key, _ in self.session_config):
            return self
        return self.replace(session_config=(*self.session_config, (SPINNING, "0")))


    def spinning_only_in_runs(self) -> "RuntimeConfig":
        """This runtime with onnxruntime's idle worker threads spinning inside a run only (they sleep
        once a run ends), unless the user chose a spinning setting. For sessions that take turns (the
        two models of a comparison, a scan and its replays): a session's threads that spun after its
        run took a core from the next session's run and from mi's own work between runs. The values
        are the same (spinning only decides how idle threads wait)."""
        if any(key in (SPINNING, SPIN_STOP) for key, _ in self.session_config):
            return self
        return self.replace(session_config=(*self.session_config, (SPIN_STOP, "1")))


SPINNING = "session.intra_op.allow_spinning"
"""onnxruntime's session option for busy-waiting idle intra-op threads."""
SPIN_STOP = "session.force_spinning_stop"
"""onnxruntime's session option that stops the idle threads' busy-waiting at the end of each run."""


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_only(runtime: RuntimeConfig) -> bool:
    """Whether CPU is the only execution provider `runtime` asks for: no node can then move between
    providers, so placement is all CPU without reading it twice (docs/providers.md)."""
    if runtime.ep_policy:  # onnxruntime's policy may choose any provider
        return False
    return all(provider_name(p) == "CPUExecutionProvider" for p in runtime.providers)


def resolve_providers(names: Sequence[str]) -> List[str]:
    """Map `cuda,cpu` style names to onnxruntime provider names, checking they are available (built
    in, or from a plugin package: core/providers.py)."""
    return plan_providers(RuntimeConfig(providers=tuple(names) or ("cpu",))).names or ["CPUExecutionProvider"]


def _session_options(runtime: RuntimeConfig, external_dir: Optional[Path]) -> "ort.SessionOptions":
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = {
        OptLevel.DISABLE: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        OptLevel.BASIC: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        OptLevel.EXTENDED: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        OptLevel.ALL: ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[OptLevel(runtime.opt_level)]
    if runtime.intra_op_threads:
        options.intra_op_num_threads = runtime.intra_op_threads
    if runtime.inter_op_threads:
        options.inter_op_num_threads = runtime.inter_op_threads
    options.log_severity_level = log_severity()  # onnxruntime's warnings go to our result, not the terminal
    for lib in runtime.custom_op_libs:
        if not Path(lib).is_file():
            raise UsageError(f"custom-op library '{lib}' not found")
        try:
            options.register_custom_ops_library(str(lib))
        except Exception as exc:  # onnxruntime raises its own exception types
            raise InferenceError(f"custom-op library '{lib}' could not be registered: {_first_line(exc)}") from exc
    if external_dir is not None:
        # Lets a model serialised from memory find its external weights in the original folder.
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(external_dir))
    # Where each node runs (core/placement.py): kept by onnxruntime at session build, read for free.
    options.add_session_config_entry(RECORD_ASSIGNMENT, "1")
    for key, value in runtime.session_config:
        options.add_session_config_entry(key, value)
    return options


_ORT_PREFIX = re.compile(r"\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*")
_LOAD_PREFIX = re.compile(r"^Load model from .*? failed:\s*", re.DOTALL)
_SOURCE_LOCATION = re.compile(r"(?:^|\s)/?[\w./+-]+\.(?:h|hpp|cc|cpp|cu):\d+\s+")
MESSAGE_LIMIT = 300


def _first_line(exc: BaseException) -> str:
    """onnxruntime's message reduced to what names the node, op or path.

    Its messages start with '[ONNXRuntimeError] : 1 : FAIL : ', 'Load model from X failed:' and a
    C++ source location followed by a whole function signature ('model_load_utils.h:46 void
    onnxruntime::...(const std::unordered_map<...>&, ...)'): the cause ('Opset 99 is under
    development') only comes after ~300 characters. Those parts are dropped, the rest is one line.
    """
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    text = _LOAD_PREFIX.sub("", _ORT_PREFIX.sub("", text))
    for _ in range(3):  # nested exceptions repeat the location: 'X: [ONNXRuntimeError] ... file.cc:12 f(...)'
        match = _SOURCE_LOCATION.search(text)
        if not match:
            break
        text = (text[:match.start()] + " " + _skip_signature(text[match.end():])).strip()
    if len(text) > MESSAGE_LIMIT:
        text = text[:MESSAGE_LIMIT].rstrip() + "..."
    return text or type(exc).__name__


def _skip_signature(text: str) -> str:
    """Drop a leading C++ signature 'ret ns::f(args...) const' (balanced parentheses)."""
    start = text.find("(")
    if start < 0 or start > 200 or "::" not in text[:start] or ". " in text[:start]:
        return text  # no qualified C++ name before the parenthesis: not a signature
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                rest = text[index + 1:].lstrip()
                return rest[len("const"):].lstrip() if rest.startswith("const ") else rest
    return text


ModelSource = Union[bytes, str, os.PathLike]


class Session:
    """One onnxruntime session with the names, types and error reporting `mi` needs."""

    def __init__(self, source: ModelSource, runtime: RuntimeConfig = RuntimeConfig(), *,
                 label: str = "model", external_dir: Optional[Path] = None,
                 options_hook: Optional[Any] = None) -> None:
        import onnxruntime as ort

        self.label = label
        self.runtime = runtime
        # The environment-wide logger reports model loading (e.g. a bad external-data offset).
        ort.set_default_logger_severity(log_severity())
        options = _session_options(runtime, external_dir)
        if options_hook is not None:
            options_hook(options)
        self.options = options
        plan = plan_providers(runtime)
        by_name = plan.configure(options)  # plugin providers by device, or a policy (core/providers.py)
        try:
            model_arg = source if isinstance(source, bytes) else str(source)
            failpoints.hit("session")
            failpoints.slow("session")  # the signal tests' slow build (core/failpoints.py)
            with plan.building():
                self._session = ort.InferenceSession(model_arg, sess_options=options, **by_name)
        except Exception as exc:
            raise InferenceError(f"{label}: onnxruntime could not load the model: {_first_line(exc)}",
                                 hint=plan.hint() or "run 'mi validate' on it for details") from exc
        if plan.policy:
            plan.selected = list(self._session.get_providers())
        self.inputs: List[TensorInfo] = []
        self.input_dtypes: Dict[str, Optional[np.dtype]] = {}
        for arg in self._session.get_inputs():
            self.input_dtypes[arg.name] = numpy_dtype_from_ort(arg.type)
        self.output_names: List[str] = [o.name for o in self._session.get_outputs()]
        # Outputs of a type numpy lacks (bfloat16, float8, int4...): read through core/elemtypes.py.
        self.typed_outputs: Dict[str, int] = elemtypes.typed_outputs(self._session.get_outputs())

    @property
    def ort_session(self) -> "ort.InferenceSession":
        return self._session

    @property
    def input_names(self) -> List[str]:
        return list(self.input_dtypes)

    def run(self, feeds: Mapping[str, np.ndarray], outputs: Optional[Sequence[str]] = None,
            *, sample: str = "") -> TensorMap:
        """Run once; returns name -> array for `outputs` (all outputs by default)."""
        names = list(outputs) if outputs is not None else self.output_names
        try:
            if self.typed_outputs or any(elemtypes.is_typed(v) for v in feeds.values()):
                values = elemtypes.run(self._session, names, feeds, self.typed_outputs)
            else:
                values = self._session.run(names, dict(feeds))
        except Exception as exc:
            where = f" on sample {sample}" if sample else ""
            raise InferenceError(f"{self.label}: inference failed{where}: {_first_line(exc)}") from exc
        return dict(zip(names, values))

    @property
    def providers(self) -> List[str]:
        """The providers this session was built with, in priority order (onnxruntime's names)."""
        return list(self._session.get_providers())

    def assignment(self) -> Optional[List[Subgraph]]:
        """onnxruntime's partitions of this session: (provider, [(node, op type)]) each."""
        return read_assignment(self._session)

    def end_profiling(self) -> str:
        return self._session.end_profiling()


def open_session(graph: "ModelGraph", runtime: RuntimeConfig = RuntimeConfig(), *,
                 extra_outputs: Sequence[str] = (), keep_outputs: bool = True,
                 label: Optional[str] = None, options_hook: Optional[Any] = None) -> Session:
    """A session for `graph`, optionally with intermediate tensors exposed as outputs.

    The in-memory proto (with our deterministic node names) is what runs; its external weights are
    read by onnxruntime from the model's folder, so large models are never copied in memory.
    """
    from .expose import serialized_with_outputs
    from .refusals import require_loadable

    require_loadable(graph, runtime, label=label)  # never a session on a copy onnxruntime would not load
    data = serialized_with_outputs(graph, list(extra_outputs), keep_original=keep_outputs)
    external_dir = graph.folder.resolve() if graph.folder is not None and graph.uses_external_data else None
    return Session(data, runtime, label=label or graph.display_name, external_dir=external_dir,
                   options_hook=options_hook)


def open_sessions(requests: Sequence[Tuple["ModelGraph", RuntimeConfig, str]]) -> List[Session]:
    """`open_session(graph, runtime, label=label)` for each request, built side by side on threads.

    onnxruntime releases the GIL while it builds a session (graph optimisation, weight prepacking:
    0.1-1.4 s each on MobileNetV2/ResNet-50), on one core; two models compared need not wait for
    each other. The sessions are then used from the caller's thread. The first request that fails
    raises (in request order), as one `open_session` after another would; the others are dropped.
    Graphs must be distinct objects (one proto cannot be serialised by two threads at once).
    The threads are `core.background`'s: a Ctrl-C while they build is raised at once, and the
    CLI's exit point, not a pool's shutdown, deals with the builds still running (issue 40).
    """
    if len(requests) < 2:
        return [open_session(graph, runtime, label=label) for graph, runtime, label in requests]
    from functools import partial

    from . import background

    return background.run_all([partial(open_session, graph, runtime, label=label)
                               for graph, runtime, label in requests], name="mi-session")


def kernel_registry(providers: Sequence[str] = ("CPUExecutionProvider",)
                    ) -> Dict[Tuple[str, str], List[Tuple[int, int, Dict[str, List[str]]]]]:
    """(domain, op type) -> [(first opset, last opset, type constraints)] of the installed onnxruntime's kernels.

    Read from onnxruntime's kernel registry (a private but long-standing binding); empty when the
    build does not expose it, so callers must treat "absent" as "unknown", not "unsupported".
    """
    try:
        from onnxruntime.capi import _pybind_state as binding

        defs = binding.get_all_opkernel_def()
    except Exception:  # an onnxruntime build without the binding
        return {}
    wanted = set(providers)
    table: Dict[Tuple[str, str], List[Tuple[int, int, Dict[str, List[str]]]]] = {}
    for kernel in defs:
        if kernel.provider not in wanted:
            continue
        first, last = kernel.version_range
        table.setdefault((kernel.domain, kernel.op_name), []).append(
            (int(first), int(last), {k: list(v) for k, v in kernel.type_constraints.items()}))
    return table
