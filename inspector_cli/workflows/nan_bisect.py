"""`nan_bisect`: the static pass, then every sample screened and its NaN/Inf explained."""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..inspection.rollups import attach_scopes
from ..batching import batch_runtime, check_executor, executor_plan, shared_samples
from ..core.capture import default_budget, plan_capture
from ..core.graph import ModelGraph
from ..core.masks import find_masks
from ..core.model_arg import ModelArg, as_graph
from ..core.refusals import require_loadable
from ..core.inputs import SampleSet, open_samples
from ..errors import MiError, UsageError
from ..executor.base import Executor, ExecutorSpec, WorkItem, make_shards
from ..executor.factory import make_executor
from ..core import failpoints
from ..core.interrupts import deferred_interrupt
from ..nanbisect.batch import JsonlLog, Summary, check_jsonl
from ..nanbisect.config import NanBisectConfig, Simulate
from ..nanbisect.findings import build_findings, intended_findings
from ..nanbisect.job import NanBisectJob, error_record
from ..nanbisect.locate import Locator
from ..nanbisect.model import PreparedModel, scan_runtime
from ..nanbisect.repro import write_bundle
from ..nanbisect.static import fp16_unsafe_weights, unintended_nonfinite_weights
from ..progress import Progress, no_progress
from ..results.base import ModelRef, file_sha256
from ..results.nan_bisect import NanBisectResult, WeightIssue
from ..placement import exposed_placement, plain_check_wanted, placement_findings, unchecked_note



def nan_bisect(model: ModelArg, config: Optional[NanBisectConfig] = None, *,
               progress: Progress = no_progress,
               on_static: Optional[Callable[[List[WeightIssue]], None]] = None) -> NanBisectResult:
    """Find where NaN/Inf values are born, for every configured sample.

    Runs the static pass over the weights, then screens each sample (streamed; in this process or
    in `config.executor.workers` worker processes) and explains every sample whose outputs hold NaN/Inf:
    the origin node, its input statistics and a rule-based hint. Each sample's record is appended
    to `config.jsonl` as it completes. Ctrl-C stops the run and returns what was done
    (`interrupted=True`). `on_static` receives the weights holding NaN/Inf as soon as they are
    known, before any sample runs. Raises `MiError` only when no result is possible.
    """
    config = config or NanBisectConfig()
    started = time.monotonic()
    check_executor(config.executor)
    check_jsonl(config.jsonl, resume=config.resume, overwrite=config.overwrite)  # before any work
    executor = make_executor(config.executor, WARM_MODULES)  # workers import while we load the model
    try:
        return _prepare_and_run(model, config, progress, on_static, executor, started)
    except BaseException:
        executor.abort()  # an error before or after the batch: do not wait for the workers
        raise
    finally:
        executor.close()


def _prepare_and_run(model: ModelArg, config: NanBisectConfig, progress: Progress,
                     on_static: Optional[Callable[[List[WeightIssue]], None]], executor: Executor,
                     started: float) -> NanBisectResult:
    owned = not isinstance(model, ModelGraph)
    graph = as_graph(model, lazy=True)  # weights stay in the file: nothing to externalise or re-serialise
    require_loadable(graph, config.runtime)  # before a renamed copy is externalised and searched
    hashing = _hash_in_background(graph)
    masks = find_masks(graph)
    static = unintended_nonfinite_weights(graph, masks)
    if on_static is not None and static:
        on_static(static)
    warnings: List[str] = fp16_unsafe_weights(graph) if config.simulate == Simulate.FP16 else []
    model_ref = ModelRef.of(graph, "model", hash_file=False)
    samples = open_samples(config.inputs, graph.inputs, config.synthetic)
    warnings.extend(samples.notes)
    budget = config.max_memory if config.max_memory is not None else default_budget()
    runtime = batch_runtime(config.runtime, config.executor)
    label = graph.display_name
    source = str(graph.path.resolve()) if graph.path is not None else None  # what remote workers load
    prepared = PreparedModel.load(graph, runtime) if owned else PreparedModel(graph, runtime)
    del graph
    try:
        scan_assignment, build_seconds = None, 0.0
        if samples.refs:
            scan_assignment, build_seconds = _check_loadable(prepared, _root_exposed(prepared, config, samples, budget))
        result = _run(prepared, config, samples, budget, static, warnings, model_ref, label, progress, started,
                      executor, source)
        result = _with_placement(result, prepared, config, scan_assignment, build_seconds)
        result = replace(result, findings=[*intended_findings(masks), *result.findings])
        result = attach_scopes(result, prepared.graph)
        return replace(result, models=[replace(model_ref, sha256=hashing.result())])
    finally:
        prepared.close()


