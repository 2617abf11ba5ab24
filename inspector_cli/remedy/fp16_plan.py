"""fp16 fallback: the nodes to keep in fp32 so that no sample overflows and the targets hold.

Written as `node_block_list` for onnxconverter_common's float16 converter, and verified by
converting with it (the converter puts Casts around the blocked nodes: that converted model is the
patched model). The search:
1. run the fp32 model with every float tensor exposed; a node is a *source* when one of its outputs
   leaves the fp16 range (|x| > 65504) on some sample; a source and every consumer of its outputs
   must run in fp32 (a Cast to fp16 of an out-of-range value is already Inf);
2. convert, run (every fp16 tensor exposed, see `evaluate_fp16`); while a sample still overflows
   or a target fails, add the first node (topological order) whose fp16 output is non-finite and
   that is not blocked yet; when none is (a target fails on precision), the node whose fp16
   arithmetic adds the most error (`precision_order`);
3. minimise: drop each listed node in turn when the model stays finite and on target without it,
   so removing any node left in the list brings an overflow (or a missed target) back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set

import numpy as np
import onnx
from onnx import helper

from ..core.runner import RuntimeConfig, Session
from ..core.types import TensorMap
from ..diff.values import all_finite, is_numeric_tensor
from ..errors import InferenceError, UsageError
from .evaluate import Evaluation, Evaluator, Target

FP16_MAX = 65504.0
NO_ARITHMETIC = frozenset({"Constant", "Identity", "Shape", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                           "Transpose", "Concat", "Slice", "Gather", "ConstantOfShape", "Cast", "Expand"})
CONVERTER = "onnxconverter_common"
ORT_CONVERTER = "onnxruntime.transformers.float16"
"""onnxruntime's fork of the converter (same arguments): used when onnxruntime refuses the plain
conversion of onnxconverter_common, which leaves graph outputs read inside the graph and some Casts with
the wrong type (the zoo's BERT and GPT-2: 'Type (tensor(float16)) of output arg ... does not match')."""



@dataclass
class Fp16Plan:
    """The block list, whether it works, and the converted (patched) model."""

    node_block_list: List[str]
    found: bool
    sources: List[str]
    baseline_nonfinite_samples: List[str]
    final: Dict[str, Optional[float]]
    runs: int
    steps: List[Dict[str, Any]] = field(default_factory=list)
    model: Optional[onnx.ModelProto] = field(default=None, repr=False)
    converter: str = CONVERTER
    """The converter the block list is for (`ORT_CONVERTER` when onnxconverter_common's model does not load)."""

    def to_dict(self) -> Dict[str, Any]:
        return {"node_block_list": list(self.node_block_list), "found": self.found, "sources": list(self.sources),
                "baseline_nonfinite_samples": list(self.baseline_nonfinite_samples), "final": dict(self.final),
                "runs": self.runs, "steps": list(self.steps), "converter": self.converter}


def float16_converter() -> Any:
    """onnxconverter_common's float16 module (the `fp16` extra); a UsageError (exit 2) naming the
    extra when it is not installed. The one place the optional dependency is imported."""
    try:
        from onnxconverter_common import float16
    except ImportError:
        raise UsageError("an fp16 model's plan (mi fix, --fallback-plan) needs onnxconverter-common (the block list "
                         "is found by converting the fp32 model again), which is not installed",
                         hint="pip install 'model-inspector[fp16]'") from None
    return float16


def convert_fp16(fp32: onnx.ModelProto, node_block_list: Sequence[str], converter: str = CONVERTER) -> onnx.ModelProto:
    """The float16 conversion by `converter` (inputs and outputs kept in fp32)."""
    if converter == ORT_CONVERTER:
        from onnxruntime.transformers import float16
    else:
        float16 = float16_converter()
    model = onnx.ModelProto.FromString(fp32.SerializeToString())
    return float16.convert_float_to_float16(model, keep_io_types=True, node_block_list=list(node_block_list))


def pick_converter(fp32: onnx.ModelProto, runtime: RuntimeConfig) -> str:
    """onnxconverter_common, unless onnxruntime refuses its plain conversion and accepts that of
    onnxruntime's fork (what users switch to, and what the zoo's fp16 variants were made with then)."""
    try:
        Session(convert_fp16(fp32, []).SerializeToString(), runtime, label="fp16")
        return CONVERTER
    except InferenceError:
        pass
    try:
        Session(convert_fp16(fp32, [], ORT_CONVERTER).SerializeToString(), runtime, label="fp16")
        return ORT_CONVERTER
    except (InferenceError, ImportError):
        return CONVERTER  # neither loads: the search reports onnxconverter_common's refusal


def _with_all_outputs(model: onnx.ModelProto, names: Sequence[str]) -> bytes:
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    present = {o.name for o in copy.graph.output}
    copy.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in present)
    return copy.SerializeToString()


