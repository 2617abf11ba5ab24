"""`mi compare` beyond the comparison: fallback plan, optimiser bisection, accuracy against labels.

Runs after the comparison on the same pairing and samples (compare/plan.py) and returns the
`RemedySection` of the result plus the findings that decide the exit code (plan not found,
accuracy gate failed). The engines are the other modules of this package.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..compare.config import CompareConfig
from ..compare.plan import ComparePlan, ModelArg, plan_comparison, run_pair
from ..core.graph import ModelGraph
from ..core.lazyload import save_standalone, standalone_graph_model
from ..core.runner import RuntimeConfig, Session
from ..core.types import TensorMap
from ..errors import MiError, UsageError
from ..results.base import Finding, Severity
from ..results.layers import LayerSection
from ..serialize import write_atomic
from ..results.remedy import (AccuracyRow, FallbackSection, FallbackStepRow, OptimizerSection, RemedySection,
                              metric_text)
from .config import RemedyConfig, RemedyRequest


def run_remedies(model_a: ModelArg, model_b: ModelArg, config: CompareConfig, request: RemedyRequest,
                 layers: Optional[LayerSection] = None) -> Tuple[RemedySection, List[Finding]]:
    """The remedy section asked for by `request`, and its error findings (see module docstring)."""
    plan = plan_comparison(model_a, model_b, config)
    # the engines patch, run from bytes and write these protos: none may keep the lazy loader's
    # references into the source files (issue 29), so each is read in full once, here
    models = _Standalone(plan)
    ids: List[str] = []
    samples: List[TensorMap] = []
    for sample_id, feeds in plan.samples:
        ids.append(sample_id)
        samples.append(feeds)
    runtime_a = config.runtime
    runtime_b = config.runtime_b or config.runtime
    findings: List[Finding] = []
    accuracy: List[AccuracyRow] = []
    label_notes: List[str] = []
    if request.labels is not None:
        accuracy, label_notes = _accuracy(plan, ids, samples, runtime_a, runtime_b, request)
        for row in accuracy:
            findings.extend(Finding("MI862", Severity.ERROR, f"--labels: {text}", tensor=row.output)
                            for text in row.failed_gates)
    optimizers = None
    if request.bisect_optimizers:
        optimizers = _optimizers(models.b, samples, runtime_a, runtime_b)
        if optimizers.differs:
            findings.append(Finding("MI863", Severity.INFO, f"optimiser bisection: {optimizers.verdict}",
                                    hint="disable it with the session config entry "
                                         "optimization.disable_specified_optimizers" if optimizers.culprits else None))
    fallback = None
    if request.fallback is not None:
        fallback = _fallback(models, ids, samples, runtime_b, request.fallback, layers, config)
        findings.extend(plan_findings(fallback, request.fallback))
    section = RemedySection(fallback=fallback, optimizers=optimizers, accuracy=accuracy,
                            labels=str(request.labels) if request.labels else None, label_notes=label_notes)
    return section, findings


def plan_findings(plan: FallbackSection, cfg: RemedyConfig) -> List[Finding]:
    """MI861 when no plan within --max-nodes meets the targets (the best found is named), MI864 when the
    written model misses them when re-checked from the file."""
    if not plan.found:
        best = ", ".join(f"{k} {metric_text(v)}" for k, v in plan.final.items())
        what, unit = ("fp32 block list", "node(s)") if plan.mode == "fp16" else ("fallback plan", "candidate(s)")
        return [Finding("MI861", Severity.ERROR,
                        f"no {what} of at most {cfg.max_nodes} {unit} meets the targets; best found "
                        f"({len(plan.nodes)} node(s)): {best}", hint="raise --max-nodes or --max-runs, or relax --target")]
    if plan.recheck_meets is False:
        return [Finding("MI864", Severity.ERROR, f"{plan.written_model}: the written model misses the targets "
                                                 "when re-checked")]
    return []


def _source(plan_graph: object) -> "bytes | str":
    path = getattr(plan_graph, "path", None)
    return str(path) if path else plan_graph.model.SerializeToString()  # type: ignore[attr-defined]


def _accuracy(plan: ComparePlan, ids: List[str], samples: List[TensorMap], runtime_a: RuntimeConfig,
              runtime_b: RuntimeConfig, request: RemedyRequest) -> Tuple[List[AccuracyRow], List[str]]:
    from .labels import accuracy_reports, load_labels

    assert request.labels is not None
    labels = load_labels(request.labels)
    session_a = Session(_source(plan.graph_a), runtime_a, label="A")
    session_b = Session(_source(plan.graph_b), runtime_b, label="B")
    scores_a: Dict[str, Dict[str, np.ndarray]] = {p.a: {} for p in plan.outputs.pairs}
    scores_b: Dict[str, Dict[str, np.ndarray]] = {p.a: {} for p in plan.outputs.pairs}
    for sample_id, feeds in zip(ids, samples):
        out_a, out_b, _ = run_pair(session_a, session_b, plan, feeds, sample_id)
        for pair in plan.outputs.pairs:
            scores_a[pair.a][sample_id] = out_a[pair.a]
            scores_b[pair.a][sample_id] = out_b[pair.b]
    # labels bind to the output holding class scores (a classifier's probabilities beside its predicted
    # label, a ZipMap), or to the outputs they name (remedy/label_binding.py)
    from .label_binding import bind_labels

    first = {p.a: scores_a[p.a][ids[0]] for p in plan.outputs.pairs} if ids else {}
    rows: List[AccuracyRow] = []
    notes: List[str] = []
    for binding in bind_labels(labels, ids, first):
        notes.append(binding.note)
        rows.extend(accuracy_reports(scores_a[binding.output], scores_b[binding.output], labels, binding.output,
                                     ks=binding.ks, judge=binding.judge, min_accuracy=request.min_accuracy,
                                     max_accuracy_drop=request.max_accuracy_drop))
    return rows, notes


class _Standalone:
    """The plan's two models as protos with every weight embedded (core.lazyload.standalone_model),
    made on first use, and the paths of the input files (which --write-model must not overwrite)."""

    def __init__(self, plan: ComparePlan) -> None:
        self.plan = plan
        self._a: Optional[onnx.ModelProto] = None
        self._b: Optional[onnx.ModelProto] = None
        self.inputs = [g.path for g in (plan.graph_a, plan.graph_b) if g.path is not None]

    @property
    def a(self) -> onnx.ModelProto:
        if self._a is None:
            self._a = standalone_graph_model(self.plan.graph_a)
        return self._a

    @property
    def b(self) -> onnx.ModelProto:
        if self._b is None:
            self._b = standalone_graph_model(self.plan.graph_b)
        return self._b


def _optimizers(model_b: onnx.ModelProto, samples: List[TensorMap], runtime_a: RuntimeConfig,
                runtime_b: RuntimeConfig) -> OptimizerSection:
    from .optbisect import bisect_optimizers

    # the bisection runs one model under both settings: MODEL_B (the same file as A, or A's rewrite),
    # so it reads B's input types (an fp16 model with fp16 inputs is fed what compare fed B)
    from onnx import helper

    types = {i.name: helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type) for i in model_b.graph.input
             if i.type.HasField("tensor_type") and i.type.tensor_type.elem_type}
    feeds = [{k: (np.asarray(v).astype(types[k]) if k in types and np.asarray(v).dtype != types[k]
                  and np.issubdtype(np.asarray(v).dtype, np.floating) else v) for k, v in sample.items()}
             for sample in samples]
    return bisect_optimizers(model_b.SerializeToString(), feeds, runtime_a, runtime_b)


def is_fp16(model: onnx.ModelProto) -> bool:
    """A float16 conversion (fp16 initializers or values) without quantisers."""
    ops = {n.op_type for n in model.graph.node}
    if ops & {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul"}:
        return False
    f16 = onnx.TensorProto.FLOAT16
    # graph inputs too: a converted tree ensemble (sklearn_zipmap) has no float16 weight nor output
    return any(t.data_type == f16 for t in model.graph.initializer) or any(
        v.type.tensor_type.elem_type == f16
        for v in [*model.graph.input, *model.graph.value_info, *model.graph.output])


def _fallback(models: _Standalone, ids: List[str], samples: List[TensorMap], runtime: RuntimeConfig,
              cfg: RemedyConfig, layers: Optional[LayerSection], config: CompareConfig) -> FallbackSection:
    fp32, other = models.a, models.b
    if is_fp16(other):
        return fp16_fallback(fp32, ids, samples, runtime, cfg, inputs=models.inputs)
    from .fallback import plan_fallback
    from .perchannel import per_channel_enough, weight_advice
    from .ranking import candidate_scores
    from .qdq_patch import quantised_nodes

    if not quantised_nodes(other):
        refuse_qoperator(other)

    targets = cfg.parsed_targets()
    own = None
    ranking, note, iso_seconds, iso_layers = "weight-sqnr", None, 0.0, 0
    if layers is not None:  # `--layers --isolate`: rank by each node's own error and error growth
        own = candidate_scores(fp32, other, layers.layers)
        ranking = "isolated (--isolate)" if own else ranking
    candidates = len(quantised_nodes(other))
    if own is None and candidates <= isolation_budget(cfg.max_runs):
        try:
            own, iso_layers, iso_seconds = isolated_own_errors(models.plan, config, other)
        except MiError as exc:  # the layer pass cannot run on this pair: the heuristic still can
            note = f"candidates ranked by the weight-SQNR heuristic (isolating the layers failed: {exc})"
        ranking = "isolated" if own else ranking
    if own is None and note is None:
        note = (f"candidates ranked by the weight-SQNR heuristic ({candidates} quantised nodes: isolating every "
                f"layer fits --max-runs {cfg.max_runs} up to {isolation_budget(cfg.max_runs)} nodes); "
                "for the ranking by each layer's own error add --layers all --isolate all")
    found = plan_fallback(fp32, other, samples, targets, sample_ids=ids, own_errors=own, max_nodes=cfg.max_nodes,
                          sensitivity_top=cfg.sensitivity_top, max_runs=cfg.max_runs, prune=cfg.prune,
                          runtime=runtime)
    enough = per_channel_enough(fp32, other, found.nodes, samples, targets) if found.found and found.nodes else {}
    advice = [replace(a, per_channel_enough=enough.get(a.node)) for a in weight_advice(other, fp32)]
    written, recheck, meets = _write(found.model, cfg, fp32, ids, samples, runtime, targets, models.inputs)
    if cfg.exclude_list is not None:
        found.write_exclude_list(cfg.exclude_list)
    return FallbackSection(
        mode="qdq", found=found.found, nodes=list(found.nodes), fp32_nodes=list(found.fp32_nodes),
        targets=list(found.targets), baseline=dict(found.baseline), baseline_meets=found.baseline_meets,
        final=dict(found.final),
        steps=[FallbackStepRow(s.action, s.node, list(s.float_nodes), dict(s.metrics), s.meets, s.latency_ms)
               for s in found.steps],
        runs=found.runs, inferences=found.inferences, seconds=found.seconds,
        baseline_latency_ms=found.baseline_latency_ms, final_latency_ms=found.final_latency_ms,
        skipped={**found.skipped, **qoperator_kernels(other)}, weight_advice=advice, written_model=written,
        exclude_list=str(cfg.exclude_list) if cfg.exclude_list else None, recheck=recheck, recheck_meets=meets,
        ranking=ranking, ranking_note=note, isolation_seconds=round(iso_seconds, 3), isolated_layers=iso_layers)


ISOLATION_FIXED_RUNS = 8
ISOLATION_RUNS_PER_NODE = 0.2
"""The cost of isolating every layer (`--layers all --isolate all`) in full-model runs of the search:
at most 8 + 0.2 per quantised node on the zoo's int8 QDQ models (measured by the plan itself,
`isolation_seconds` against its seconds per run: ResNet 24 nodes 10.6 runs, MobileNetV2 65 nodes
19.1, EfficientNet-B0 109 nodes 13.8, MiniLM 164 nodes 9.6; docs/remedy.md, 'Ranking')."""


def isolation_budget(max_runs: int) -> int:
    """The most quantised nodes for which isolating every layer fits in `max_runs` full-model runs
    (210 for the default 50): then the plan ranks candidates by their own error by default."""
    return max(0, int((max_runs - ISOLATION_FIXED_RUNS) / ISOLATION_RUNS_PER_NODE))


def isolated_own_errors(plan: ComparePlan, config: CompareConfig, qdq: onnx.ModelProto
                        ) -> Tuple[Optional[Dict[str, float]], int, float]:
    """node -> ranking score of every layer of B (own error, 1 - isolated cosine, interleaved with the
    growth of the accumulated error: remedy/ranking.py), by `compare --layers all --isolate all` on the
    plan's pairing and samples; with the number of layers isolated and the seconds taken."""
    import time

    from ..compare.config import LayerConfig
    from ..compare.layers import run_layers
    from ..compare.section import build_section
    from .ranking import candidate_scores

    start = time.perf_counter()
    previous = config.layers or LayerConfig()
    layer_config = LayerConfig(isolate=("all",), capture=previous.capture, max_memory=previous.max_memory)
    run = run_layers(plan, replace(config, layers=layer_config))
    section, _notes = build_section(run, gate_layers=False, worst_count=previous.worst, atol=previous.atol)
    own = candidate_scores(standalone_graph_model(plan.graph_a), qdq, section.layers)
    return own, sum(1 for row in section.layers if row.isolated), time.perf_counter() - start