def _with_placement(result: NanBisectResult, prepared: PreparedModel, config: NanBisectConfig,
                    scan: Optional[list], build_seconds: float) -> NanBisectResult:
    """Placement of the model (as deployed when the plain session is built: `plain_check_wanted`),
    the scan session's partition against it, and MI871."""
    check = plain_check_wanted(config.require_provider, build_seconds, result.elapsed_s)
    where = exposed_placement(prepared.graph, prepared.runtime, [scan] if scan is not None else [],
                              check_plain=check)
    warnings = result.warnings if check or scan is None else \
        [*result.warnings, *unchecked_note(prepared.runtime, build_seconds, result.elapsed_s)]
    return replace(result, placement=where.placement, partition=where.change, warnings=warnings,
                   findings=[*result.findings, *placement_findings([where.placement], config.require_provider)])


def _check_loadable(prepared: PreparedModel, root: Optional[Tuple[str, ...]]) -> Tuple[Optional[list], float]:
    """One session of the model, opened before the scan: a model onnxruntime refuses (duplicate
    names, a cycle, an unknown op, opset 99) is one `Error:` naming the model and the cause (exit 3),
    not an error record per sample (issue 15 item 16). With `root` (the checkpoints the first
    sample's scan exposes) it is that scan's session, kept for the search (issue 16: one session
    fewer per run); otherwise the model as it is, dropped. Returns that session's provider partition and
    its build's wall time."""
    from ..core.expose import serialized_with_outputs
    from ..core.runner import Session

    started, wall = time.thread_time(), time.perf_counter()  # thread time: a replay build's estimate (prebuild.py)
    data = serialized_with_outputs(prepared.graph, list(root or ()), keep_original=True)
    session = Session(data, scan_runtime(prepared.runtime), label=prepared.label, external_dir=prepared.external_dir)
    prepared.root_build_seconds = time.thread_time() - started
    built = time.perf_counter() - wall  # wall: a compiling provider builds on its own threads
    if root is not None:
        session.label = f"{prepared.label} (scan)"  # as `PreparedModel.open_full` names it
        prepared.preopened[("root", root)] = session
    return session.assignment(), built


def _root_exposed(prepared: PreparedModel, config: NanBisectConfig, samples: SampleSet,
                  budget: int) -> Optional[Tuple[str, ...]]:
    """What the in-process layered search's first root session exposes; None for other engines
    (full scan, worker processes) or when the first sample cannot be read (its record says why)."""
    if config.full_scan or not config.executor.in_process:
        return None
    try:
        feeds = samples.load(samples.refs[0])
    except MiError:
        return None
    locator = Locator(prepared, budget, config.checkpoints, expose_all_root=len(samples) == 1)
    return locator.root_plan(feeds).exposed


