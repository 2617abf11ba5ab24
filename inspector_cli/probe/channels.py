"""Dead units: channels (along a chosen axis) that are exactly zero on every sample.

A channel is alive once any sample holds a non-zero value in it. Only channels not yet seen
alive are examined, and a sample without any zero skips the check entirely, so after the first
samples the cost is close to nothing.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np


class ChannelTracker:
    """Which channels along `axis` have been non-zero on some sample."""

    def __init__(self, axis: int) -> None:
        self.requested_axis = axis
        self.axis: Optional[int] = None
        self.alive: Optional[np.ndarray] = None
        self.disabled: Optional[str] = None
        self.all_alive = False
        """Every channel seen non-zero: nothing left to examine (the common case after a few samples)."""

    def update(self, array: np.ndarray, zeros: int) -> None:
        """Record one sample (`zeros`: its count of exact zeros, already known)."""
        if self.disabled:
            return
        if self.alive is None:
            if array.ndim == 0 or not -array.ndim <= self.requested_axis < array.ndim:
                self.disabled = f"no axis {self.requested_axis} in shape {list(array.shape)}"
                return
            self.axis = self.requested_axis % array.ndim
            self.alive = np.zeros(array.shape[self.axis], dtype=bool)
        assert self.axis is not None
        if array.ndim <= self.axis or array.shape[self.axis] != self.alive.size:
            self.disabled = f"the channel count changed between samples ({self.alive.size} -> {list(array.shape)})"
            return
        if self.all_alive:
            return
        if zeros == 0:
            self.alive[:] = True
            self.all_alive = True
            return
        pending = np.flatnonzero(~self.alive)
        if pending.size == 0:
            self.all_alive = True
            return
        moved = np.moveaxis(array, self.axis, 0)
        block = moved[pending].reshape(pending.size, -1)
        self.alive[pending[(block != 0).any(axis=1)]] = True
        self.all_alive = bool(self.alive.all())

    def merge(self, other: "ChannelTracker") -> None:
        """Fold in the samples `other` saw after ours."""
        if self.disabled:
            return
        if other.disabled:
            self.disabled = other.disabled
        elif self.alive is None:
            self.axis = other.axis
            self.alive = None if other.alive is None else other.alive.copy()
            self.all_alive = other.all_alive
        elif other.alive is not None:
            if other.alive.size != self.alive.size:
                self.disabled = f"the channel count changed between samples ({self.alive.size} -> {other.alive.size})"
            else:
                self.alive |= other.alive
                self.all_alive = bool(self.alive.all())

    @property
    def channels(self) -> int:
        return 0 if self.alive is None else int(self.alive.size)

    def dead(self) -> List[int]:
        if self.alive is None or self.disabled:
            return []
        return [int(i) for i in np.flatnonzero(~self.alive)]
