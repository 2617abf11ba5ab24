"""Another calibration of a tensor: percentile and entropy ranges measured on the calibration samples.

The values are those of the float model (the QDQ model with every quantised node excluded,
`exclusion.exclude_qdq`: the fp32 function under the QDQ model's tensor names), on the samples the user
calibrated with (`mi fix --calibration DIR`; without it, the evaluation samples). Per tensor, the candidate
ranges are percentile ones (99.99 and 99.999 of the values at each end, what onnxruntime's `Percentile`
calibrator computes) and the entropy one (the KL-divergence threshold of |x|, onnxruntime's `Entropy`,
TensorRT's method); the range kept is the one whose fake-quantised values have the smallest mean squared
error over the samples, and only when that is smaller than the error of the range the model holds
(MinMax): a tensor whose own calibration is already best gets no `calibration` remedy.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np
import onnx
from onnx import helper

from ..core.runner import RuntimeConfig, Session
from ..core.types import TensorMap
from .requant import PairParams, params_for_range

PERCENTILES = (99.99, 99.999)
KEPT_VALUES = 1 << 16
"""Values kept per tensor (a seeded sub-sample beyond it): the percentiles and errors are read from these."""
BINS = 2048
SEED = 20240518


def fake_quantize(values: np.ndarray, params: PairParams) -> np.ndarray:
    low, high = params.bounds()
    q = np.clip(np.round(values / params.scale) + params.zero_point, low, high)
    return (q - params.zero_point) * params.scale


def entropy_threshold(values: np.ndarray, levels: int = 128) -> float:
    """The |x| threshold minimising the KL divergence between the histogram of |x| and its quantised copy
    on `levels` levels (TensorRT's entropy calibration, as onnxruntime's Entropy calibrator computes it)."""
    magnitude = np.abs(values.astype(np.float64))
    top = float(magnitude.max()) if magnitude.size else 0.0
    if top == 0.0:
        return 0.0
    hist, edges = np.histogram(magnitude, bins=BINS, range=(0.0, top))
    best, best_kl = top, np.inf
    for stop in range(levels, BINS + 1, max(1, (BINS - levels) // 64)):
        reference = hist[:stop].astype(np.float64).copy()
        reference[stop - 1] += hist[stop:].sum()  # the clipped tail lands in the last bin
        merged = np.array_split(hist[:stop].astype(np.float64), levels)
        expanded = np.concatenate([np.where(chunk > 0, chunk.sum() / max(1, np.count_nonzero(chunk)), 0.0)
                                   for chunk in merged])
        p, q = reference / reference.sum(), expanded / max(expanded.sum(), 1e-30)
        mask = p > 0
        kl = float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12))))
        if kl < best_kl:
            best, best_kl = float(edges[stop]), kl
    return best


def candidate_ranges(values: np.ndarray) -> List[Tuple[str, float, float]]:
    """(method, rmin, rmax) of each other calibration of these values."""
    low, high = float(values.min()), float(values.max())
    out = [(f"percentile {p:g}", float(np.percentile(values, 100.0 - p)), float(np.percentile(values, p)))
           for p in PERCENTILES]
    threshold = entropy_threshold(values)
    out.append(("entropy", max(low, -threshold), min(high, threshold)))
    return out


def best_range(values: np.ndarray, current: PairParams) -> Tuple[str, float, float, float, float]:
    """(method, rmin, rmax, its mean squared error, the current parameters' error) of the best other range."""
    values = values.astype(np.float64)
    now = float(np.mean((fake_quantize(values, current) - values) ** 2))
    best = ("minmax", *current.range(), now, now)
    for method, rmin, rmax in candidate_ranges(values):
        params = params_for_range(rmin, rmax, current.dtype, current.symmetric)
        error = float(np.mean((fake_quantize(values, params) - values) ** 2))
        if error < best[3]:
            best = (method, rmin, rmax, error, now)
    return best


def tensor_values(model: onnx.ModelProto, tensors: Sequence[str], samples: Sequence[TensorMap],
                  runtime: RuntimeConfig = RuntimeConfig()) -> Dict[str, np.ndarray]:
    """tensor -> its values over the samples (flattened, a seeded sub-sample of `KEPT_VALUES` beyond that),
    from `model` with those tensors added as outputs."""
    exposed = onnx.ModelProto.FromString(model.SerializeToString())
    present = {o.name for o in exposed.graph.output}
    for name in tensors:
        if name not in present:
            exposed.graph.output.append(helper.ValueInfoProto(name=name))
    session = Session(exposed.SerializeToString(), runtime, label="calibration")
    chunks: Dict[str, List[np.ndarray]] = {t: [] for t in tensors}
    for k, feeds in enumerate(samples):
        outputs = session.run(feeds, sample=f"calibration{k}")
        for name in tensors:
            value = outputs.get(name)
            if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating):
                chunks[name].append(value.reshape(-1).astype(np.float32))
    rng = np.random.default_rng(SEED)
    values: Dict[str, np.ndarray] = {}
    for name, parts in chunks.items():
        if not parts:
            continue
        joined = np.concatenate(parts)
        joined = joined[np.isfinite(joined)]
        if joined.size > KEPT_VALUES:
            keep = rng.choice(joined.size, KEPT_VALUES, replace=False)
            joined = np.concatenate([joined[keep], [joined.min(), joined.max()]])
        if joined.size:
            values[name] = joined
    return values


def recalibrated_ranges(values: Mapping[str, np.ndarray], pairs: Mapping[str, Tuple[str, PairParams]]
                        ) -> Dict[str, Tuple[str, float, float]]:
    """pair -> (method, rmin, rmax) for the pairs whose tensor another calibration quantises with a smaller
    error than its current parameters. `pairs`: pair -> (its tensor, current parameters); `values`: tensor ->
    its values on the calibration samples (`tensor_values`)."""
    ranges: Dict[str, Tuple[str, float, float]] = {}
    for pair, (tensor, params) in pairs.items():
        if tensor not in values:
            continue
        method, rmin, rmax, error, now = best_range(values[tensor], params)
        if method != "minmax" and error < now:
            ranges[pair] = (method, rmin, rmax)
    return ranges


def minmax_16bit_ranges(values: Mapping[str, np.ndarray], pairs: Mapping[str, Tuple[str, PairParams]]
                        ) -> Dict[str, Tuple[float, float]]:
    """pair -> the MinMax range of its tensor on the calibration samples (with 0, symmetric when the pair is),
    for the pairs whose 8-bit parameters hold that range within one step: the model was calibrated by MinMax
    on these samples, and a 16-bit override of the tensor is calibrated to this range by quantize_static,
    where the 8-bit parameters give it only within a step (their zero point is rounded). On the zoo's ResNet the
    classifier's 16-bit input read 0.9999408 from the 8-bit range, 0.9999416 rebuilt by quantize_static, across
    a target of 0.9999410. A pair whose range is not its samples' MinMax (another calibrator, a range set by
    hand) keeps the range its parameters hold."""
    out: Dict[str, Tuple[float, float]] = {}
    for pair, (tensor, params) in pairs.items():
        if tensor not in values or params.dtype.itemsize != 1:
            continue
        low, high = min(float(values[tensor].min()), 0.0), max(float(values[tensor].max()), 0.0)
        if params.symmetric:
            low, high = -max(-low, high), max(-low, high)
        held = params.range()
        if abs(low - held[0]) <= params.scale and abs(high - held[1]) <= params.scale:
            out[pair] = (low, high)
    return out
