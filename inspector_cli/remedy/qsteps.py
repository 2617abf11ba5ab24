"""Error in units of the quantisation step: |candidate - reference| / scale.

0.5 is rounding, 1 an off-by-one tie, tens of steps mean saturation or a wrong scale. Pure numpy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np


@dataclass(frozen=True)
class StepError:
    """Max and mean |diff| / scale over the finite positions of a tensor."""

    max_steps: float
    mean_steps: float
    count: int

    def to_dict(self) -> Dict[str, float]:
        return {"max_steps": self.max_steps, "mean_steps": self.mean_steps, "count": self.count}


def quant_step_error(reference: np.ndarray, candidate: np.ndarray, scale: "np.ndarray | float",
                     axis: Optional[int] = None) -> StepError:
    """|candidate - reference| / scale, reduced to max and mean.

    `scale` is a scalar (per-tensor) or a 1-D array with one scale per slice along `axis`
    (per-channel, the DequantizeLinear convention). Positions where either side is NaN/Inf are left
    out (they are counted elsewhere as non-finite); a zero scale is an error of the caller's data.
    """
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if ref.shape != cand.shape:
        raise ValueError(f"shapes differ: {ref.shape} vs {cand.shape}")
    steps = np.asarray(scale, dtype=np.float64)
    if steps.size > 1 or (steps.ndim == 1 and axis is not None):
        if axis is None:
            raise ValueError("a per-channel scale needs its axis")
        axis = axis % ref.ndim
        if steps.size != ref.shape[axis]:
            raise ValueError(f"{steps.size} scales for axis {axis} of length {ref.shape[axis]}")
        shape = [1] * ref.ndim
        shape[axis] = steps.size
        steps = steps.reshape(shape)
    else:
        steps = steps.reshape(())
    if np.any(steps <= 0):
        raise ValueError("quantisation scale must be positive")
    ratio = np.abs(cand - ref) / steps
    finite = ratio[np.isfinite(ratio)]
    if finite.size == 0:
        return StepError(0.0, 0.0, 0)
    return StepError(float(finite.max()), float(finite.mean()), int(finite.size))
