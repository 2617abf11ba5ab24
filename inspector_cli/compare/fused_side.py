"""Reading paired tensors that onnxruntime fuses away in the deployed graph (issue 14, DEPLOYED_FUSED).

Deployed capture (capture.py) reads tensors from onnxruntime's optimised graph. A tensor inside a
fused kernel (Gelu's Div and Erf+Add, SkipLayerNormalization's residual Add, SiLU's Sigmoid, the
MatMul+Add of an attention kernel) no longer exists there. Rather than reporting it "not
materialised", the original nodes that compute it are appended, renamed, to the optimised graph
that the capture session runs anyway (with optimisation off, so they stay unfused):

- their inputs are the deployed graph's own tensors wherever those exist under the original name
  and in the original layout (the boundary), else the chain goes further back, down to the model
  inputs and weights; so the recomputed value carries the deployed upstream numerics and only the
  fused ops themselves run as reference (unfused, opt level off) arithmetic;
- the combined graph is checked once on the first sample; if onnxruntime refuses it (a boundary
  tensor of another type or shape) the chains are fed from the model inputs instead;
- no extra session per sample, and nothing changes when nothing is missing.

Rows read this way say so (`capture_a/b` "recomputed" and the row's `recomputed` text).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

import onnx
from onnx import numpy_helper

from ..core.graph import ModelGraph
from ..core.quantparams import QuantSpec
from ..core.runner import RuntimeConfig
from ..core.types import TensorMap
from ..core.weights import initializer_array
from .pairing.optgraph import OptimizedGraph
from .pairing.semantic import TensorView

PREFIX = "mi_recomputed/"
"""Names of the appended nodes, tensors and weight copies (never clash with onnxruntime's own)."""
MAX_NODES = 5000
"""A recomputation that needs more original nodes than this is not attempted (the tensor stays unread)."""


@dataclass(frozen=True)
class Recomputation:
    """The optimised graph with the chains producing the missing tensors appended."""

    graph: ModelGraph
    exposes: Dict[str, str]
    """Original tensor -> the name its recomputed copy has in `graph`."""
    ops: Dict[str, List[str]]
    """Original tensor -> op types of the nodes recomputed for it, in order."""
    from_deployed: bool
    """Fed from the deployed graph's tensors (True) or from the model inputs only (False)."""


class _Unreachable(Exception):
    """A tensor the chain cannot be built for (a node with a subgraph, a tensor without producer)."""


def _slice(graph: ModelGraph, opt: OptimizedGraph, tensor: str, boundary: bool, missing: Set[str],
           nodes: Dict[str, int]) -> List[str]:
    """Add to `nodes` (name -> topological order) the original nodes computing `tensor` from the
    boundary; returns the op types of this tensor's own chain."""
    mine: Dict[str, int] = {}
    ops: List[tuple] = []
    stack, seen = [tensor], set()
    while stack:
        name = stack.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        if name in graph.initializer_names or name in graph.input_names:
            continue
        if name != tensor and name not in missing and boundary and name in opt.names \
                and name not in opt.graph.initializer_names and opt.perm.get(name) is None:
            continue  # read from the deployed graph as it runs
        node = graph.producer.get(name)
        if node is None or node.has_subgraph or len(nodes) + len(mine) > MAX_NODES:
            raise _Unreachable(name)
        if node.name not in mine:
            mine[node.name] = node.order
            ops.append((node.order, node.op_type))
        stack.extend(node.inputs)
    nodes.update(mine)  # only a chain built to the end: a partial one would read tensors nobody writes
    return [op for _, op in sorted(ops)]


def build(side_graph: ModelGraph, opt: OptimizedGraph, views: Sequence[TensorView],
          boundary: bool) -> Optional[Recomputation]:
    """The combined graph recomputing `views` (tensors of `side_graph`), or None when a chain cannot be built."""
    missing = {v.expose for v in views}
    nodes: Dict[str, int] = {}
    ops: Dict[str, List[str]] = {}
    for view in views:
        try:
            ops[view.expose] = _slice(side_graph, opt, view.expose, boundary, missing, nodes)
        except _Unreachable:
            continue
    for view in views:  # dequantisation parameters are copied as weights: they must be initializers
        if view.quant is not None and view.expose in ops and any(
                n and n not in side_graph.initializer_names for n in (view.quant.scale, view.quant.zero_point)):
            del ops[view.expose]
    if not ops:
        return None
    model = onnx.ModelProto()
    model.CopyFrom(opt.graph.model)
    renamed: Dict[str, str] = {}

    def rename(name: str) -> str:
        """Outputs of appended nodes and the original's weights get the prefix; boundary tensors and
        model inputs keep their names (they are the deployed graph's own)."""
        if name in renamed:
            return renamed[name]
        if name in side_graph.initializer_names:
            return renamed.setdefault(name, PREFIX + name)
        return name

    for name in sorted(nodes, key=nodes.__getitem__):  # topological: producers are renamed before consumers
        proto = onnx.NodeProto()
        proto.CopyFrom(side_graph.node_proto(name))
        proto.name = PREFIX + proto.name
        inputs = [rename(t) for t in proto.input]
        for t in proto.output:
            if t:
                renamed[t] = PREFIX + t
        outputs = [rename(t) for t in proto.output]
        del proto.input[:], proto.output[:]
        proto.input.extend(inputs)
        proto.output.extend(outputs)
        model.graph.node.append(proto)
    weights = {t for t in renamed if t in side_graph.initializer_names}
    weights |= {n for v in views if v.quant is not None and v.expose in ops
                for n in (v.quant.scale, v.quant.zero_point) if n}
    for name in sorted(weights):
        tensor = side_graph.initializer(name)
        array = initializer_array(side_graph, tensor) if tensor is not None else None
        if array is None:
            return None
        model.graph.initializer.append(numpy_helper.from_array(array, PREFIX + name))
    _merge_imports(model, side_graph.model)
    combined = ModelGraph.from_proto(model, opt.graph.path)
    combined.set_tensor_info({})  # contrib ops of the optimised graph defeat ONNX shape inference
    return Recomputation(combined, {t: PREFIX + t for t in ops}, ops, boundary)


def _merge_imports(model: onnx.ModelProto, original: onnx.ModelProto) -> None:
    """The original's opset domains and local functions the appended nodes may call."""
    domains = {imp.domain for imp in model.opset_import}
    for imp in original.opset_import:
        if imp.domain not in domains:
            model.opset_import.append(imp)
    functions = {(f.domain, f.name) for f in model.functions}
    for function in original.functions:
        if (function.domain, function.name) not in functions:
            model.functions.append(function)


def _runs(recomputation: Recomputation, runtime: RuntimeConfig, label: str,
          first: Optional[TensorMap]) -> Optional[str]:
    """None when onnxruntime loads the combined graph and runs it on the first sample, else why not."""
    from ..core.runner import open_session

    try:
        session = open_session(recomputation.graph, runtime, extra_outputs=list(recomputation.exposes.values()),
                               keep_outputs=False, label=f"{label} recomputation")
        if first is not None:
            session.run(first)
    except Exception as exc:  # any refusal means: try the chains from the model inputs
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


@dataclass(frozen=True)
class Recovered:
    """What deployed capture reads instead: the combined graph and, per recovered tensor, where and how."""

    graph: ModelGraph
    opt: OptimizedGraph
    reads: Dict[str, Tuple[str, Optional[QuantSpec]]]
    """Original tensor -> (its recomputed copy in `graph`, dequantisation with the copied parameters)."""
    how: Dict[str, str]
    """Original tensor -> the row's `recomputed` text (model, ops rerun, their inputs)."""


def recover(graph: ModelGraph, opt: OptimizedGraph, missing: Sequence[TensorView], runtime: RuntimeConfig,
            label: str, first: Optional[TensorMap]) -> Tuple[Optional[Recovered], str]:
    """The tensors `missing` from the deployed graph `opt` of model `label` (`graph`), recomputed beside it:
    (what to read, "") or (None, a warning when onnxruntime refused both ways of feeding the chains)."""
    failure = ""
    for boundary in (True, False):
        recomputation = build(graph, opt, missing, boundary)
        if recomputation is None:
            continue
        failure = _runs(recomputation, runtime, label, first) or ""
        if not failure:
            break
    else:
        return None, (f"model {label}: the tensors fused away in the deployed graph could not be recomputed "
                      f"({failure}); --capture instrumented reads them") if failure else ""
    origin = "the deployed graph's tensors" if recomputation.from_deployed else "the model inputs"
    reads: Dict[str, Tuple[str, Optional[QuantSpec]]] = {}
    how: Dict[str, str] = {}
    for view in missing:
        expose = recomputation.exposes.get(view.expose)
        if expose is None:
            continue
        reads[view.expose] = (expose, None if view.quant is None else QuantSpec(
            PREFIX + view.quant.scale, PREFIX + view.quant.zero_point if view.quant.zero_point else None,
            view.quant.axis))
        ops = recomputation.ops[view.expose]
        chain = "+".join(ops) if len(ops) <= 3 else f"{len(ops)} ops ending {'+'.join(ops[-3:])}"
        how[view.expose] = f"model {label}: fused away as deployed; {chain} rerun unfused on {origin}"
    return Recovered(recomputation.graph, OptimizedGraph(recomputation.graph, opt.original_nodes, opt.original_tensors), reads, how), ""
