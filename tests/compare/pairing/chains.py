"""Graph building shared by the pairing tests: one chain step (Conv, BatchNormalization, Add or a
one-input op) appended to a node list, its weights to the initializers."""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import helper

from ...fixtures.helpers import init

W = np.ones((2, 3, 1, 1), np.float32)
"""The Conv weight every chain reads (2 output channels from 3)."""


def append_step(op: str, source: str, out: str, nodes: List[onnx.NodeProto], inits: List[onnx.TensorProto]) -> None:
    """`source -> op -> out`: a Conv reads `w`, an Add adds `c`, a BatchNormalization gets unit
    statistics over 2 channels; any other op takes `source` alone."""
    if op == "Conv":
        nodes.append(helper.make_node("Conv", [source, "w"], [out], name=out))
    elif op == "BatchNormalization":
        for p, v in (("sc", 1.0), ("b", 0.0), ("mu", 0.0), ("var", 1.0)):
            inits.append(init(p, np.full(2, v, np.float32)))
        nodes.append(helper.make_node(op, [source, "sc", "b", "mu", "var"], [out], name=out))
    elif op == "Add":
        nodes.append(helper.make_node("Add", [source, "c"], [out], name=out))
    else:
        nodes.append(helper.make_node(op, [source], [out], name=out))
