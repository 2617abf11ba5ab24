"""`--against`: two profiles side by side (a float model and its quantised or re-exported twin).

Op types are compared by their *base* op (QLinearConv, ConvInteger and FusedConv all do a Conv's
work), so fp32 and int8 kernels line up. Work units are matched through original node names: kernels
of A and B whose original nodes share a name (a quantiser keeps the Conv's name and adds Q/DQ
nodes around it) are joined, and each joined unit's summed median kernel time is compared.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..results.profile import NodeDelta, OpTypeDelta, ProfileComparison
from .analysis import Analysis
from .mapping import UnionFind

_BASE = {
    "ConvInteger": "Conv", "NhwcConv": "Conv", "MatMulInteger": "MatMul", "MatMulIntegerToFloat": "MatMul",
    "DynamicQuantizeMatMul": "MatMul", "MatMulNBits": "MatMul", "QOrderedMatMul": "MatMul", "QGemm": "Gemm",
    "QAttention": "Attention", "QEmbedLayerNormalization": "EmbedLayerNormalization",
}


def base_op(op_type: str) -> str:
    """The op whose work a kernel does: QLinearConv -> Conv, FusedMatMul -> MatMul, QGemm -> Gemm."""
    if op_type in _BASE:
        return _BASE[op_type]
    for prefix in ("QLinear", "Fused"):
        if op_type.startswith(prefix) and len(op_type) > len(prefix):
            return op_type[len(prefix):]
    return op_type


def speedup_interval(a_us: Sequence[float], b_us: Sequence[float], *, resamples: int = 2000,
                     seed: int = 0) -> Tuple[float, float, float]:
    """(median(a) / median(b), 2.5th and 97.5th percentile of its bootstrap distribution)."""
    a, b = np.asarray(a_us, dtype=np.float64), np.asarray(b_us, dtype=np.float64)
    if a.size == 0 or b.size == 0 or np.median(b) <= 0:
        return float("nan"), float("nan"), float("nan")
    point = float(np.median(a) / np.median(b))
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
    low, high = np.percentile(ma / mb, [2.5, 97.5])
    return point, float(low), float(high)


def _op_deltas(a: Analysis, b: Analysis) -> List[OpTypeDelta]:
    totals: Dict[str, List[float]] = {}
    for side, analysis in enumerate((a, b)):
        profile = analysis.profile
        for k in profile.kernels:
            row = totals.setdefault(base_op(k.op_type), [0.0, 0.0, 0, 0])
            row[side] += k.per_run_us
            row[2 + side] += 1
    deltas = [OpTypeDelta(op_type=op, a_us=r[0], b_us=r[1], a_count=int(r[2]), b_count=int(r[3]),
                          speedup=(r[0] / r[1]) if r[0] > 0 and r[1] > 0 else None) for op, r in totals.items()]
    deltas.sort(key=lambda d: -max(d.a_us, d.b_us))
    return deltas


def _units(a: Analysis, b: Analysis) -> List[Tuple[List[str], List[str]]]:
    """Joined (A kernels, B kernels): kernels whose original nodes share a name are one unit."""
    kernels = [(0, k) for k in a.cells] + [(1, k) for k in b.cells]
    index = {item: i for i, item in enumerate(kernels)}
    uf = UnionFind(len(kernels))
    holders: Dict[str, int] = {}
    for side, analysis in ((0, a), (1, b)):
        for kernel, nodes in analysis.cells.items():
            for node in nodes:
                item = index[(side, kernel)]
                first = holders.setdefault(analysis.node_names[node], item)
                uf.union(first, item)
    joined: Dict[int, Tuple[List[str], List[str]]] = {}
    for item, (side, kernel) in enumerate(kernels):
        joined.setdefault(uf.find(item), ([], []))[side].append(kernel)
    return list(joined.values())


def _nodes(analysis: Analysis, kernels: Sequence[str]) -> List[str]:
    found = sorted({i for k in kernels for i in analysis.cells.get(k, [])})
    return [analysis.node_names[i] for i in found]


def compare_profiles(a: Analysis, b: Analysis, e2e_a: Sequence[float], e2e_b: Sequence[float], *,
                     top: int = 10, min_change: float = 0.10) -> ProfileComparison:
    """Speed-up of B over A: end to end (with a bootstrap interval), per base op type and per unit."""
    point, low, high = speedup_interval(e2e_a, e2e_b)
    mean_a, mean_b = float(np.mean(e2e_a)) if len(e2e_a) else 0.0, float(np.mean(e2e_b)) if len(e2e_b) else 0.0
    deltas: List[NodeDelta] = []
    unmatched_a = unmatched_b = 0.0
    floor = 0.002 * max(a.profile.kernel_sum_us, b.profile.kernel_sum_us)
    for kernels_a, kernels_b in _units(a, b):
        ta = sum(a.kernel_p50.get(k, 0.0) for k in kernels_a)
        tb = sum(b.kernel_p50.get(k, 0.0) for k in kernels_b)
        if not kernels_b:
            unmatched_a += ta
            continue
        if not kernels_a:
            unmatched_b += tb
            continue
        if ta <= 0 or tb <= 0:
            continue
        nodes = _nodes(a, kernels_a)
        more = len(nodes) - 1
        label = (nodes[0] + (f" (+{more} node{'s' if more > 1 else ''})" if more else "")) if nodes else kernels_a[0]
        deltas.append(NodeDelta(label=label, a_nodes=nodes[:20], a_kernels=kernels_a, b_kernels=kernels_b,
                                a_us=ta, b_us=tb, speedup=ta / tb))
    matched = len(deltas)
    slower = sorted((d for d in deltas if d.b_us > d.a_us * (1 + min_change) and d.b_us - d.a_us >= floor),
                    key=lambda d: -(d.b_us - d.a_us))[:top]
    faster = sorted((d for d in deltas if d.a_us > d.b_us * (1 + min_change) and d.a_us - d.b_us >= floor),
                    key=lambda d: -(d.a_us - d.b_us))[:top]
    return ProfileComparison(e2e_speedup=point, ci_low=low, ci_high=high,
                             mean_speedup=(mean_a / mean_b) if mean_b > 0 else float("nan"),
                             op_types=_op_deltas(a, b), slower=slower, faster=faster, matched_units=matched,
                             unmatched_a_us=unmatched_a, unmatched_b_us=unmatched_b)