def _node_outputs(model: onnx.ModelProto) -> List[str]:
    return [o for n in model.graph.node for o in n.output if o]


def _overflow_sources(fp32: onnx.ModelProto, samples: Sequence[TensorMap], runtime: RuntimeConfig) -> List[str]:
    names = _node_outputs(fp32)
    session = Session(_with_all_outputs(fp32, names), runtime, label="fp32")
    hot: Set[str] = set()
    for feeds in samples:
        values = session.run(feeds)
        for name in names:
            value = values.get(name)
            if _float_tensor(value) and value.size and float(np.nanmax(np.abs(value))) > FP16_MAX:  # type: ignore[union-attr]
                hot.add(name)
    blocked: List[str] = []
    for node in fp32.graph.node:
        if any(o in hot for o in node.output) or any(i in hot for i in node.input):
            blocked.append(node.name)
    return blocked


def _float_tensor(value: object) -> bool:
    """A float tensor (sequences, maps and strings hold no fp16 arithmetic of their own to search)."""
    return is_numeric_tensor(value) and value.dtype.kind == "f"  # type: ignore[union-attr]


def _first_nonfinite_node(model: onnx.ModelProto, samples: Sequence[TensorMap], runtime: RuntimeConfig,
                          exclude: Set[str]) -> Optional[str]:
    names = _node_outputs(model)
    session = Session(_with_all_outputs(model, names), runtime, label="fp16")
    order = {n.name: i for i, n in enumerate(model.graph.node)}
    producer = {o: n.name for n in model.graph.node for o in n.output}
    first: Optional[str] = None
    for feeds in samples:
        values = session.run(feeds)
        for name in names:
            value = values.get(name)
            node = producer[name]
            if node in exclude or not _float_tensor(value):
                continue
            if not np.isfinite(value).all() and (first is None or order[node] < order[first]):
                first = node
    return first


def precision_order(fp32: onnx.ModelProto, samples: Sequence[TensorMap], runtime: RuntimeConfig,
                    converter: str = CONVERTER) -> List[str]:
    """Nodes that compute, by the error their fp16 arithmetic adds (largest first): the accumulated error
    (1 - cosine over the samples) of the node's output in the plain conversion, minus the largest of its
    inputs'. Two runs (fp32 and fp16, every tensor exposed). The order the search blocks nodes in when no
    overflow is left and a target still fails (before: graph order, so Relu and MaxPool first: the zoo's
    fp16 ResNet went 10 nodes without any gain)."""
    names = _node_outputs(fp32)
    ref = Session(_with_all_outputs(fp32, names), runtime, label="fp32")
    half = Session(_with_all_outputs(convert_fp16(fp32, [], converter), names), runtime, label="fp16")
    sums: Dict[str, np.ndarray] = {}
    for feeds in samples:
        a_values, b_values = ref.run(feeds), half.run(feeds)
        for name in names:
            a, b = a_values.get(name), b_values.get(name)
            if not (_float_tensor(a) and _float_tensor(b)) or a.shape != b.shape:
                continue
            x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
            if not (np.isfinite(x).all() and np.isfinite(y).all()):
                continue  # overflow is the other search's business
            sums[name] = sums.get(name, np.zeros(3)) + np.array([x @ y, x @ x, y @ y])
    error = {n: 1.0 - float(v[0] / np.sqrt(v[1] * v[2])) for n, v in sums.items() if v[1] > 0 and v[2] > 0}
    growth: Dict[str, float] = {}
    for node in fp32.graph.node:
        if node.op_type in NO_ARITHMETIC or not node.name:
            continue
        own = max((error[o] for o in node.output if o in error), default=None)
        if own is not None:
            growth[node.name] = own - max((error.get(i, 0.0) for i in node.input), default=0.0)
    return sorted(growth, key=lambda n: -growth[n])


def evaluate_fp16(ev: Evaluator, model: onnx.ModelProto) -> Evaluation:
    """Targets on the outputs, and overflow anywhere: every fp16 tensor is exposed, because onnxruntime's
    CPU provider computes chains of fp16 ops in fp32 unless their values are materialised (a GPU
    stores them in fp16); a sample with a non-finite fp16 tensor counts as overflowing."""
    names = _node_outputs(model)
    outputs = ev.outputs(_with_all_outputs(model, names), label="fp16")
    result = ev.judge(outputs)
    for sample_id, values in zip(ev.sample_ids, outputs):
        bad = not all(all_finite(v) for v in values.values())
        if bad and sample_id not in result.nonfinite_samples:
            result.nonfinite_samples.append(sample_id)
    if result.nonfinite_samples:
        result.meets = False
    return result


