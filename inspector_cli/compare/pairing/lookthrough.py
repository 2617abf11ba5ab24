"""Ops one graph runs separately and the other folds into its neighbour, looked through when pairing.

A zero `Pad` in front of a `Conv` is the Conv's own padding: exporters emit it for asymmetric
("same") padding, and onnxruntime's `quant_pre_process` (run before every static quantisation)
folds it into the Conv's `pads`. The float model then has Pad -> Conv where its quantised copy
has one QLinearConv reading the Pad's input; without looking through the Pad, the Conv's input
has no counterpart and nothing downstream pairs (MobileNetV2 QOperator: 30 of 116 tensors).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .semantic import SemanticGraph, family

PADDED_FAMILIES = frozenset({"Conv"})
"""Ops whose zero padding a preceding constant-zero Pad can be folded into."""


def padded_source(sem: SemanticGraph, tensor: str) -> Optional[str]:
    """The input of the zero Pad (a chain of its own) that produced `tensor` and that only a Conv reads:
    the tensor a graph without that Pad feeds to the Conv. None when `tensor` is no such Pad's output."""
    chain = sem.chain_of.get(tensor)
    if chain is None or len(chain.nodes) != 1 or chain.head.op_type != "Pad" or len(chain.inputs) != 1:
        return None
    pad = chain.head
    mode = sem.graph.node_attribute(pad.name, "mode", b"constant")
    if (mode.decode() if isinstance(mode, bytes) else str(mode)) != "constant":
        return None
    if len(pad.inputs) > 2 and pad.inputs[2]:
        value = sem.array(sem.canonical(pad.inputs[2]))
        if value is None or np.any(np.asarray(value) != 0):
            return None
    if len(pad.inputs) > 1 and pad.inputs[1]:
        if sem.canonical(pad.inputs[1]) not in sem.static:
            return None  # pads that depend on the data
        # exporters compute "same" pads from shapes (Shape -> ... -> Cast): static, but not stored
        pads = sem.array(sem.canonical(pad.inputs[1]))
    else:
        pads = sem.graph.node_attribute(pad.name, "pads")
    if pads is not None and np.any(np.asarray(pads) < 0):
        return None  # negative pads crop: nothing a Conv's padding does
    consumers = sem.consumers(tensor)
    if not consumers or any(family(c.op_type) not in PADDED_FAMILIES for c in consumers):
        return None
    return chain.inputs[0]
