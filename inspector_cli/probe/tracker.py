"""One tensor over every sample: exact scalar statistics, a log histogram, channels, per-sample rows.

Per sample the work is a handful of vectorised passes over the tensor (min, max, sum, squared
deviations, bucket keys, bincount, and a zero count only when the zero buckets are not empty);
nothing of the tensor is kept. NaN and Inf are detected for free (they surface in min/max) and
only then counted and filtered out of the statistics, which describe the finite values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..core import jit
from ..diff.values import is_numeric_tensor, layout, numbers_inside, numeric
from ..results.probe import ChannelInfo, SampleRow, TensorStats
from .channels import ChannelTracker
from .moments import Moments, MomentScratch, sample_moments
from .sketch import KeyBuffer, LogHistogram

DISPLAY_BINS = 32
KERNELS = "inspector_cli.probe.kernels"
"""The compiled statistics (numba), used on large runs (core/jit.py)."""
MAX_ZERO_SAMPLE_IDS = 10


@dataclass(frozen=True)
class SampleStats:
    """One tensor's statistics on one sample: what triggers and `--per-sample` rows look at."""

    sample: str
    tensor: str
    size: int
    count: int
    min: Optional[float]
    max: Optional[float]
    mean: Optional[float]
    std: Optional[float]
    zeros: int
    nan: int
    inf: int
    """Infinities a mask did not set (the masked ones are in `masked`)."""
    masked: int = 0

    @property
    def absmax(self) -> Optional[float]:
        return None if self.min is None or self.max is None else max(abs(self.min), abs(self.max))

    @property
    def zero_frac(self) -> Optional[float]:
        return self.zeros / self.count if self.count else None

    def value(self, stat: str) -> Optional[float]:
        """A statistic by name: min max mean std absmax zero_frac nan inf nan_frac inf_frac."""
        if stat in ("nan", "inf"):
            return float(getattr(self, stat))
        if stat in ("nan_frac", "inf_frac"):
            return getattr(self, stat[:3]) / self.size if self.size else None
        return getattr(self, stat)

    def row(self) -> SampleRow:
        return SampleRow(sample=self.sample, tensor=self.tensor, min=self.min, max=self.max, mean=self.mean,
                         std=self.std, absmax=self.absmax, zero_frac=self.zero_frac, nan=self.nan, inf=self.inf)


def as_float(array: np.ndarray) -> np.ndarray:
    """float32/float64 arrays as they are (C-contiguous); others widened without loss where possible."""
    if array.dtype == np.float32 or array.dtype == np.float64:
        return np.ascontiguousarray(array)
    if array.dtype.kind in "iu" and array.dtype.itemsize >= 4:
        return array.astype(np.float64)
    return array.astype(np.float32)


class Workspace:
    """Buffers shared by all trackers of a run (one tensor is processed at a time), and the compiled
    kernels when the run uses them (`use_kernels`, core/jit.py)."""

    def __init__(self) -> None:
        self.scratch = MomentScratch()
        self.keys = KeyBuffer()
        self.kernels: Any = None
        self.scan: Any = None
        self._wanted = False

    def want_kernels(self) -> None:
        """Start loading the compiled kernels (core/jit.py); `settle` puts them to use once loaded."""
        jit.prefetch(KERNELS)
        self._wanted = True

    def settle(self) -> None:
        """Use the kernels asked for by `want_kernels` from now on (waits for them to load; None if
        numba is unavailable: the numpy path, the same bits)."""
        if self._wanted:
            self._wanted = False
            self.use_kernels(jit.kernels(KERNELS))

    def use_kernels(self, kernels: Any) -> None:
        """Read float32 tensors with `kernels` (probe/kernels.py: the same bits in two passes; None: numpy)."""
        self.kernels = kernels
        self.scan = kernels.Scan() if kernels is not None else None