def require_fp16_converter() -> None:
    """Fail before any work (exit 2, naming the extra) when onnxconverter_common is not installed."""
    from .fp16_plan import float16_converter

    float16_converter()


def refuse_qoperator(model: onnx.ModelProto, what: str = "--fallback-plan: model B") -> None:
    """UsageError when `model` is quantised in the QOperator format (QLinearConv, ConvInteger, ...):
    its integer kernels have no float node to keep, so no fallback plan can be made from it."""
    ops = sorted({n.op_type for n in model.graph.node if n.op_type in QOPERATOR_OPS})
    if ops:
        raise UsageError(f"{what} is quantised in the QOperator format ({', '.join(ops[:3])}): "
                         "it has no float node to keep, only integer kernels",
                         hint="quantise in the QDQ format (quantize_static(..., quant_format=QuantFormat.QDQ)) "
                              "and plan on that model; its exclude list applies to both formats")


def qoperator_kernels(model: onnx.ModelProto) -> Dict[str, str]:
    """The QOperator kernels of a mixed model (QDQ nodes beside QLinear*/…Integer ones), which are no
    candidates of the plan, as `skipped` entries ('QLinearMatMul x 12' -> why)."""
    counts: Dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type in QOPERATOR_OPS:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return {f"{op} x {n}": "a QOperator kernel: no float node to keep (quantise in the QDQ format to plan on it)"
            for op, n in sorted(counts.items())}


