"""Per-kernel statistics over runs, aggregates by op type and provider, and slow-kernel flags."""
from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..results.base import Finding, Severity
from ..results.profile import KernelStat, LatencyStats, OpTypeStat, ProviderStat
from .kernel_info import KernelInfo


def latency_stats(values_us: Sequence[float]) -> LatencyStats:
    """Mean, percentiles (linear interpolation), extremes and spread of a list of latencies."""
    a = np.asarray(values_us, dtype=np.float64)
    if a.size == 0:
        return LatencyStats(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return LatencyStats(runs=int(a.size), mean_us=float(a.mean()), p50_us=float(p50), p90_us=float(p90),
                        p99_us=float(p99), min_us=float(a.min()), max_us=float(a.max()), std_us=float(a.std()))


def kernel_table(names: Sequence[str], time: np.ndarray, calls: np.ndarray, info: Mapping[str, KernelInfo],
                 group_of: Mapping[str, int], original_of: Mapping[str, List[str]],
                 flops_of: Mapping[str, Optional[int]], exclude: Sequence[str] = ()) -> Tuple[List[KernelStat], float]:
    """One `KernelStat` per kernel that ran in a kept run (slowest first), and the per-run kernel sum.

    `time`/`calls` are kernels x kept runs. A kernel's statistics are over the runs it ran in; its
    time per run (see `robust_per_run`) divided by the sum over kernels is its share.
    """
    if not len(names):
        # A model with no nodes (an input wired to an output) runs no kernel: nothing to rank.
        return [], 0.0
    runs = time.shape[1] if time.ndim == 2 else 0
    skip = set(exclude)
    ran = calls > 0
    per_run = robust_per_run(time, calls)
    include = np.array([n not in skip for n in names], dtype=bool) & ran.any(axis=1) if runs else \
        np.zeros(len(names), dtype=bool)
    total = float(per_run[include].sum())
    masked = np.where(ran, time, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(masked, axis=1) if runs else np.zeros(len(names))
        p50, p90 = np.nanpercentile(masked, [50, 90], axis=1) if runs else (mean, mean)
        low = np.nanmin(masked, axis=1) if runs else mean
        high = np.nanmax(masked, axis=1) if runs else mean
    counts = ran.sum(axis=1)
    calls_per_run = calls.sum(axis=1) / np.maximum(counts, 1)
    stats: List[KernelStat] = []
    for k in np.flatnonzero(include):
        name = names[k]
        ki = info.get(name)
        flops = flops_of.get(name)
        moved = _bytes(ki)
        mean_us = float(mean[k])
        stats.append(KernelStat(
            name=name, op_type=ki.op_type if ki else "?", provider=ki.provider if ki else "?",
            group=group_of.get(name, -1), original_nodes=list(original_of.get(name, [])),
            mean_us=mean_us, p50_us=float(p50[k]), p90_us=float(p90[k]), min_us=float(low[k]), max_us=float(high[k]),
            share=float(per_run[k] / total) if total > 0 else 0.0, per_run_us=float(per_run[k]), runs=int(counts[k]),
            calls_per_run=float(calls_per_run[k]),
            input_shapes=[s.text() for s in ki.inputs] if ki else [],
            output_shapes=[s.text() for s in ki.outputs] if ki else [],
            flops=flops, bytes_accessed=moved,
            gflops_per_s=(flops / (float(p50[k]) * 1e3)) if flops and p50[k] > 0 else None,
            intensity=(flops / moved) if flops and moved else None))
    stats.sort(key=lambda s: (-s.share, s.name))
    return stats, total


def robust_per_run(time: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Each kernel's time per run: its median over the runs it ran in, times the fraction of runs it
    ran in. One stalled run on a busy machine moves a mean a lot and a median not at all."""
    if time.ndim != 2 or time.shape[1] == 0:
        return np.zeros(time.shape[0] if time.ndim else 0)
    ran = calls > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(np.where(ran, time, np.nan), axis=1)
    return np.nan_to_num(median) * ran.mean(axis=1)


def _bytes(info: Optional[KernelInfo]) -> Optional[int]:
    if info is None:
        return None
    parts = [info.activation_bytes, info.parameter_bytes, info.output_bytes]
    if all(p is None for p in parts):
        return None
    return sum(p or 0 for p in parts)


def op_type_table(kernels: Sequence[KernelStat], total_us: float) -> List[OpTypeStat]:
    """Kernels grouped by the op type onnxruntime ran, slowest type first."""
    rows: Dict[str, List[KernelStat]] = {}
    for k in kernels:
        rows.setdefault(k.op_type, []).append(k)
    table = []
    for op, members in rows.items():
        total = sum(k.per_run_us for k in members)
        known = [k.flops for k in members if k.flops]
        flops = int(sum(known)) if known else None
        table.append(OpTypeStat(op_type=op, count=len(members), total_us=total,
                                share=total / total_us if total_us > 0 else 0.0, mean_us=total / len(members),
                                flops=flops, gflops_per_s=(flops / (total * 1e3)) if flops and total > 0 else None))
    table.sort(key=lambda r: (-r.total_us, r.op_type))
    return table


def provider_table(kernels: Sequence[KernelStat], total_us: float) -> List[ProviderStat]:
    """Kernels grouped by execution provider, slowest first."""
    rows: Dict[str, Tuple[int, float]] = {}
    for k in kernels:
        count, total = rows.get(k.provider, (0, 0.0))
        rows[k.provider] = (count + 1, total + k.per_run_us)
    table = [ProviderStat(provider=p, count=c, total_us=t, share=t / total_us if total_us > 0 else 0.0)
             for p, (c, t) in rows.items()]
    table.sort(key=lambda r: -r.total_us)
    return table


def flag_slow_kernels(kernels: Sequence[KernelStat], *, ratio: float = 4.0, min_share: float = 0.005,
                      min_peers: int = 3) -> Tuple[List[KernelStat], List[Finding]]:
    """Flag kernels far below the median throughput of their op type at comparable intensity.

    A kernel whose arithmetic intensity is well below its peers' is memory-bound by its shape, and
    one with far fewer FLOPs is dominated by fixed per-call costs: neither is flagged. Only a
    kernel of comparable size and intensity that still runs `ratio` times below the median
    GFLOP/s points at a slow kernel implementation or a bad layout.
    """
    peers: Dict[str, List[KernelStat]] = {}
    for k in kernels:
        if k.gflops_per_s and k.intensity:
            peers.setdefault(k.op_type, []).append(k)
    flagged: Dict[str, float] = {}
    findings: List[Finding] = []
    for op, members in peers.items():
        if len(members) < min_peers:
            continue
        median_g = float(np.median([k.gflops_per_s for k in members]))
        median_i = float(np.median([k.intensity for k in members]))
        median_f = float(np.median([k.flops for k in members]))
        for k in members:
            assert k.gflops_per_s is not None and k.intensity is not None and k.flops is not None
            comparable = k.intensity >= 0.5 * median_i and k.flops >= 0.25 * median_f  # tiny kernels pay fixed costs
            if k.gflops_per_s * ratio < median_g and comparable and k.share >= min_share:
                flagged[k.name] = median_g / k.gflops_per_s
                findings.append(Finding(
                    rule="MI841", severity=Severity.WARNING, node=k.name,
                    message=(f"{op} '{k.name}' runs at {k.gflops_per_s:.2f} GFLOP/s, {median_g / k.gflops_per_s:.1f}x "
                             f"below the median of its {len(members)} {op} kernels ({median_g:.2f} GFLOP/s) at "
                             f"comparable arithmetic intensity ({k.intensity:.1f} vs {median_i:.1f} FLOP/byte); "
                             f"{k.share:.1%} of the run"),
                    hint="a slow kernel or layout for this shape: try another opt level, layout or provider",
                    data={"shapes": k.input_shapes}))
    if not flagged:
        return list(kernels), findings
    return [replace(k, slow_ratio=flagged[k.name]) if k.name in flagged else k for k in kernels], findings
