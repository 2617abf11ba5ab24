"""MI2xx: onnx.checker and strict shape inference, every error mapped back to its node.

Speed matters here (validate runs on every model in CI): the checker reads the file itself (no
Python re-serialisation), and shape inference runs on a *light* copy whose large float initializers
keep their dims but not their data, so a 50 MB model infers in milliseconds. The inferred types are
installed as the graph's tensor info, so later rules never run inference again.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import onnx
import onnx.defs

from ..core.light import light_copy  # the weight-less copy shape inference sees (one home, shared with load_model)
from ..core.protoutil import value_info_to_tensor
from ..core.runner import PROVIDER_ALIASES, kernel_registry
from ..core.types import TensorInfo, format_shape
from ..results.base import Severity
from .checker_io import checkable_copy, locate, unshaped_io
from .context import Context

_KNOWN_SCHEMA_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview.training")
_INFERENCE_LINE = re.compile(r"(?:\[(\w+)\] )?\(op_type:([^,]*), node name: (.*?)\): (?:\[(\w+)\] )?(.*)")
_BAD_NODE = re.compile(r"Bad node spec for node\. Name: (\S*) OpType: (\S+)")
_NULL_TYPE = "expected to have type but instead is null"


def check_operators(ctx: Context) -> None:
    """MI205 unknown operators, MI206 missing opset imports, MI207 opset newer than onnx knows."""
    model = ctx.graph.model
    imports = {(i.domain if i.domain != "ai.onnx" else ""): i.version for i in model.opset_import}
    local = {(f.domain, f.name) for f in model.functions}
    newest = onnx.defs.onnx_opset_version()
    if imports.get("", 0) > newest:
        ctx.report("MI207", f"the model's opset {imports['']} is newer than the installed onnx knows ({newest})",
                   opset=imports[""], known=newest)
    missing_domains: Dict[str, List[str]] = {}
    known: Dict[Tuple[str, str], bool] = {}  # a few dozen op types, thousands of nodes
    registry: Optional[dict] = None  # onnxruntime's kernels, read at the first op onnx does not know
    for node in ctx.graph.nodes:
        domain = node.domain if node.domain != "ai.onnx" else ""
        if (node.domain, node.op_type) in local:
            continue
        if domain not in imports:
            missing_domains.setdefault(domain, []).append(node.name)
            continue
        if domain not in _KNOWN_SCHEMA_DOMAINS:
            continue
        key = (domain, node.op_type)
        if key not in known:
            known[key] = _has_schema(node.op_type, imports[domain], domain)
        if not known[key]:
            later = _first_opset_with(node.op_type, domain)
            where = f"it exists from opset {later}" if later else "no such operator exists in this domain"
            registry = _runtime_kernels(ctx) if registry is None else registry
            if _registered(registry, domain, node.op_type, imports[domain]):
                # onnxruntime's own contrib ops in the default domain (SimplifiedLayerNormalization as
                # onnxruntime-genai's builder writes it): onnxruntime runs them, other runtimes may not
                ctx.report("MI205", f"{node.op_type} is not an ONNX operator ({domain or 'ai.onnx'} opset "
                                    f"{imports[domain]}); onnxruntime registers its own kernel for it in that "
                                    "domain, other runtimes may refuse it", node=node.name,
                           op_type=node.op_type, opset=imports[domain], since=later, runtime_level=Severity.WARNING)
                continue
            ctx.report("MI205", f"{node.op_type} is not an operator of {domain or 'ai.onnx'} opset "
                                f"{imports[domain]} ({where})", node=node.name, op_type=node.op_type,
                       opset=imports[domain], since=later)
    for domain, nodes in missing_domains.items():
        ctx.report("MI206", f"{len(nodes)} node(s) use domain '{domain}' but the model has no opset import for it",
                   node=nodes[0], hint=f"add onnx.helper.make_opsetid('{domain}', VERSION) to opset_import",
                   domain=domain, nodes=nodes)


def _runtime_kernels(ctx: Context) -> dict:
    """onnxruntime's kernels for the requested providers (CPU always: onnxruntime falls back to it)."""
    providers = {PROVIDER_ALIASES.get(p.lower(), p) for p in ctx.config.runtime.providers} | {"CPUExecutionProvider"}
    return kernel_registry(tuple(sorted(providers)))