QOPERATOR_OPS = frozenset({"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "QLinearAdd",
                           "QLinearMul", "QGemm", "QAttention", "DynamicQuantizeMatMul", "QLinearSigmoid",
                           "QLinearLeakyRelu", "QLinearConcat", "QLinearGlobalAveragePool", "QLinearAveragePool"})


def fp16_fallback(fp32: "onnx.ModelProto | ModelGraph", ids: List[str], samples: List[TensorMap],
                  runtime: RuntimeConfig, cfg: RemedyConfig, inputs: Sequence[Path] = ()) -> FallbackSection:
    """The fp32 block list of an fp16 conversion of `fp32` (nan-bisect and compare fp32 fp16).
    A `ModelGraph` is read in full first (its weights may be references into its file)."""
    import json

    from .fp16_plan import plan_fp16_blocklist

    require_fp16_converter()
    if isinstance(fp32, ModelGraph):
        inputs = [*inputs, *([fp32.path] if fp32.path else [])]
        fp32 = standalone_graph_model(fp32)
    targets = cfg.parsed_targets()
    found = plan_fp16_blocklist(fp32, samples, targets, max_nodes=max(cfg.max_nodes, 1), runtime=runtime)
    written, recheck, meets = _write(found.model, cfg, fp32, ids, samples, runtime, targets, inputs)
    if cfg.exclude_list is not None:
        document = {"node_block_list": list(found.node_block_list), "converter": found.converter,
                    "targets": list(cfg.targets), "found": found.found, "metrics": dict(found.final)}
        path = Path(cfg.exclude_list)
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            write_atomic(path, yaml.safe_dump(document, sort_keys=False))
        else:
            write_atomic(path, json.dumps(document, indent=2) + "\n")
    # per step: the targets' metrics and which samples still overflow
    steps = [FallbackStepRow(s["action"], s.get("node", ""), list(s["node_block_list"]),
                             {**s.get("metrics", {}), "nonfinite_samples": float(len(s.get("nonfinite_samples", [])))},
                             bool(s["meets"]), 0.0)
             for s in found.steps]
    baseline = dict(found.steps[0].get("metrics", {})) if found.steps else {}
    return FallbackSection(
        mode="fp16", found=found.found, nodes=list(found.node_block_list), fp32_nodes=list(found.node_block_list),
        targets=list(cfg.targets), baseline=baseline, final=dict(found.final), steps=steps, runs=found.runs,
        # block lists the converter turned into a model onnxruntime refuses, with its reason
        skipped={(", ".join(s["node_block_list"]) or "(plain conversion)"): s["error"] for s in found.steps
                 if s.get("error")},
        written_model=written, exclude_list=str(cfg.exclude_list) if cfg.exclude_list else None,
        recheck=recheck, recheck_meets=meets,
        # the engine names samples sample0, sample1, ...: back to the sample set's ids
        baseline_nonfinite_samples=[ids[int(s[6:])] if s[6:].isdigit() and int(s[6:]) < len(ids) else s
                                    for s in found.baseline_nonfinite_samples])


def _write(model: Optional[onnx.ModelProto], cfg: RemedyConfig, fp32: onnx.ModelProto, ids: List[str],
           samples: List[TensorMap], runtime: RuntimeConfig, targets: tuple, inputs: Sequence[Path] = ()
           ) -> Tuple[Optional[str], Dict[str, Optional[float]], Optional[bool]]:
    """Save the patched model (standing alone, atomically, never over an input) and re-check its
    targets from the file (independently of the search)."""
    from .evaluate import Evaluator

    if cfg.write_model is None or model is None:
        return None, {}, None
    path = save_standalone(model, cfg.write_model, inputs)
    ev = Evaluator(samples, ids, targets, runtime)
    ev.set_reference(fp32.SerializeToString())
    result = ev.evaluate(str(path), label=str(path))
    return str(path), result.summary(targets), result.meets
