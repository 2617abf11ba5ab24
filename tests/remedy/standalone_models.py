"""A QDQ pair big enough for the lazy loader (> 1 MiB: its weights become references into the
file) with torch's way of writing Relu6 (Clip whose bounds are Constant nodes, which quantize_static
folds into the Conv before it), as in MobileNetV2 exports (issue 29)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .models import image_samples, quantize_qdq

HIDDEN = 768  # fc1 is 512 x 768 floats: 1.5 MiB in fp32, 0.4 MiB in int8


def relu6_cnn_fp32() -> onnx.ModelProto:
    """x[batch,3,8,8] -> (Conv -> Clip(0, 6)) x 2 -> Flatten -> Gemm(512 -> 768) -> Relu -> Gemm -> logits."""
    rng = np.random.default_rng(11)
    inits: List[onnx.TensorProto] = []
    nodes: List[onnx.NodeProto] = []
    x = "x"
    for i, cin in enumerate((3, 8), start=1):
        inits += [numpy_helper.from_array(rng.normal(0, np.sqrt(2 / (cin * 9)), (8, cin, 3, 3)).astype(np.float32),
                                          f"conv{i}.weight"),
                  numpy_helper.from_array(rng.normal(0, 0.05, 8).astype(np.float32), f"conv{i}.bias")]
        nodes.append(helper.make_node("Conv", [x, f"conv{i}.weight", f"conv{i}.bias"], [f"conv{i}_out"],
                                      name=f"conv{i}", pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
        for bound, value in (("min", 0.0), ("max", 6.0)):  # torch.onnx: Clip bounds as Constant nodes
            nodes.append(helper.make_node("Constant", [], [f"clip{i}_{bound}"], name=f"clip{i}_{bound}_const",
                                          value=numpy_helper.from_array(np.array(value, np.float32))))
        nodes.append(helper.make_node("Clip", [f"conv{i}_out", f"clip{i}_min", f"clip{i}_max"], [f"act{i}"],
                                      name=f"clip{i}"))
        x = f"act{i}"
    nodes.append(helper.make_node("Flatten", [x], ["flat"], name="flatten"))
    inits += [numpy_helper.from_array(rng.normal(0, 1 / np.sqrt(512), (HIDDEN, 512)).astype(np.float32), "fc1.weight"),
              numpy_helper.from_array(rng.normal(0, 0.01, HIDDEN).astype(np.float32), "fc1.bias"),
              numpy_helper.from_array(rng.normal(0, 1 / np.sqrt(HIDDEN), (10, HIDDEN)).astype(np.float32), "fc2.weight"),
              numpy_helper.from_array(rng.normal(0, 0.01, 10).astype(np.float32), "fc2.bias")]
    nodes += [helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["fc1_out"], name="fc1", transB=1),
              helper.make_node("Relu", ["fc1_out"], ["hidden"], name="relu_fc1"),
              helper.make_node("Gemm", ["hidden", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1)]
    graph = helper.make_graph(nodes, "relu6_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_relu6_pair(folder: Path) -> Dict[str, object]:
    """fp32.onnx, int8.onnx (per-channel QDQ by quantize_static), data/ with 8 samples, in `folder`."""
    from ..fixtures.helpers import save_npz

    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(relu6_cnn_fp32(), folder / "fp32.onnx")
    calibration = image_samples(16, seed=1)
    quantize_qdq(folder / "fp32.onnx", folder / "int8.onnx", calibration, per_channel=True)
    int8 = onnx.load(folder / "int8.onnx")
    used = {t for n in int8.graph.node for t in n.input}
    # the Constants of the folded Clips are dead: drop them, as quant_pre_process did on MobileNetV2
    dead = [n for n in int8.graph.node if n.op_type == "Constant" and not used & set(n.output)]
    for node in dead:
        int8.graph.node.remove(node)
    onnx.save(int8, folder / "int8.onnx")
    samples = image_samples(8, seed=5)
    save_npz(folder / "data", samples)
    return {"folder": folder, "samples": samples, "calibration": calibration}


def deep_cnn_fp32(depth: int = 16) -> onnx.ModelProto:
    """x[1,8,8,8] -> depth x (Conv 3x3 8->8 -> Relu) -> Flatten -> Gemm -> logits[1,10]: more quantised
    nodes than the sensitivity phase measures (12), all alike, so only a measurement finds a bad one."""
    rng = np.random.default_rng(3)
    inits: List[onnx.TensorProto] = []
    nodes: List[onnx.NodeProto] = []
    x = "x"
    for i in range(1, depth + 1):
        inits += [numpy_helper.from_array(rng.normal(0, np.sqrt(2 / 72), (8, 8, 3, 3)).astype(np.float32), f"conv{i}.weight"),
                  numpy_helper.from_array(rng.normal(0, 0.05, 8).astype(np.float32), f"conv{i}.bias")]
        nodes += [helper.make_node("Conv", [x, f"conv{i}.weight", f"conv{i}.bias"], [f"conv{i}_out"], name=f"conv{i}",
                                   pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                  helper.make_node("Relu", [f"conv{i}_out"], [f"relu{i}"], name=f"relu{i}")]
        x = f"relu{i}"
    nodes.append(helper.make_node("Flatten", [x], ["flat"], name="flatten"))
    inits += [numpy_helper.from_array(rng.normal(0, 1 / np.sqrt(512), (10, 512)).astype(np.float32), "fc.weight"),
              numpy_helper.from_array(np.zeros(10, np.float32), "fc.bias")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "deep_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def reverse_input_channels(int8: onnx.ModelProto, node: str) -> onnx.ModelProto:
    """`node`'s int8 weight with its input-channel axis reversed (scales per output channel unchanged:
    its weight SQNR per output channel is what it was, the function is wrong)."""
    model = onnx.ModelProto.FromString(int8.SerializeToString())
    producer = {o: n for n in model.graph.node for o in n.output}
    conv = next(n for n in model.graph.node if n.name == node)
    tensor = next(t for t in model.graph.initializer if t.name == producer[conv.input[1]].input[0])
    tensor.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(tensor)[:, ::-1]), tensor.name))
    return model


def deep_samples(count: int, seed: int) -> List[Dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(0, 1, (1, 8, 8, 8)).astype(np.float32)} for _ in range(count)]
