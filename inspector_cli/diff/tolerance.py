"""Element-wise tolerance, as numpy's allclose and ONNX's backend tests check a runtime against saved outputs.

A value passes when |b - a| <= atol + rtol * |a| (a the reference); a NaN or the same ±Inf at the same
position on both sides agrees (ONNX's runner: `assert_allclose` with `equal_nan`), any other non-finite
value does not. Values are compared exactly in float64 (bfloat16, float8, int4... widened first).
Sequences are checked element by element; strings and maps are equality's business (MI805), shapes the
shape check's (MI801): both are skipped here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from .values import is_numeric_tensor, numeric


@dataclass
class ToleranceTally:
    """Values checked and outside the tolerance over the samples of one output, and the first outside."""

    rtol: float
    atol: float
    checked: int = 0
    outside: int = 0
    outside_samples: int = 0
    first: Optional[Tuple[str, str, float, float]] = None
    """(sample, where, reference value, model's value) of the first value outside."""

    def add(self, sample: str, reference: Any, got: Any) -> None:
        before = self.outside
        self._add(sample, reference, got, "")
        self.outside_samples += self.outside > before

    def _add(self, sample: str, reference: Any, got: Any, where: str) -> None:
        if isinstance(reference, (list, tuple)) and isinstance(got, (list, tuple)):
            if len(reference) == len(got):
                for index, (a, b) in enumerate(zip(reference, got)):
                    self._add(sample, a, b, f"{where}[{index}]")
            return
        if not (is_numeric_tensor(reference) and is_numeric_tensor(got)) or reference.size != got.size:
            return
        a = numeric(reference).astype(np.float64, copy=False).reshape(-1)
        b = numeric(got).astype(np.float64, copy=False).reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.abs(b - a) <= self.atol + self.rtol * np.abs(a)
            ok |= (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
        self.checked += int(a.size)
        bad = np.flatnonzero(~ok)
        self.outside += int(bad.size)
        if bad.size and self.first is None:
            index = np.unravel_index(int(bad[0]), reference.shape) if reference.ndim else ()
            at = where + "".join(f"[{int(i)}]" for i in index)
            self.first = (sample, at or "value", float(a[bad[0]]), float(b[bad[0]]))

    def message(self, name: str) -> str:
        sample, at, a, b = self.first or ("?", "?", float("nan"), float("nan"))
        return (f"output '{name}': {self.outside} of {self.checked} value(s) outside rtol {self.rtol:g}, atol "
                f"{self.atol:g} on {self.outside_samples} sample(s); first on sample {sample} at {at}: "
                f"expected {a:.9g}, got {b:.9g}")
