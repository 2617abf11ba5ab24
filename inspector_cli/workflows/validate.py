"""`validate_model`: lint an ONNX model, family by family, into a `ValidateResult`.

Loading defects are findings (the file is the defect); each later family runs only when what it
needs is there (a parsed graph, safe external data, a supported IR version), and the result says
which families ran and why others did not.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

from ..core import background
from ..core.graph import ModelGraph, load_model
from ..errors import UsageError
from ..progress import Progress, no_progress
from ..results.base import Finding, ModelRef, file_sha256
from ..results.validate import AgainstSection, ValidateResult
from ..validate import against, checker, hints, integrity, quant, quant_range, runtime
from ..validate.catalog import RULES
from ..validate.config import ValidateConfig
from ..validate.context import Context, Reporter
from ..validate.loading import Loaded, load_checked

FAMILY_ORDER = ("loading", "checker", "integrity", "runtime", "quantisation", "hints", "against")
FAMILY_PREFIX = {"checker": "2", "integrity": "3", "runtime": "4", "quantisation": "5", "hints": "6"}


def validate_model(model: Union[str, "os.PathLike[str]"], config: Optional[ValidateConfig] = None, *,
                   progress: Progress = no_progress) -> ValidateResult:
    """Validate the model file at `model`; raises `UsageError` only for a path that is not a file."""
    config = config or ValidateConfig()
    path = Path(model)
    if not path.exists():
        raise UsageError(f"{path}: no such file", hint="check the model path")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not an .onnx file", hint="pass the model file itself")
    run = _Run(config, path, progress, [f for f in FAMILY_ORDER if f != "against" or config.against])
    other = load_model(config.against) if config.against else None  # a broken reference cannot be compared
    start = time.perf_counter()
    loaded = load_checked(path, run.reporter)
    run.timings["loading"] = time.perf_counter() - start
    progress(1, len(run.families), "loading")
    if loaded is None:
        run.skipped.update({f: "the model did not load" for f in run.families[1:]})
        ref = ModelRef(path=str(path), sha256=file_sha256(path), size_bytes=path.stat().st_size, role="model")
        return _result(config, [ref], run.reporter.findings, ["loading"], run.skipped, [], None, {}, run.timings)
    # onnxruntime builds its session, and hashlib hashes the file, without holding the GIL, so the
    # Python rules run on one worker thread meanwhile. The session stays on this (main) thread:
    # onnxruntime runs markedly slower on a fresh thread (new allocator arenas, page faults).
    background.import_native_first()  # both threads use onnxruntime (the session; MI401's kernel registry)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mi-validate") as pool:
        wanted = run.session_wanted(loaded.runtime_ok, loaded.weights_readable)
        if wanted and runtime.can_run_from_file(loaded.model, config.runtime):
            rules = pool.submit(run.families_on, loaded, None)
            error = run.timed_session(path)
        else:
            graph = ModelGraph.from_proto(loaded.model, path)
            context = run.context(loaded, graph)
            if wanted and runtime.custom_domains(context):
                run.facts["session"] = "skipped: custom-op domains without a library"
                wanted = False
            rules = pool.submit(run.families_on, loaded, context)
            # a renamed copy only for unnamed nodes (onnxruntime's message then uses mi's names): a file whose
            # nodes share names is what onnxruntime refuses, and what validate must say (MI308, issue 41)
            renamed = graph.renamed_nodes and not graph.duplicate_node_names()
            error = run.timed_session(graph if renamed else path) if wanted else None
        digest = file_sha256(path)  # hashlib also releases the GIL: this thread's second job
        ctx = rules.result()
    if run.session_done:
        run.facts.update(runtime.report_session(ctx, error))  # after the rules: duplicates are known
    # where onnx's checker and onnxruntime disagree, onnxruntime's session decides (issue 41)
    run.reporter.settle({"created": True, "failed": False}.get(str(run.facts.get("session"))))
    model_ref = replace(ModelRef.of(ctx.graph, "model", hash_file=False), sha256=digest)
    if not loaded.weights_readable:
        ctx.notes.append("external data is missing or unsafe: tensor values were not read (NaN/Inf, "
                         "quantisation parameters and weight comparisons are incomplete)")
    models = [model_ref] + ([ModelRef.of(other, "against")] if other is not None else [])
    section = against.check_against(ctx, other) if other is not None else None
    if other is not None:
        run.checked.append("against")
        progress(len(run.families), len(run.families), "against")
    return _result(config, models, _sorted(run.reporter.findings, ctx.graph), run.checked, run.skipped, ctx.notes,
                   section, run.facts, run.timings)


class _Run:
    """The state of one validation, shared by the main thread (session) and the worker (rules)."""

    def __init__(self, config: ValidateConfig, path: Path, progress: Progress, families: List[str]) -> None:
        self.config, self.path, self.progress, self.families = config, path, progress, families
        self.reporter = Reporter(config)
        self.timings: Dict[str, float] = {}
        self.skipped: Dict[str, str] = {}
        self.facts: Dict[str, object] = dict(config.runtime.to_dict())
        self.checked = ["loading"]
        self.session_done = False

    def session_wanted(self, runtime_ok: bool, readable: bool) -> bool:
        """Whether to create a session; records why not in the result otherwise."""
        if not _session_wanted(self.reporter):
            self.facts["session"] = "skipped: rules disabled"
        elif not runtime_ok:
            self.facts["session"] = "skipped: IR version not supported"
            self.skipped["runtime session"] = "the IR version is newer than supported (MI105)"
        elif not readable:
            self.facts["session"] = "skipped: external data missing or unsafe"
            self.skipped["runtime session"] = "external data is missing or outside the model's folder"
        else:
            return True
        return False

    def timed_session(self, source: Union[Path, ModelGraph]) -> Optional[str]:
        began = time.perf_counter()
        error = runtime.session_error(source, self.config.runtime, str(self.path))
        self.timings["session"] = time.perf_counter() - began
        self.session_done = True
        return error

    def context(self, loaded: Loaded, graph: ModelGraph) -> Context:
        _check_input_range_names(self.config, graph)
        return Context(self.path, graph, self.config, self.reporter, weights_readable=loaded.weights_readable)

    def families_on(self, loaded: Loaded, ctx: Optional[Context]) -> Context:
        """Every rule family but loading and --against, in order (on the worker thread)."""
        ctx = ctx or self.context(loaded, ModelGraph.from_proto(loaded.model, self.path))
        steps: Dict[str, Callable[[], None]] = {
            "checker": lambda: _checker(ctx, loaded.runtime_ok),  # type: ignore[arg-type]
            "integrity": lambda: integrity.check_integrity(ctx),  # type: ignore[arg-type]
            "runtime": lambda: runtime.check_static(ctx),  # type: ignore[arg-type]
            "quantisation": lambda: _quantisation(ctx),  # type: ignore[arg-type]
            "hints": lambda: hints.check_hints(ctx),  # type: ignore[arg-type]
        }
        for done, family in enumerate(self.families[1:], start=2):
            if family not in steps:
                continue
            began = time.perf_counter()
            if self.reporter.any_enabled(f"MI{FAMILY_PREFIX[family]}"):
                steps[family]()
                self.checked.append(family)
            else:
                self.skipped[family] = "all its rules are disabled"
                if family == "checker":
                    checker.infer_strict(ctx)  # still types every tensor for the other families
            self.timings[family] = time.perf_counter() - began
            self.progress(done, len(self.families), family)
        return ctx


def _session_wanted(reporter: Reporter) -> bool:
    return any(reporter.enabled(r) for r in ("MI401", "MI402", "MI403", "MI404"))


def _checker(ctx: Context, runtime_ok: bool) -> None:
    checker.check_operators(ctx)
    if runtime_ok and ctx.weights_readable:
        checker.run_checker(ctx)
    checker.infer_strict(ctx)  # always: it also types every tensor for the later families


def _quantisation(ctx: Context) -> None:
    quant.check_parameters(ctx)
    quant.check_pairs(ctx)
    quant_range.check_input_ranges(ctx)
    quant.check_coverage(ctx)


def _check_input_range_names(config: ValidateConfig, graph: ModelGraph) -> None:
    for declared in config.input_ranges:
        if declared.name and declared.name not in graph.input_names:
            raise UsageError(f"--input-range {declared.describe()}: the model has no input '{declared.name}'",
                             hint=f"inputs: {', '.join(graph.input_names) or 'none'}")


def _sorted(findings: List[Finding], graph: ModelGraph) -> List[Finding]:
    def key(f: Finding) -> tuple:
        node = graph.node_by_name.get(f.node or "")
        return (-f.severity.rank, f.rule, node.order if node else -1)
    return sorted(findings, key=key)


def _result(config: ValidateConfig, models: List[ModelRef], findings: List[Finding], checked: List[str],
            skipped: Dict[str, str], notes: List[str], section: Optional[AgainstSection],
            facts: Dict[str, object], timings: Dict[str, float]) -> ValidateResult:
    fired = sorted({f.rule for f in findings})
    return ValidateResult(
        models=models, config=config.to_dict(), findings=findings, fail_on=config.fail_on,
        rules=[RULES[r] for r in fired], checked=checked, skipped=skipped, notes=list(notes),
        against=section,
        runtime=facts or config.runtime.to_dict(), timings={k: round(v, 4) for k, v in timings.items()})
