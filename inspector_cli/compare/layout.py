"""Shapes of captured tensors: whether two hold the same elements in the same order, and the one
relayout of onnxruntime's that can be read off the shapes alone (channels-last).

A tensor read from onnxruntime's optimised graph can be in another layout than the model declares
(the NHWC transformer, a Transpose the optimiser moved). Compared element-wise in the wrong layout,
two equal tensors give a cosine near 0 (Swin fp16: 0.0004 where the truth is 1.0), so the layer
pass checks every pair's shapes on the first sample (layers.py).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np


def same_layout(shape_a: Sequence[int], shape_b: Sequence[int]) -> bool:
    """Whether two shapes hold the same elements in the same (C) order: equal once size-1 dims are
    dropped, or one splits dims of the other ([1, 49, 768] vs [1, 7, 7, 768]). A permutation
    ([1, 3136, 32] vs [1, 32, 3136]) is not: compared element-wise it pairs unrelated values."""
    x, y = [int(d) for d in shape_a if d != 1], [int(d) for d in shape_b if d != 1]
    if int(np.prod(x, dtype=np.int64)) != int(np.prod(y, dtype=np.int64)):
        return False
    return 0 in x or _refines(x, y) or _refines(y, x)


def _refines(fine: Sequence[int], coarse: Sequence[int]) -> bool:
    """Whether consecutive groups of `fine` multiply to the dims of `coarse`, in order."""
    i = 0
    for dim in coarse:
        product = 1
        while product < dim and i < len(fine):
            product *= fine[i]
            i += 1
        if product != dim:
            return False
    return i == len(fine)


def channels_last_perm(reference: Sequence[int], shape: Sequence[int]) -> Optional[Tuple[int, ...]]:
    """(0, 2, ..., n-1, 1) when `shape` is exactly the channels-last permutation of `reference` and the
    shapes say so unambiguously (the channel count is none of the spatial sizes), else None."""
    rank = len(reference)
    perm = (0, *range(2, rank), 1)
    if rank < 3 or reference[1] in reference[2:] or tuple(shape) != tuple(reference[i] for i in perm):
        return None
    return perm


def read_shape(shape: Sequence[int], perm: Optional[Sequence[int]]) -> Tuple[int, ...]:
    """The shape of an array read with layout permutation `perm`, in the model's own layout."""
    return tuple(shape[i] for i in np.argsort(perm)) if perm else tuple(shape)
