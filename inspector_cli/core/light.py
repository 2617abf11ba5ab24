"""A copy of a model for ONNX shape inference: the structure without the weights' bytes."""
from __future__ import annotations

from math import prod

import onnx

LIGHT_LIMIT = 64
"""Float initializers with more elements than this are stubs (dims and type only) in the copy that
shape inference sees: shapes never depend on their values, and serialising 100 MB of weights for
onnx's C++ inference took longer than the inference itself (0.1-0.4 s on MobileNetV2/ResNet-50)."""


BYTES_PER_NODE = 2048
"""Inline weight bytes per node below which the model itself goes to shape inference: the copy costs
~6 us per node (every NodeProto is copied: 0.3 s at 50,000 nodes), passing a weight ~2.5 ms per MB
(serialised, parsed by onnx's C++, serialised back); values never change an inferred shape."""
PASSED_BYTES_CAP = 32 << 20
"""...and never more than this: inference holds the weights three times over for a moment (the
serialised model, onnx's C++ copy, the returned model), so memory must not grow with the node count."""
_ITEMSIZE = {1: 4, 10: 2, 11: 8, 16: 2}  # float, float16, double, bfloat16; others (8-bit...) as 4


def light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` without the data of large non-integer initializers; `model` itself when none is large,
    or when its large ones are few bytes for its node count (see BYTES_PER_NODE, PASSED_BYTES_CAP)."""
    integer = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
    external = onnx.TensorProto.EXTERNAL
    src = model.graph
    # one pass, C-level product: this runs per initializer (33,000 in a 50,000-node encoder)
    heavy = [t.data_type not in integer and prod(t.dims) > LIGHT_LIMIT for t in src.initializer]
    if not any(heavy):
        return model
    # stubbing a weight stored in an external file saves nothing: its bytes are not in the proto
    inline = sum(prod(t.dims) * _ITEMSIZE.get(t.data_type, 4) for t, stub_it in zip(src.initializer, heavy)
                 if stub_it and t.data_location != external)
    if inline <= min(BYTES_PER_NODE * len(src.node), PASSED_BYTES_CAP):
        return model
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    dst = light.graph
    dst.name = src.name
    dst.node.extend(src.node)
    dst.input.extend(src.input)
    dst.output.extend(src.output)
    dst.value_info.extend(src.value_info)
    dst.sparse_initializer.extend(src.sparse_initializer)
    for tensor, stub_it in zip(src.initializer, heavy):
        if stub_it:
            stub = dst.initializer.add()
            stub.name, stub.data_type = tensor.name, tensor.data_type
            stub.dims.extend(tensor.dims)
        else:
            dst.initializer.append(tensor)
    return light
