"""A copy of a model for ONNX shape inference: the structure without the weights' bytes."""
from __future__ import annotations

import onnx

LIGHT_LIMIT = 64
"""Float initializers with more elements than this are stubs (dims and type only) in the copy that
shape inference sees: shapes never depend on their values, and serialising 100 MB of weights for
onnx's C++ inference took longer than the inference itself (0.1-0.4 s on MobileNetV2/ResNet-50)."""


def light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` without the data of large non-integer initializers; `model` itself when none is large."""
    integer = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)

    def heavy(tensor: onnx.TensorProto) -> bool:
        count = 1
        for dim in tensor.dims:
            count *= int(dim)
        return count > LIGHT_LIMIT and tensor.data_type not in integer

    src = model.graph
    if not any(heavy(t) for t in src.initializer):
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
    for tensor in src.initializer:
        if heavy(tensor):
            stub = dst.initializer.add()
            stub.name, stub.data_type = tensor.name, tensor.data_type
            stub.dims.extend(tensor.dims)
        else:
            dst.initializer.append(tensor)
    return light
