from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.remedy.qstep_layers import tensor_scales


def _model_with_lazy_per_channel_scale() -> onnx.ModelProto:
    """A per-tensor DequantizeLinear (scale 0.5, inline) and a per-channel one whose 1,100 scales are a
    reference into the model file, as the lazy loader leaves them (the file is not there)."""
    per_tensor = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "s_tensor")
    per_channel = TensorProto(name="s_channel", data_type=TensorProto.FLOAT, dims=[1100])
    per_channel.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "missing_model.onnx"), ("offset", "0"), ("length", "4400")):
        entry = per_channel.external_data.add()
        entry.key, entry.value = key, value
    nodes = [helper.make_node("DequantizeLinear", ["q1", "s_tensor"], ["x1"]),
             helper.make_node("DequantizeLinear", ["q2", "s_channel"], ["x2"], axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("q1", TensorProto.INT8, [4]),
                                           helper.make_tensor_value_info("q2", TensorProto.INT8, [1100, 2])],
                              [helper.make_tensor_value_info("x1", TensorProto.FLOAT, [4]),
                               helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1100, 2])],
                              initializer=[per_tensor, per_channel])
    return helper.make_model(graph)


def test_per_channel_scale_is_skipped_without_reading_its_bytes():
    # the per-channel scale used to be read in full (to_array) before its size was checked, which
    # failed on the lazily loaded reference ("should be stored in ..., but it is not regular file")
    assert tensor_scales(_model_with_lazy_per_channel_scale()) == {"x1": 0.5}