def _registered(registry: dict, domain: str, op_type: str, opset: int) -> bool:
    """Whether onnxruntime has a kernel for `op_type` in `domain` at `opset` (its own ops in onnx's domain)."""
    return any(first <= opset <= last for first, last, _ in registry.get((domain, op_type), ()))


def _has_schema(op_type: str, version: int, domain: str) -> bool:
    try:
        onnx.defs.get_schema(op_type, version, domain)
        return True
    except onnx.defs.SchemaError:
        return False


def _first_opset_with(op_type: str, domain: str) -> Optional[int]:
    if not onnx.defs.has(op_type, domain):
        return None
    return min(s.since_version for s in onnx.defs.get_all_schemas_with_history()
               if s.name == op_type and s.domain == domain)


def run_checker(ctx: Context) -> None:
    """MI201: onnx.checker on the file (external data checked in place); covered messages are dropped.

    Graph inputs and outputs without the type or shape field the checker requires are named first (each
    its own finding; onnxruntime loads them: info once its session confirms), and the checker then runs on
    a copy that has them (checker_io.py), so its first message is the next real one. Every message names
    its node or tensor; onnxruntime's session decides its level (`Reporter.settle`)."""
    fixes = unshaped_io(ctx)
    for kind, name, missing in fixes:
        if kind == "input" and missing == "type":  # onnxruntime refuses an input of unknown type too
            ctx.report("MI201", f"graph input '{name}' has no type field: onnx's checker and onnxruntime require one",
                       tensor=name, missing=missing)
            continue
        # onnxruntime loads it whatever else is wrong with the model, as Polygraphy's lint accepts it: a note
        ctx.report("MI201", f"graph {kind} '{name}' has no {missing} field: onnx's checker requires one on graph "
                            f"inputs and outputs, onnxruntime infers it from the graph"
                            f"{' (--strict: the checker view)' if ctx.config.strict else ''}",
                   tensor=name, level=Severity.ERROR if ctx.config.strict else Severity.INFO, missing=missing)
    text = _checker_error(ctx.path if not fixes else checkable_copy(ctx, fixes))
    if text is None or _covered_elsewhere(text):
        return
    match = _BAD_NODE.search(text)
    node = _node_by_original(ctx, match.group(1), match.group(2)) if match else None
    tensor = None
    if node is None:
        node, tensor = locate(ctx, text)
    message = _first_line(text)
    if tensor is not None and f"'{tensor}'" not in message and f"name: {tensor}" not in message:
        message = f"tensor '{tensor}': {message}"
    ctx.report("MI201", message, node=node, tensor=tensor, runtime_level=Severity.WARNING)
    if node is not None:
        _check_other_nodes(ctx, skip=node)


def _checker_error(model: "Path | onnx.ModelProto") -> Optional[str]:
    """onnx.checker's first error on the file (or a copy of the model), None when it passes."""
    try:
        onnx.checker.check_model(model if isinstance(model, onnx.ModelProto) else str(model), full_check=False)
        return None
    except (onnx.checker.ValidationError, onnx.onnx_cpp2py_export.checker.ValidationError) as exc:
        return str(exc)
    except Exception as exc:  # the checker can fail in other ways on broken models
        return f"{type(exc).__name__}: {exc}"


def _covered_elsewhere(text: str) -> bool:
    """Checker messages that the integrity, operator and loading rules report more precisely."""
    return any(s in text for s in ("topologically sorted", "No Op registered for", "No opset import for domain",
                                   "is higher than the checker's", "is not output of any previous nodes",
                                   "Graph must be in single static assignment", "doesn't exist or is not accessible",
                                   "is not an output of any node in graph"))


