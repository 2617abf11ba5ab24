"""Small models whose placement is known: a CNN block every provider runs whole, and one with an op
OpenVINO's provider does not take (Det), which onnxruntime then places on CPU."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper

from ..fixtures.helpers import F, init, make_model, save, vi


def conv_block(folder: Path) -> Path:
    """conv -> relu -> sig -> mul (x * sigmoid(x), the SiLU of a CNN): 4 nodes."""
    w = np.random.RandomState(0).randn(4, 3, 3, 3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sig"),
             helper.make_node("Mul", ["r", "s"], ["y"], name="mul")]
    return save(make_model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 8, 8])], [init("w", w)]),
                folder / "conv_block.onnx")


def conv_block_dynamic(folder: Path) -> Path:
    """conv_block with a dynamic batch dimension: QNN's HTP backend takes no node of it (static
    shapes only), and leaves all 4 to CPU without a word."""
    w = np.random.RandomState(0).randn(4, 3, 3, 3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sig"),
             helper.make_node("Mul", ["r", "s"], ["y"], name="mul")]
    return save(make_model(nodes, [vi("x", ["N", 3, 8, 8])], [vi("y", ["N", 4, 8, 8])], [init("w", w)]),
                folder / "conv_block_dynamic.onnx")


def with_det(folder: Path) -> Path:
    """relu -> det -> sig: Det (a determinant) has no OpenVINO translation in this provider."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Det", ["a"], ["b"], name="det"),
             helper.make_node("Sigmoid", ["b"], ["y"], name="sig")]
    return save(make_model(nodes, [vi("x", [4, 4])], [vi("y", [], F)]), folder / "with_det.onnx")


def conv_then_det(folder: Path) -> Path:
    """conv -> relu -> sig -> mul -> det -> tanh. OpenVINO takes the CNN block (one partition) and tanh,
    Det stays on CPU. Exposing the Conv's output, which relu also reads, makes OpenVINO's provider drop
    that block (a Conv whose output leaves a partial cluster and is consumed inside it): conv, relu,
    sig and mul move to CPU (onnxruntime-openvino 1.24)."""
    w = np.random.RandomState(0).randn(4, 3, 3, 3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sig"),
             helper.make_node("Mul", ["r", "s"], ["m"], name="mul"),
             helper.make_node("Det", ["m"], ["d"], name="det"),
             helper.make_node("Tanh", ["d"], ["y"], name="tanh")]
    return save(make_model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4])], [init("w", w)]),
                folder / "conv_then_det.onnx")
