"""Static kernel lookup: which nodes the installed onnxruntime has no kernel for (MI401).

Used after a session failed with "Could not find an implementation", to list *every* such node
instead of the first. A node is a gap only when the registry is certain: its domain is one
onnxruntime implements, the op is not a function (onnxruntime inlines those), and no kernel of the
requested providers (CPU always, as onnxruntime falls back to it) covers its opset version and the
input/output types bound to its type parameters.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import onnx
import onnx.defs

from ..core.runner import PROVIDER_ALIASES, kernel_registry
from .context import Context

ORT_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft", "com.microsoft.nchwc", "ai.onnx.training",
               "ai.onnx.preview.training", "com.ms.internal.nhwc", "org.pytorch.aten", "com.microsoft.experimental")
_SCHEMA_DOMAINS = ("", "ai.onnx.ml")
_NO_KERNEL_NEEDED = {"Constant"}


@dataclass(frozen=True)
class KernelGap:
    node: str
    op_type: str
    since: int
    message: str


def ort_type(elem_type: int) -> str:
    """'tensor(float)' notation of an ONNX element type, as onnxruntime's registry writes it."""
    return f"tensor({onnx.TensorProto.DataType.Name(elem_type).lower()})"


def kernel_gaps(ctx: Context) -> List[KernelGap]:
    """Every top-level node without a matching kernel (empty when the registry is unavailable)."""
    providers = {PROVIDER_ALIASES.get(p.lower(), p) for p in ctx.config.runtime.providers} | {"CPUExecutionProvider"}
    registry = kernel_registry(tuple(providers))
    if not registry:
        return []
    imports = {(i.domain if i.domain != "ai.onnx" else ""): i.version for i in ctx.graph.model.opset_import}
    gaps = []
    schemas: Dict[Tuple[str, str], Optional[onnx.defs.OpSchema]] = {}
    for node in ctx.graph.nodes:
        domain = node.domain if node.domain != "ai.onnx" else ""
        if domain not in _SCHEMA_DOMAINS or node.op_type in _NO_KERNEL_NEEDED or domain not in imports:
            continue
        key = (domain, node.op_type)
        if key not in schemas:
            try:
                schemas[key] = onnx.defs.get_schema(node.op_type, imports[domain], domain)
            except onnx.defs.SchemaError:
                schemas[key] = None  # MI205 reports unknown operators
        schema = schemas[key]
        if schema is None:
            continue
        if schema.has_function or schema.has_context_dependent_function:
            continue
        message = _gap(ctx, node.name, schema, registry.get((domain, node.op_type), []))
        if message:
            gaps.append(KernelGap(node.name, node.op_type, schema.since_version, message))
    return gaps


def _gap(ctx: Context, node_name: str, schema: onnx.defs.OpSchema, kernels: list) -> Optional[str]:
    label = f"{schema.name}({schema.since_version})"
    if not kernels:
        return f"onnxruntime has no kernel for {label} on any requested provider"
    versioned = [k for k in kernels if k[0] <= schema.since_version <= k[1]]
    if not versioned:
        ranges = ", ".join(f"{a}-{b if b < 10_000 else ''}" for a, b, _ in kernels)
        return f"onnxruntime implements {schema.name} only for opsets {ranges}, not {label}"
    bound = _bound_types(ctx, node_name, schema)
    for _, _, constraints in versioned:
        if all(t in constraints[p] for p, t in bound.items() if p in constraints):
            return None
    shown = ", ".join(f"{p}={t[7:-1]}" for p, t in bound.items())
    allowed = versioned[0][2]
    options = "; ".join(f"{p}: {', '.join(x[7:-1] for x in allowed[p][:8])}" for p in bound if p in allowed)
    return f"onnxruntime has no kernel for {label} with {shown} (it has {options})"


def _bound_types(ctx: Context, node_name: str, schema: onnx.defs.OpSchema) -> Dict[str, str]:
    """Type parameter -> the tensor type the node binds it to (from inputs, then outputs)."""
    node = ctx.graph.node_by_name[node_name]
    bound: Dict[str, str] = {}
    for formals, actuals in ((schema.inputs, node.inputs), (schema.outputs, node.outputs)):
        for i, tensor in enumerate(actuals):
            if not tensor or not formals:
                continue
            formal = formals[min(i, len(formals) - 1)]
            if i >= len(formals) and formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
                continue
            elem = ctx.info(tensor).elem_type
            if elem and formal.type_str not in bound and not formal.type_str.startswith("tensor("):
                bound[formal.type_str] = ort_type(elem)
    return bound