def _check_other_nodes(ctx: Context, skip: str) -> None:
    """The model checker stops at its first error; check each remaining node on its own."""
    checker = onnx.checker.C.CheckerContext()
    checker.ir_version = ctx.graph.model.ir_version
    checker.opset_imports = {i.domain: i.version for i in ctx.graph.model.opset_import}
    for proto in ctx.graph.model.graph.node:
        if proto.name == skip:
            continue
        try:
            onnx.checker.check_node(proto, checker)
        except Exception as exc:  # ValidationError from the C++ checker
            if not _covered_elsewhere(str(exc)):
                ctx.report("MI201", _first_line(str(exc)), node=proto.name, runtime_level=Severity.WARNING)


def _node_by_original(ctx: Context, name: str, op_type: str) -> Optional[str]:
    node = ctx.graph.node_by_name.get(name)
    if node is not None and node.op_type == op_type:  # a copy of mi's graph names nodes as mi does
        return name
    matches = [n.name for n in ctx.graph.nodes if n.original_name == name and n.op_type == op_type]
    return matches[0] if len(matches) == 1 else (matches[0] if matches else None)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    joined = " ".join(lines[:3])
    return joined[:400]


# ---- shape inference ---------------------------------------------------------------------------
def infer_strict(ctx: Context) -> None:
    """MI202/MI203/MI204 from strict shape inference; installs the inferred tensor types.

    The first pass also propagates constant data (more shapes known for later rules). Errors are
    taken from passes *without* data propagation, as onnx.checker's full check runs it: onnx's
    data propagation has had bugs, and a clean model must not get an error from one.
    """
    light = light_copy(ctx.graph.model)
    infer = onnx.shape_inference.infer_shapes
    errors: List[str] = []
    inferred: Optional[onnx.ModelProto] = None
    try:
        inferred = infer(light, check_type=True, strict_mode=True, data_prop=True)
    except Exception as first:  # InferenceError; a type error stops the typed pass at once
        for check_type in (True, False):  # the untyped pass collects every shape error after a type error
            try:
                infer(light, check_type=check_type, strict_mode=True, data_prop=False)
            except Exception as exc:
                errors.append(str(exc))
            else:
                break
        if not errors:
            ctx.notes.append("shape inference with data propagation reported an error that plain strict inference "
                             f"does not confirm; not reported: {_first_line(str(first))[:200]}")
        try:
            inferred = infer(light, check_type=False, strict_mode=False, data_prop=True)
        except Exception:  # nothing more to learn; later rules use the declared types
            inferred = None
    install_tensor_info(ctx, inferred)
    seen: set = set()
    parsed = [e for text in errors for e in _parse_inference_errors(text)]
    cascade = [e for e in parsed if _NULL_TYPE in e[3]]
    if len(cascade) < len(parsed):
        parsed = [e for e in parsed if _NULL_TYPE not in e[3]]  # consequences of the nodes that did fail
    graph = ctx.graph
    known = set(graph.producer) | set(graph.initializer_names) | {i.name for i in graph.model.graph.input}
    parsed = [e for e in parsed if _NULL_TYPE not in e[3] or e[1] not in graph.node_by_name
              or all(t in known for t in graph.node_by_name[e[1]].inputs if t)]  # dangling: MI301 says it
    for op_type, node_name, kind, message in parsed:
        if (node_name, message) not in seen:
            seen.add((node_name, message))
            _report_inference_error(ctx, op_type, node_name, kind, message)
    for out in ctx.graph.outputs:
        info = ctx.info(out.name)
        if not info.elem_type or info.shape is None:
            missing = "element type" if not info.elem_type else "rank"
            ctx.report("MI210", f"graph output '{out.name}' has no known {missing} after shape inference",
                       tensor=out.name)
        elif None in info.shape:
            unknown = [str(i) for i, d in enumerate(info.shape) if d is None]
            ctx.report("MI210", f"graph output '{out.name}' {info.shape_text()} has unknown dimension(s) after "
                                f"shape inference (dim {', '.join(unknown)}): neither a size nor a symbol",
                       tensor=out.name)


