"""The static pass: weights (initializers and Constant nodes) that already hold NaN/Inf.

It needs no inference, so it is reported at once, before any sample runs.
"""
from __future__ import annotations

from typing import List

import numpy as np
from onnx import AttributeProto, numpy_helper

from ..core.graph import ModelGraph, load_external_tensor
from ..core.masks import MaskAnalysis
from ..core.weights import nonfinite_initializers
from ..results.nan_bisect import WeightIssue
from .values import FP16_MAX


def nonfinite_weights(graph: ModelGraph) -> List[WeightIssue]:
    """Initializers and top-level Constant values holding NaN/Inf, with the nodes reading them."""
    issues = [WeightIssue(tensor=w.tensor, nan=w.nan, inf=w.inf, size=w.size, consumers=list(w.consumers))
              for w in nonfinite_initializers(graph)]
    for node in graph.nodes:
        if node.op_type != "Constant":
            continue
        for attr in graph.node_proto(node.name).attribute:
            if attr.type != AttributeProto.TENSOR:
                continue
            try:
                value = numpy_helper.to_array(load_external_tensor(graph, attr.t))
            except (ValueError, TypeError, KeyError):
                continue
            if value.dtype.kind != "f" or np.isfinite(value).all():
                continue
            out = node.outputs[0]
            issues.append(WeightIssue(tensor=out, nan=int(np.isnan(value).sum()), inf=int(np.isinf(value).sum()),
                                      size=int(value.size),
                                      consumers=[c.name for c in graph.consumers.get(out, [])]))
    return issues


def unintended_nonfinite_weights(graph: ModelGraph, masks: MaskAnalysis) -> List[WeightIssue]:
    """`nonfinite_weights` but the fills of `masks`: the -Inf an attention mask sets on purpose
    (core/masks.py) is no defect; a fill never holds NaN, so a weight with NaN is always kept."""
    return [w for w in nonfinite_weights(graph) if w.nan or not masks.is_fill(w.tensor)]


def fp16_unsafe_weights(graph: ModelGraph) -> List[str]:
    """`--simulate fp16`: weights with values beyond the fp16 range (they become Inf when converted)."""
    from ..core.weights import finite_abs_max

    notes: List[str] = []
    for tensor in graph.model.graph.initializer:
        top = finite_abs_max(graph, tensor)  # external data streamed, not read whole (issue 33)
        if top is not None and top > FP16_MAX:
            notes.append(f"weight '{tensor.name}' holds values up to |x| = {top:.6g}, "
                         f"beyond the fp16 range ({FP16_MAX:g}): it becomes Inf when converted")
    return notes
