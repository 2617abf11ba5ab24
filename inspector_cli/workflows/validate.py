"""`validate_model`: lint an ONNX model, family by family, into a `ValidateResult`.

Loading defects are findings (the file is the defect); each later family runs only when what it
needs is there (a parsed graph, safe external data, a supported IR version), and the result says
which families ran and why others did not.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

from ..config.validate import ValidateConfig
from ..core.graph import ModelGraph, load_model
from ..errors import UsageError
from ..results.base import Finding, ModelRef, file_sha256
from ..results.validate import AgainstSection, ValidateResult
from ..validate import against, checker, hints, integrity, quant, quant_range, runtime
from ..validate.catalog import RULES
from ..validate.context import Context, Reporter
from ..validate.loading import load_checked
from . import Progress, no_progress

FAMILY_ORDER = ("loading", "checker", "integrity", "runtime", "quantisation", "hints", "against")


def validate_model(model: Union[str, "os.PathLike[str]"], config: Optional[ValidateConfig] = None, *,
                   progress: Progress = no_progress) -> ValidateResult:
    """Validate the model file at `model`; raises `UsageError` only for a path that is not a file."""
    config = config or ValidateConfig()
    path = Path(model)
    if not path.exists():
        raise UsageError(f"{path}: no such file", hint="check the model path")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not an .onnx file", hint="pass the model file itself")
    families = [f for f in FAMILY_ORDER if f != "against" or config.against]
    reporter = Reporter(config)
    timings: Dict[str, float] = {}
    skipped: Dict[str, str] = {}
    other = load_model(config.against) if config.against else None  # a broken reference cannot be compared
    start = time.perf_counter()
    loaded = load_checked(path, reporter)
    timings["loading"] = time.perf_counter() - start
    progress(1, len(families), "loading")
    if loaded is None:
        skipped.update({f: "the model did not load" for f in families[1:]})
        ref = ModelRef(path=str(path), sha256=file_sha256(path), size_bytes=path.stat().st_size, role="model")
        return _result(config, [ref], reporter.findings, ["loading"], skipped, [], None, {}, timings)
    facts: Dict[str, object] = dict(config.runtime.to_dict())
    section: Optional[AgainstSection] = None
    checked = ["loading"]
    # onnxruntime builds its session and hashlib hashes the file without holding the GIL: both run
    # on a worker thread while the Python rules run here, so the session costs (almost) no wall time.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="mi-validate") as pool:
        digest = pool.submit(file_sha256, path)
        session = None
        if _session_wanted(reporter) and loaded.runtime_ok and loaded.weights_readable \
                and runtime.can_run_from_file(loaded.model, config.runtime):
            session = pool.submit(runtime.session_error, path, config.runtime, str(path))
        graph = ModelGraph.from_proto(loaded.model, path)
        _check_input_range_names(config, graph)
        ctx = Context(path, graph, config, reporter, weights_readable=loaded.weights_readable)
        if session is None:
            session = _start_session(ctx, loaded.runtime_ok, pool, facts, skipped)
        steps: Dict[str, Callable[[], None]] = {
            "checker": lambda: _checker(ctx, loaded.runtime_ok),
            "integrity": lambda: integrity.check_integrity(ctx),
            "runtime": lambda: _runtime(ctx, session, facts),
            "quantisation": lambda: _quantisation(ctx),
            "hints": lambda: hints.check_hints(ctx),
        }
        for done, family in enumerate(families[1:], start=2):
            began = time.perf_counter()
            if family == "against":
                assert other is not None
                section = against.check_against(ctx, other)
            else:
                steps[family]()
            timings[family] = time.perf_counter() - began
            checked.append(family)
            progress(done, len(families), family)
        model_ref = replace(ModelRef.of(graph, "model", hash_file=False), sha256=digest.result())
    if not loaded.weights_readable:
        ctx.notes.append("external data is missing or unsafe: tensor values were not read (NaN/Inf, "
                         "quantisation parameters and weight comparisons are incomplete)")
    models = [model_ref] + ([ModelRef.of(other, "against")] if other is not None else [])
    return _result(config, models, _sorted(reporter.findings, graph), checked, skipped, ctx.notes, section,
                   facts, timings)


def _start_session(ctx: Context, runtime_ok: bool, pool: ThreadPoolExecutor, facts: Dict[str, object],
                   skipped: Dict[str, str]) -> "Optional[Future[Optional[str]]]":
    """Submit the onnxruntime session when the runtime rules can use it; record why not otherwise."""
    if not _session_wanted(ctx.reporter):
        facts["session"] = "skipped: rules disabled"
    elif not runtime_ok:
        facts["session"] = "skipped: IR version not supported"
        skipped["runtime session"] = "the IR version is newer than supported (MI105)"
    elif not ctx.weights_readable:
        facts["session"] = "skipped: external data missing or unsafe"
        skipped["runtime session"] = "external data is missing or outside the model's folder"
    elif runtime.custom_domains(ctx):
        facts["session"] = "skipped: custom-op domains without a library"
    else:
        source = ctx.graph if ctx.graph.renamed_nodes else ctx.path
        return pool.submit(runtime.session_error, source, ctx.config.runtime, ctx.graph.display_name)
    return None


def _session_wanted(reporter: Reporter) -> bool:
    return any(reporter.enabled(r) for r in ("MI401", "MI402", "MI403", "MI404"))


def _checker(ctx: Context, runtime_ok: bool) -> None:
    checker.check_operators(ctx)
    if runtime_ok and ctx.weights_readable:
        checker.run_checker(ctx)
    checker.infer_strict(ctx)  # always: it also types every tensor for the later families


def _runtime(ctx: Context, session: "Optional[Future[Optional[str]]]", facts: Dict[str, object]) -> None:
    runtime.check_static(ctx)
    if session is not None:
        facts.update(runtime.report_session(ctx, session.result()))


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
