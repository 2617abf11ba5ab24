"""MI4xx: can the installed onnxruntime run this model, and what will cost on deployment targets.

The session is the authority: one is created (from the file itself when node names need no fixing,
so no re-serialisation) and its error is mapped back to the node it names. onnxruntime stops at the
first missing kernel, so on that error the kernel registry is scanned to list every other node
without a kernel too.
"""
from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Union

import onnx

from ..core.graph import ModelGraph
from ..core.masks import find_masks
from ..core.runner import RuntimeConfig, Session, open_session
from ..core.types import TensorInfo
from ..core.weights import nonfinite_initializers
from ..errors import InferenceError, ModelLoadError
from .context import Context
from .kernels import ORT_DOMAINS, kernel_gaps

PROTOBUF_LIMIT = 2 ** 31 - 1
"""Largest protobuf message: a model file above it must keep its weights as external data."""
DOUBLE = 11

_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'")
_IR = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")
_OPSET = re.compile(r"Opset (\d+) is under development.*?domain (\S+) is till opset (\d+)", re.S)
_UNREGISTERED = re.compile(r"([\w.]*):(\w+)\(-?\d+\) is not a registered function/op")
_NODE_NAMES = (re.compile(r"node with name '([^']*)'"), re.compile(r"in node \(([^)]*)\)"),
               re.compile(r"Node \(([^)]*)\)"), re.compile(r"Node:\s*'?([^\s',]+)"),
               re.compile(r"In Node, \(\"([^\"]*)\""), re.compile(r"same node name \(([^)]*)\)"))


def check_static(ctx: Context) -> None:
    """MI405-MI409: facts about inputs, types and weights that need no session."""
    graph = ctx.graph
    for info in graph.inputs:
        if info.shape is None:
            ctx.report("MI405", f"input '{info.name}' has no declared shape (unknown rank)", tensor=info.name)
        elif not info.is_static:
            dims = ", ".join(f"{'?' if d is None else d} (dim {i})" for i, d in enumerate(info.shape)
                             if not isinstance(d, int) or d < 0)
            ctx.report("MI405", f"input '{info.name}' {info.shape_text()} has dynamic dimensions: {dims}",
                       tensor=info.name, hint="fix them with --shape NAME:DIMS in compare, probe and profile")
    _float64(ctx)
    if ctx.weights_readable and ctx.reporter.enabled("MI407"):
        found = nonfinite_initializers(graph)
        masks = find_masks(graph) if any(not bad.nan for bad in found) else None
        for bad in found:
            if masks is not None and not bad.nan and masks.is_fill(bad.tensor):
                continue  # an attention mask's -inf, set on purpose (core/masks.py), as nan-bisect reads it
            ctx.report("MI407", f"initializer '{bad.tensor}' holds {bad.nan} NaN and {bad.inf} Inf of {bad.size} "
                                f"values (read by {', '.join(bad.consumers) or 'no node'})",
                       node=bad.consumers[0] if bad.consumers else None, tensor=bad.tensor, nan=bad.nan, inf=bad.inf)
    limit = ctx.config.large_initializer_mb * 1e6
    for tensor in graph.model.graph.initializer:
        size = TensorInfo(tensor.name, tensor.data_type, tuple(int(d) for d in tensor.dims)).byte_size() or 0
        if size > limit:
            consumers = graph.consumers.get(tensor.name, [])
            ctx.report("MI408", f"initializer '{tensor.name}' holds {size / 1e6:.1f} MB "
                                f"(over {ctx.config.large_initializer_mb:g} MB)",
                       node=consumers[0].name if consumers else None, tensor=tensor.name, bytes=size)
    size = ctx.path.stat().st_size
    if size > PROTOBUF_LIMIT and not graph.uses_external_data:
        ctx.report("MI409", f"the model file is {size / 2**30:.2f} GiB with every weight inline; protobuf's limit "
                            "is 2 GiB", hint="onnx.save(model, path, save_as_external_data=True)", bytes=size)


def _float64(ctx: Context) -> None:
    graph = ctx.graph
    for info in [*graph.inputs, *graph.outputs]:
        if info.elem_type == DOUBLE:
            kind = "input" if info.name in graph.input_names else "output"
            ctx.report("MI406", f"graph {kind} '{info.name}' is float64", tensor=info.name)
    for node in graph.nodes:
        if node.op_type == "Cast" and graph.node_attribute(node.name, "to") == DOUBLE:
            ctx.report("MI406", f"Cast '{node.name}' converts to float64", node=node.name,
                       tensor=node.outputs[0] if node.outputs else None)
    weights = [t.name for t in graph.model.graph.initializer if t.data_type == DOUBLE]
    produced = [(n.name, o) for n, o in graph.node_outputs() if o not in graph.output_names
                and n.op_type != "Cast" and ctx.info(o).elem_type == DOUBLE]
    if weights or produced:
        parts = []
        if weights:
            parts.append(f"{len(weights)} initializer(s) ({', '.join(weights[:3])}{', ...' if len(weights) > 3 else ''})")
        if produced:
            parts.append(f"{len(produced)} intermediate tensor(s), first from '{produced[0][0]}'")
        ctx.report("MI406", f"float64 inside the graph: {' and '.join(parts)}",
                   node=produced[0][0] if produced else None, tensor=weights[0] if weights else produced[0][1],
                   initializers=weights or None, nodes=[n for n, _ in produced] or None)