def plan_fp16_blocklist(fp32: onnx.ModelProto, samples: Sequence[TensorMap], targets: Sequence[Target] = (),
                        *, max_nodes: int = 32, runtime: RuntimeConfig = RuntimeConfig()) -> Fp16Plan:
    """The minimal fp32 block list of `fp32` converted to fp16 (see module docstring)."""
    ids = [f"sample{i}" for i in range(len(samples))]
    ev = Evaluator(samples, ids, targets, runtime)
    ev.set_reference(fp32.SerializeToString())
    steps: List[Dict[str, Any]] = []
    converter = pick_converter(fp32, runtime)

    def check(block: Sequence[str], action: str, node: str = "") -> bool:
        try:
            result = evaluate_fp16(ev, convert_fp16(fp32, block, converter))
        except InferenceError as exc:  # the converter's Casts around this block make an invalid model
            steps.append({"action": action, "node": node, "node_block_list": list(block), "meets": False,
                          "nonfinite_samples": [], "error": str(exc).splitlines()[0][:300]})
            if not hasattr(check, "last"):  # the plain conversion itself: nothing measured yet
                check.last = Evaluation({}, [], 0.0, shortfall=float("inf"), meets=False)  # type: ignore[attr-defined]
            return False
        steps.append({"action": action, "node": node, "node_block_list": list(block),
                      "nonfinite_samples": list(result.nonfinite_samples), "meets": result.meets,
                      "metrics": result.summary(targets)})
        check.last = result  # type: ignore[attr-defined]
        if (result.shortfall, len(block)) < best[0]:
            best[0], best[1] = (result.shortfall, len(block)), list(block)
        return result.meets

    best: List[Any] = [(float("inf"), 0), []]
    """(shortfall, size) and the block list of the best conversion measured: what a plan not found reports."""

    check([], "baseline")
    baseline_bad = list(check.last.nonfinite_samples)  # type: ignore[attr-defined]
    sources = _overflow_sources(fp32, samples, runtime) if not check.last.meets else []  # type: ignore[attr-defined]
    block = list(sources)
    ok = check.last.meets or check(block, "sources")  # type: ignore[attr-defined]
    fp32_names = [n.name for n in fp32.graph.node]
    # nodes that compute in float: blocking a Constant, Identity or shape op changes no arithmetic,
    # and onnxconverter_common makes invalid models when some of them are blocked
    arithmetic = [n.name for n in fp32.graph.node if n.op_type not in NO_ARITHMETIC]
    refused: Set[str] = set()
    precise: Optional[List[str]] = None
    while not ok and len(block) < max_nodes:
        try:
            node = _first_nonfinite_node(convert_fp16(fp32, block, converter), samples, runtime, set())
        except InferenceError:  # the exposed conversion does not load: fall back to the order below
            node = None
        if node is None or node not in fp32_names or node in block or node in refused:
            # no overflow left to chase (a target fails on precision): block the node adding the most error
            if precise is None:
                try:
                    precise = precision_order(fp32, samples, runtime, converter)
                except InferenceError:  # the exposed plain conversion does not load: graph order
                    precise = []
            node = next((n for n in [*precise, *arithmetic] if n not in block and n not in refused), None)
            if node is None:
                break
        ok = check([*block, node], "add", node)
        if not ok and steps[-1].get("error"):
            refused.add(node)  # not a block the converter can make: try the next one
            if len(refused) >= 2 * max_nodes:  # the converter fails on this model whatever is blocked
                break
            continue
        block.append(node)
    if ok:
        for node in list(reversed(block)):
            trial = [n for n in block if n != node]
            if check(trial, "remove", node):
                block = trial
    else:  # the best block list measured, not the last: a node blocked after it may have added error
        block = list(best[1])
    order = {n: i for i, n in enumerate(fp32_names)}
    block.sort(key=lambda n: order.get(n, len(order)))
    model: Optional[onnx.ModelProto] = convert_fp16(fp32, block, converter)
    try:
        final = evaluate_fp16(ev, model)
    except InferenceError:  # not even this conversion loads (e.g. the sources' block): no model to give
        final, model = Evaluation({}, [], 0.0, shortfall=float("inf"), meets=False), None
    return Fp16Plan(block, final.meets, sources, baseline_bad, final.summary(targets), ev.runs, steps, model,
                    converter=converter)