def _hash_in_background(graph: ModelGraph) -> "Future[Optional[str]]":
    """The model file's sha256, computed while the search runs (hashlib releases the GIL)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mi-sha256")
    future = pool.submit(lambda: file_sha256(graph.path) if graph.path else None)
    pool.shutdown(wait=False)
    return future


def _run(prepared: PreparedModel, config: NanBisectConfig, samples: SampleSet, budget: int,
         static: List[WeightIssue], warnings: List[str], model_ref: ModelRef, label: str,
         progress: Progress, started: float, executor: Executor, source: Optional[str]) -> NanBisectResult:
    log = JsonlLog(config.jsonl, resume=config.resume, overwrite=config.overwrite)
    summary = Summary(examples=config.examples, keep_records=config.keep_records)
    for record in log.previous:
        summary.add(record, resumed=True)
    done = log.done
    todo = [ref for ref in samples.refs if ref.id not in done]
    expose_all_root = len(samples) == 1
    plan = describe_plan(prepared, config, samples, budget, expose_all_root)
    spec = config.executor
    if not spec.in_process and prepared.run_path is None:
        raise UsageError("--workers needs the model as a file", hint="save the model, or use --workers 0")
    # Ray workers may run elsewhere: they load the original file (and externalise its weights in their
    # own temporary folder); local workers load this process's prepared copy.
    remote = spec.engine == "ray"
    job = NanBisectJob(model_path=(source if remote else prepared.run_path) or "", label=label, config=config,
                       runtime=prepared.runtime, budget=budget, samples=samples.subset([]),
                       expose_all_root=expose_all_root, prepared=prepared if spec.in_process else None,
                       externalise=remote, expected_samples=len(todo) if spec.in_process else 0)
    if remote:
        todo = shared_samples(samples.subset(todo)).refs
    interrupted = False
    items = (WorkItem(ref.id, ref) for ref in todo)
    try:
        for count, outcome in enumerate(executor.map(job, make_shards(items, config.shard_size)), start=1):
            record = outcome.value if outcome.ok else error_record(outcome.key, outcome.error or "failed")
            with deferred_interrupt():  # Ctrl-C between the two left the summary one record short
                log.write(record)
                summary.add(record)
            progress(count, len(todo), outcome.key)
            failpoints.hit("batch", count)
    except KeyboardInterrupt:
        interrupted = True
        executor.abort()
    finally:
        executor.close()
        log.close()
    repro = {} if interrupted or not config.repro_dir else write_repros(prepared, config, samples, summary, label)
    groups = summary.groups()
    return NanBisectResult(
        models=[model_ref], config=config.to_dict(), runtime=prepared.runtime.to_dict(), inputs=samples.describe(),
        plan={**plan, "workers": config.executor.workers, "repro": repro, **_engine(spec, executor)}, static=static,
        samples_total=len(samples),
        scanned=summary.scanned, resumed=summary.resumed, nonfinite=summary.nonfinite, masked=summary.masked,
        fp16=summary.fp16, errors=summary.errors, intended=summary.intended, groups=groups, records=summary.records,
        findings=build_findings(static, groups, summary), warnings=warnings, runs=summary.runs,
        interrupted=interrupted, jsonl=config.jsonl, elapsed_s=round(time.monotonic() - started, 3))


WARM_MODULES = ("numpy", "onnx", "onnxruntime", "inspector_cli.nanbisect.job")


def _engine(spec: ExecutorSpec, executor: Executor) -> Dict[str, Any]:
    """The engine in the plan, only when it is not the default (local runs keep their plan as it was)."""
    return {"executor": executor_plan(spec, executor)} if spec.engine != "local" else {}


def describe_plan(prepared: PreparedModel, config: NanBisectConfig, samples: SampleSet, budget: int,
                  expose_all_root: bool) -> Dict[str, Any]:
    """How samples shaped like the first one will be searched (recorded in the result)."""
    if not samples.refs:
        return {"budget_bytes": budget}
    feeds = samples.load(samples.refs[0])
    sizes = prepared.sizes(feeds)
    info: Dict[str, Any] = {"budget_bytes": budget, "tensors": len(sizes),
                            "all_exposed_bytes": sum(sizes.values()) * 2}
    if config.full_scan:
        capture = plan_capture([sizes[n] for n in prepared.topo.position], budget)
        info.update(strategy="full-scan", chunks=capture.runs_per_sample)
        return info
    root = Locator(prepared, budget, config.checkpoints, expose_all_root=expose_all_root).root_plan(feeds)
    info["strategy"] = root.strategy
    if root.plan is not None:
        singles = sum(1 for f in root.plan.frontiers if len(f) == 1)
        info.update(checkpoints=len(root.plan.cuts), single_tensor_cuts=singles, checkpoint_bytes=root.plan.bytes,
                    checkpoint_tensors=list(root.plan.exposed[:64]))
    return info


def write_repros(prepared: PreparedModel, config: NanBisectConfig, samples: SampleSet, summary: Summary,
                 label: str) -> Dict[str, str]:
    """One bundle per origin node, from its first example sample (deterministic)."""
    folder = Path(config.repro_dir or ".")
    refs = {ref.id: ref for ref in samples.refs}
    written: Dict[str, str] = {}
    for group in summary.groups():
        if group.kind not in ("origin", "masked") or group.node in written or not group.examples:
            continue
        ref = refs.get(group.examples[0])
        if ref is None or group.node not in prepared.graph.node_by_name:
            continue
        path = write_bundle(prepared, group.node, samples.load(ref), folder, sample=ref.id, model_label=label)
        written[group.node] = str(path)
    return written


def fp16_fallback_plan(result: NanBisectResult, reference: ModelArg, config: NanBisectConfig,
                       fallback: Any) -> NanBisectResult:
    """`--fallback-plan --reference fp32.onnx`: the fp32 block list (node_block_list of
    onnxconverter_common's float16 converter) so that no sample overflows and the targets hold,
    found by converting the fp32 reference again and verified on the same samples (issue 18)."""
    from ..remedy.compare_run import fp16_fallback, plan_findings
    from ..results.remedy import RemedySection

    graph = as_graph(reference)
    samples = open_samples(config.inputs, graph.inputs, config.synthetic)
    ids, feeds = [], []
    for sample_id, sample in samples:
        ids.append(sample_id)
        feeds.append(sample)
    # the graph is read in full there; --write-model must not land on the bisected model either
    section = fp16_fallback(graph, ids, feeds, config.runtime, fallback,
                            inputs=[Path(m.path) for m in result.models if m.path])
    return replace(result, remedy=RemedySection(fallback=section),
                   findings=[*result.findings, *plan_findings(section, fallback)])