def custom_domains(ctx: Context) -> bool:
    """MI403: nodes of domains onnxruntime does not know, with no --custom-op-lib. True when any."""
    graph = ctx.graph
    local = {(f.domain, f.name) for f in graph.model.functions}
    custom: Dict[str, List[str]] = {}
    for node in graph.nodes:
        if node.domain not in ORT_DOMAINS and (node.domain, node.op_type) not in local:
            custom.setdefault(node.domain, []).append(node.name)
    if not custom or ctx.config.runtime.custom_op_libs:
        return False
    for domain, nodes in custom.items():
        ops = sorted({graph.node_by_name[n].op_type for n in nodes})
        ctx.report("MI403", f"{len(nodes)} node(s) of custom domain '{domain}' ({', '.join(ops)}) and no "
                            "--custom-op-lib to implement them", node=nodes[0],
                   hint="pass the custom-op library with --custom-op-lib", domain=domain, nodes=nodes)
    return True


def can_run_from_file(model: onnx.ModelProto, runtime: RuntimeConfig) -> bool:
    """Whether onnxruntime can load the file as it is: every node named once (so its messages use our
    names) and no custom domain left without a library (MI403 reports those, no session needed)."""
    names = [n.name for n in model.graph.node]
    if not all(names) or len(set(names)) != len(names):
        return False
    local = {(f.domain, f.name) for f in model.functions}
    return bool(runtime.custom_op_libs) or all(
        n.domain in ORT_DOMAINS or (n.domain, n.op_type) in local for n in model.graph.node)


def session_error(source: Union[Path, ModelGraph], runtime: RuntimeConfig, label: str) -> Optional[str]:
    """Create (and drop) one onnxruntime session; onnxruntime's error text, or None when it loads.

    `source` is the model file (onnxruntime reads it itself: no copy) or a graph whose nodes had
    to be renamed. Safe on a worker thread: onnxruntime releases the GIL while it builds the session
    and nothing here changes the graph.
    """
    try:
        # onnxruntime's Python wrapper prints "EP Error ..." to stdout when it retries; stdout carries data
        with contextlib.redirect_stdout(sys.stderr):
            if isinstance(source, ModelGraph):
                open_session(source, runtime, label=label)
            else:
                Session(str(source), runtime, label=label)
        return None
    except InferenceError as exc:
        if "custom-op library" in exc.message:
            raise  # the user's library is broken: not a model defect
        return str(exc.__cause__) if exc.__cause__ is not None else exc.message
    except ModelLoadError as exc:  # core/refusals: what onnxruntime refuses in the file, found before it ran
        return exc.message


def report_session(ctx: Context, error: Optional[str]) -> Dict[str, object]:
    """MI401/MI402/MI404 from the session's outcome; returns facts for the result."""
    if error is None:
        return {"session": "created"}
    _report_session_error(ctx, error)
    return {"session": "failed", "error": error.strip().splitlines()[0][:500] if error.strip() else ""}


def clean_ort_message(text: str) -> str:
    """onnxruntime's message without colour codes, status prefix and C++ source locations."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = text.strip().split("\n")[0] if "[E:onnxruntime" in text else text.strip()
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"\S+\.(?:h|cc|cpp):\d+ [^()]*\([^)]*\)\s*", "", text)
    text = text.replace("Exception during initialization: ", "")
    return " ".join(text.split())


def _report_session_error(ctx: Context, text: str) -> None:
    graph = ctx.graph
    clean = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
    first = clean_ort_message(text)[:600]
    match = _NO_KERNEL.search(clean)
    if match:
        op, version, name = match.groups()
        node = name if name in graph.node_by_name else None
        ctx.report("MI401", f"onnxruntime has no kernel for {op}({version}) on the chosen providers"
                            f"{_types_of(ctx, node)}", node=node, op_type=op, opset=int(version))
        for gap in kernel_gaps(ctx):
            if gap.node != node:
                ctx.report("MI401", gap.message, node=gap.node, op_type=gap.op_type, opset=gap.since)
        return
    match = _IR.search(clean)
    if match:
        ctx.report("MI402", f"IR version {match.group(1)} is newer than onnxruntime supports ({match.group(2)})",
                   ir_version=int(match.group(1)), supported=int(match.group(2)))
        return
    match = _OPSET.search(clean)
    if match:
        ctx.report("MI402", f"opset {match.group(1)} of {match.group(2)} is newer than onnxruntime supports "
                            f"({match.group(3)})", opset=int(match.group(1)), supported=int(match.group(3)))
        return
    if "two nodes with same node name" in clean and any(f.rule == "MI308" for f in ctx.reporter.findings):
        return  # MI308 names them, in subgraphs too
    nodes = _named_nodes(ctx, clean)
    match = _UNREGISTERED.search(clean)
    if match and not nodes:
        nodes = [n.name for n in graph.nodes if n.op_type == match.group(2) and n.domain == match.group(1)]
    named = re.findall(r"'([^']+)'", clean) + re.findall(r"[Tt]ensor (\S+) failed", clean)
    known = graph.initializer_names
    tensors = [t for t in named if t in graph.consumers or t in graph.producer or t in known]
    if ctx.reporter.has_error_on(nodes, tensors):
        return  # an earlier rule already explains this failure on the same node or tensor
    ctx.report("MI404", f"onnxruntime: {first}", node=nodes[0] if nodes else None,
               tensor=tensors[0] if tensors and not nodes else None)


def _named_nodes(ctx: Context, text: str) -> List[str]:
    found: List[str] = []
    for pattern in _NODE_NAMES:
        for name in pattern.findall(text):
            if name in ctx.graph.node_by_name and name not in found:
                found.append(name)
    return found


def _types_of(ctx: Context, node: Optional[str]) -> str:
    if node is None:
        return ""
    types = [ctx.info(t).dtype_name for t in ctx.graph.node_by_name[node].inputs if t]
    return f" with inputs of type {', '.join(types)}" if types else ""