class ProbeTracker:
    """Streaming statistics of one tensor; `update` once per sample, `finish` for the result."""

    def __init__(self, name: str, *, op_type: str = "", node: str = "", channel_axis: Optional[int] = 1,
                 keep_rows: bool = False, workspace: Optional[Workspace] = None, hist_sample: int = 0) -> None:
        self.name, self.op_type, self.node = name, op_type, node
        self.hist_sample = hist_sample
        """0: count every value in the histogram (rank-exact percentiles); N: at most about N values per
        sample, a systematic 1-in-k sample whose phase moves from sample to sample (faster, approximate)."""
        self.channel_axis = channel_axis
        self.keep_rows = keep_rows
        self.first_index = 0
        """Data-set index of the first sample this tracker sees (a block's start): the phase of
        --hist-sample follows the data-set index, however the samples are cut into blocks."""
        self.workspace = workspace or Workspace()
        self.reset()

    def reset(self) -> None:
        """Forget every sample (used when a chunk is re-run on fewer samples)."""
        self.dtype = ""
        self.shape: Optional[List[int]] = None
        self.notes: List[str] = []
        self.samples = 0
        self.size = 0
        self.moments = Moments()
        self.hist = LogHistogram()
        self.min = math.inf
        self.max = -math.inf
        self.zeros = self.nan = self.inf = 0
        self.masked = self.masked_rows = 0
        self.zero_samples = 0
        self.zero_sample_ids: List[str] = []
        self.max_stride = 1
        self.channels = ChannelTracker(self.channel_axis) if self.channel_axis is not None else None
        self.rows: List[SampleRow] = []

    def update(self, sample: str, array: np.ndarray, masked: int = 0, masked_rows: int = 0) -> SampleStats:
        """Add one sample's value of the tensor; returns that sample's statistics. `masked` of its
        infinities are a mask's intentional values (core/masks.py), counted apart from `inf`;
        `masked_rows`: rows a Softmax made NaN because its whole input row was masked."""
        if is_numeric_tensor(array) and array.dtype.kind not in "biuf":  # bfloat16, float8, int4...
            self._note_layout(array)
            return self._update_numbers(sample, numeric(array), array.size, masked, masked_rows, channels=True)
        if not (isinstance(array, np.ndarray) and array.dtype.kind in "biuf"):
            return self._update_value(sample, array)
        self._note_layout(array)
        return self._update_numbers(sample, array, array.size, masked, masked_rows, channels=True)

    def _update_value(self, sample: str, value: Any) -> SampleStats:
        """A value that is no numeric tensor (issue 29): a sequence's or map's numbers are measured
        (one after another), its length or item count kept as its shape; strings are counted only."""
        shown = layout(value)
        if self.shape is None:
            self.shape, self.dtype = list(shown.shape), shown.dtype
        elif list(shown.shape) != self.shape:
            self._note(f"shape varies between samples ({self.shape} then {list(shown.shape)})")
        numbers, items = numbers_inside(value)
        if numbers is None:
            self._note(f"values of type {shown.dtype} are not numeric: counted ({items} per sample), not measured")
            self.samples += 1
            return SampleStats(sample, self.name, items, 0, None, None, None, None, 0, 0, 0)
        self._note(f"a {shown.dtype} of {items} item(s): the numbers inside are measured, one after another")
        return self._update_numbers(sample, numbers, numbers.size, 0, 0, channels=False)

    def _update_numbers(self, sample: str, array: np.ndarray, size: int, masked: int, masked_rows: int, *,
                        channels: bool) -> SampleStats:
        work = as_float(array)
        flat = work.reshape(-1)
        self.samples += 1
        self.size += flat.size
        nan = inf = 0
        lo = hi = None
        done: Optional[Tuple[int, float, float]] = None
        if self.workspace.kernels is not None and flat.dtype == np.float32 and flat.size and \
                not (self.hist_sample and flat.size > self.hist_sample):
            flat, lo, hi, nan, inf, done = self._scanned(flat)
        elif flat.size:
            lo, hi = flat.min(), flat.max()
            if not (math.isfinite(lo) and math.isfinite(hi)):  # NaN propagates through min/max
                finite = np.isfinite(flat)
                nan = int(np.count_nonzero(np.isnan(flat)))
                inf = flat.size - nan - int(np.count_nonzero(finite))
                flat = flat[finite]
                lo, hi = (flat.min(), flat.max()) if flat.size else (None, None)
        masked = min(masked, inf)
        inf -= masked
        self.nan += nan
        self.inf += inf
        self.masked += masked
        self.masked_rows += masked_rows
        stats = self._finite(sample, flat, lo, hi, nan, inf, size, done)
        if masked:
            stats = replace(stats, masked=masked)
        if self.channels is not None and channels:
            self.channels.update(work, stats.zeros)
        if self.keep_rows:
            self.rows.append(stats.row())
        return stats

    def _scanned(self, flat: np.ndarray) -> Tuple[np.ndarray, Any, Any, int, int, Optional[Tuple[int, float, float]]]:
        """The compiled pass over a float32 tensor (probe/kernels.py): its finite values counted into the
        histogram, and what `_finite` would compute from them (the same bits), ready."""
        ws = self.workspace
        lo, hi, zeros, nan, inf, plus_zero, minus_zero = ws.kernels.scan(flat, self.hist.counts, ws.scan)
        if nan or inf:
            flat = flat[np.isfinite(flat)]  # as the numpy path: its statistics describe the finite values
            if not flat.size:
                return flat, None, None, nan, inf, (0, 0.0, 0.0)
        if plus_zero and minus_zero:  # which zero numpy's min/max return depends on their positions
            lo = flat.min() if lo == 0 else lo
            hi = flat.max() if hi == 0 else hi
        if nan or inf:
            mean, m2 = sample_moments(flat, ws.scratch)
        else:
            n = flat.size
            mean = float(flat.sum(dtype=flat.dtype)) / n
            shift = np.float32(mean)
            m2 = float(ws.kernels.squared_deviations(flat, shift))
            m2 = max(m2 - n * (float(shift) - mean) ** 2, 0.0)  # as sample_moments: about the rounded mean
        return flat, lo, hi, nan, inf, (zeros, mean, m2)

    def _finite(self, sample: str, flat: np.ndarray, lo, hi, nan: int, inf: int, size: int,
                done: Optional[Tuple[int, float, float]] = None) -> SampleStats:
        """One sample's statistics of its finite values `flat` (`done`: zeros, mean and M2 already computed,
        the histogram already counted, by `_scanned`)."""
        n = flat.size
        if n == 0:
            return SampleStats(sample, self.name, size, 0, None, None, None, None, 0, nan, inf)
        if done is not None:
            zeros, mean, m2 = done
            return self._add_finite(sample, n, lo, hi, mean, m2, zeros, nan, inf, size)
        ws = self.workspace
        keyed = flat if flat.dtype == np.float32 else flat.astype(np.float32)
        stride = 1
        if self.hist_sample and n > self.hist_sample:
            stride = -(-n // self.hist_sample)
            keyed = keyed[(self.first_index + self.samples - 1) % stride::stride]
            self.max_stride = max(self.max_stride, stride)
        in_zero_buckets = self.hist.add_keys(ws.keys.keys(keyed))
        zeros = 0
        maybe_zero = in_zero_buckets > 0 if stride == 1 else lo <= 0 <= hi
        if maybe_zero:  # the zero buckets also hold tiny subnormals: count exactly
            mask = ws.scratch.get(n, np.dtype(bool))
            np.equal(flat, 0, out=mask)
            zeros = int(np.count_nonzero(mask))
        mean, m2 = sample_moments(flat, ws.scratch)
        return self._add_finite(sample, n, lo, hi, mean, m2, zeros, nan, inf, size)

    def _add_finite(self, sample: str, n: int, lo: Any, hi: Any, mean: float, m2: float, zeros: int, nan: int,
                    inf: int, size: int) -> SampleStats:
        self.moments.merge(n, mean, m2)
        lo, hi = float(lo), float(hi)
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.zeros += zeros
        if zeros == n and nan == 0 and inf == 0 and not self.masked:
            self.zero_samples += 1
            if len(self.zero_sample_ids) < MAX_ZERO_SAMPLE_IDS:
                self.zero_sample_ids.append(sample)
        return SampleStats(sample, self.name, size, n, lo, hi, mean, math.sqrt(m2 / n), zeros, nan, inf)

    def merge(self, other: "ProbeTracker") -> "ProbeTracker":
        """Fold in the statistics of the samples `other` saw after ours.

        Counts, extremes, histograms and channels merge exactly; moments by Chan's update, so a
        result is reproducible to the last bit when the same partials merge in the same order.
        """
        if other.samples == 0:
            return self
        if self.shape is None:
            self.shape, self.dtype = other.shape, other.dtype
        elif other.shape is not None and other.shape != self.shape:
            self._note(f"shape varies between samples ({self.shape} then {other.shape})")
        for note in other.notes:
            self._note(note)
        self.samples += other.samples
        self.size += other.size
        self.moments.merge(other.moments.count, other.moments.mean, other.moments.m2)
        self.hist.merge(other.hist)
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)
        self.zeros += other.zeros
        self.nan += other.nan
        self.inf += other.inf
        self.masked += other.masked
        self.masked_rows += other.masked_rows
        self.zero_samples += other.zero_samples
        self.zero_sample_ids = (self.zero_sample_ids + other.zero_sample_ids)[:MAX_ZERO_SAMPLE_IDS]
        self.max_stride = max(self.max_stride, other.max_stride)
        if self.channels is not None and other.channels is not None:
            self.channels.merge(other.channels)
        self.rows.extend(other.rows)
        return self

    def _note(self, note: str) -> None:
        """Add a note unless one of its kind is there (the first occurrence is the one reported)."""
        kind = next((k for k in ("shape varies", "not numeric", "the numbers inside") if k in note), note)
        if not any(kind in n for n in self.notes):
            self.notes.append(note)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("workspace", None)  # scratch buffers stay in their process
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.workspace = Workspace()

    def _note_layout(self, array: np.ndarray) -> None:
        if self.shape is None:
            self.shape, self.dtype = [int(d) for d in array.shape], layout(array).dtype  # ONNX's name of bfloat16...
        elif list(array.shape) != self.shape and not any("shape varies" in n for n in self.notes):
            self.notes.append(f"shape varies between samples ({self.shape} then {list(array.shape)})")

    def finish(self) -> TensorStats:
        """The tensor's statistics over every sample seen."""
        count = self.moments.count
        channels = None
        if self.channels is not None and self.channels.alive is not None and not self.channels.disabled:
            channels = ChannelInfo(axis=int(self.channels.axis or 0), channels=self.channels.channels,
                                   dead=self.channels.dead())
        notes = list(self.notes)
        if self.channels is not None and self.channels.disabled:
            notes.append(f"channels not tracked: {self.channels.disabled}")
        if self.max_stride > 1:
            notes.append(f"percentiles, outliers and histogram from a 1-in-{self.max_stride} sample of the values "
                         "(--hist-sample): approximate")
        base = dict(name=self.name, op_type=self.op_type, node=self.node, dtype=self.dtype, shape=self.shape or [],
                    samples=self.samples, count=count, nan=self.nan, inf=self.inf, channels=channels,
                    zero_samples=self.zero_samples, zero_sample_ids=list(self.zero_sample_ids), notes=notes,
                    masked=self.masked, masked_rows=self.masked_rows)
        if count == 0:
            return TensorStats(**base)  # type: ignore[arg-type]
        mean, std = self.moments.mean, self.moments.std
        outliers: Dict[str, object] = {"outlier_ratio": 0.0, "outlier_bounds": [0.0, 0.0]}
        counted = self.hist.total  # == count unless the histogram samples (--hist-sample)
        if std > 0 and counted:
            estimate, low, high = self.hist.count_beyond(mean - 3 * std, mean + 3 * std)
            outliers = {"outlier_ratio": estimate / counted, "outlier_bounds": [low / counted, high / counted]}
        display = self.hist.display(self.min, self.max, DISPLAY_BINS)
        if counted and counted != count:
            display = [round(c * count / counted) for c in display]
        return TensorStats(
            **base,  # type: ignore[arg-type]
            min=self.min, max=self.max, mean=mean, std=std, absmax=max(abs(self.min), abs(self.max)),
            percentiles=self.hist.percentiles(lo=self.min, hi=self.max), zero_frac=self.zeros / count,
            histogram=display, **outliers)  # type: ignore[arg-type]
