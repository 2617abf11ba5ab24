"""Small models and samples for the `mi probe` tests."""
from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np
from onnx import helper

from .helpers import init, make_model, save, save_npz, vi


def scale_relu(path: Path, scale, shape=(1, 4, 2, 2)) -> Path:
    """m = x * scale; y = Relu(m). A per-channel `scale` of shape (1, C, 1, 1) can zero channels."""
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]
    model = make_model(nodes, [vi("x", list(shape))], [vi("y", list(shape))],
                       [init("s", np.asarray(scale, np.float32))])
    return save(model, path)


def trigger_samples(folder: Path) -> List[np.ndarray]:
    """0: ordinary; 1: huge values; 2: all negative (ReLU all zero); 3: a NaN; 4: an Inf."""
    rng = np.random.default_rng(3)
    xs = [rng.uniform(0.1, 1.0, (1, 4, 2, 2)).astype(np.float32) for _ in range(5)]
    xs[1][0, 1, 0, 0] = 5e4
    xs[2] = -np.abs(xs[2])
    xs[3][0, 2, 1, 1] = np.nan
    xs[4][0, 3, 0, 1] = np.inf
    save_npz(folder, [{"x": x} for x in xs])
    return xs