def install_tensor_info(ctx: Context, inferred: Optional[onnx.ModelProto]) -> None:
    """Give the graph its tensor types from our inference (same precedence as the graph core's own)."""
    graph = inferred.graph if inferred is not None else ctx.graph.model.graph
    info: Dict[str, TensorInfo] = {}
    for vi in [*graph.value_info, *graph.input, *graph.output]:
        ti = value_info_to_tensor(vi)
        if ti.elem_type or vi.name not in info:
            info[vi.name] = ti
    for init in ctx.graph.model.graph.initializer:
        info[init.name] = TensorInfo(init.name, init.data_type, tuple(int(d) for d in init.dims))
    ctx.graph.set_tensor_info(info)  # the graph's lazily computed cache; filled here, computed once


def _parse_inference_errors(text: str) -> List[Tuple[str, str, str, str]]:
    found = []
    for line in text.splitlines():
        match = _INFERENCE_LINE.search(line)
        if match:
            outer, op_type, node, inner, message = (g.strip() if g else "" for g in match.groups())
            found.append((op_type, node, inner or outer, message))
    if not found and text.strip():
        found.append(("", "", "ShapeInferenceError", _first_line(text)))
    return found


def _report_inference_error(ctx: Context, op_type: str, node_name: str, kind: str, message: str) -> None:
    node = ctx.graph.node_by_name.get(node_name)
    if node is None and node_name:
        candidates = [n for n in ctx.graph.nodes if n.original_name == node_name and n.op_type == op_type]
        node = candidates[0] if candidates else None
    name = node.name if node else (node_name or None)
    label = f"{op_type} '{name}'" if name else (op_type or "the graph")
    if "existing shape" in message or "existing type" in message:
        declared = [o for o in (node.outputs if node else ()) if _declared(ctx, o) is not None]
        tensor = declared[0] if declared else None
        shown = f" for '{tensor}' (declared {format_shape(_declared(ctx, tensor))})" if tensor else ""
        # onnxruntime keeps the inferred shape and loads the model (a warning then; an error if it does not)
        ctx.report("MI204", f"{label}: {message}{shown}", node=name, tensor=tensor, runtime_level=Severity.WARNING)
        return
    inputs = _input_shapes(ctx, node.inputs if node else ())
    if "type" in message.lower() or kind == "TypeInferenceError":
        types = ", ".join(f"{t} {ctx.info(t).dtype_name}" for t in (node.inputs if node else ()) if t)
        # onnxruntime runs its own inference at load: a model it loads disputes onnx's (the conformance case
        # node/test_mvn: onnx's inference of the MeanVarianceNormalization function body fails, onnxruntime runs it)
        ctx.report("MI203", f"{label}: {message} (inputs: {types})" if types else f"{label}: {message}", node=name,
                   runtime_level=Severity.WARNING)
        return
    shapes = " and ".join(f"'{t}' {s}" for t, s in inputs)
    text = f"{label}: {message}; inputs {shapes}" if shapes else f"{label}: {message}"
    ctx.report("MI202", text, node=name, input_shapes={t: s for t, s in inputs}, runtime_level=Severity.WARNING)


def _input_shapes(ctx: Context, inputs: Tuple[str, ...]) -> List[Tuple[str, str]]:
    return [(t, format_shape(ctx.info(t).shape)) for t in inputs if t]


def _declared(ctx: Context, tensor: Optional[str]) -> Optional[tuple]:
    if not tensor:
        return None
    graph = ctx.graph.model.graph
    for vi in [*graph.output, *graph.value_info]:
        if vi.name == tensor:
            return value_info_to_tensor(vi).shape
    return None
