"""What onnx's checker says about graph inputs and outputs, named, and what it would say after them.

onnx's checker requires a `type` with a `shape` field on every graph input and output; onnx-graphsurgeon
and Polygraphy write outputs (and inputs) whose shape is unknown with a type but no `shape` field, and
outputs of unknown type with no type at all. onnxruntime loads both (it types them from the graph), and
`polygraphy check lint` gives such outputs an empty shape before it calls the checker. The checker's
message names no tensor ("Field 'shape' of 'type' is required but missing.") and, as the checker stops at
its first error, hid every later one (on weight-stripped models, the missing weights).

Here each such input or output is found and named; the checker then runs on a copy where they carry an
empty shape (and outputs without a type, their inferred type), so its first message is the next real one.
A message that names nothing is located by checking each value info and stored tensor on its own.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

import onnx

from .context import Context

_TENSOR_NAME = re.compile(r"tensor name: ([^\s)]+)")
_QUOTED = re.compile(r"'([^']+)'")


def unshaped_io(ctx: Context) -> List[Tuple[str, str, str]]:
    """(kind 'input'/'output', tensor, what is missing: 'shape' or 'type') of every graph input and output
    of tensor type that lacks what onnx's checker requires."""
    graph = ctx.graph.model.graph
    found = []
    for kind, items in (("input", graph.input), ("output", graph.output)):
        for vi in items:
            if not vi.HasField("type"):
                found.append((kind, vi.name, "type"))
            elif vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
                found.append((kind, vi.name, "shape"))
    return found


def checkable_copy(ctx: Context, fixes: List[Tuple[str, str, str]]) -> onnx.ModelProto:
    """The model as onnx's checker sees it once `fixes` are made, as Polygraphy's lint makes them: an empty
    shape where the field is missing, the inferred element type where the type is. Weights stored in
    external files become empty stubs (the file was checked where it is: MI108)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(ctx.graph.model)
    wanted = {(kind, name) for kind, name, _ in fixes}
    for kind, items in (("input", copy.graph.input), ("output", copy.graph.output)):
        for vi in items:
            if (kind, vi.name) not in wanted:
                continue
            if not vi.HasField("type"):
                vi.type.tensor_type.elem_type = ctx.info(vi.name).elem_type or onnx.TensorProto.FLOAT
            if vi.type.HasField("tensor_type"):
                vi.type.tensor_type.shape.SetInParent()
    for tensor in copy.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            del tensor.external_data[:]
            del tensor.dims[:]
            tensor.dims.append(0)
            tensor.data_location = onnx.TensorProto.DEFAULT
    return copy


def locate(ctx: Context, text: str) -> Tuple[Optional[str], Optional[str]]:
    """(node, tensor) a checker message is about: the names it quotes, else the one value info or stored
    tensor that onnx's checker rejects with the same message when checked on its own."""
    graph = ctx.graph
    named = _TENSOR_NAME.search(text)
    if named:
        return None, named.group(1)
    known = set(graph.producer) | set(graph.input_names) | graph.initializer_names | set(graph.output_names)
    for quoted in _QUOTED.findall(text):
        if quoted in known:
            return None, quoted
        if quoted in graph.node_by_name:
            return quoted, None
    first = text.strip().splitlines()[0] if text.strip() else ""
    checker = onnx.checker.C.CheckerContext()
    checker.ir_version = graph.model.ir_version
    checker.opset_imports = {i.domain: i.version for i in graph.model.opset_import}
    proto = graph.model.graph
    candidates = [(vi.name, onnx.checker.check_value_info, vi) for vi in [*proto.input, *proto.output,
                                                                          *proto.value_info]]
    candidates += [(t.name, onnx.checker.check_tensor, t) for t in proto.initializer
                   if t.data_location != onnx.TensorProto.EXTERNAL]
    for name, check, item in candidates:
        try:
            check(item, checker)
        except Exception as exc:  # the checker's ValidationError
            if str(exc).strip().splitlines()[0] == first:
                return None, name
    return None, None
