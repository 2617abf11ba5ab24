"""Per-kernel statistics, op-type aggregates, slow-kernel flags and speed-up intervals."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector_cli.profile.compare import base_op, speedup_interval
from inspector_cli.profile.stats import flag_slow_kernels, kernel_table, latency_stats, op_type_table, provider_table
from inspector_cli.profile.kernel_info import KernelInfo
from inspector_cli.results.profile import KernelStat


def test_latency_stats_percentiles():
    s = latency_stats([10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
    assert (s.runs, s.mean_us, s.p50_us, s.min_us, s.max_us) == (10, 55.0, 55.0, 10.0, 100.0)
    assert s.p90_us == pytest.approx(91.0) and s.p99_us == pytest.approx(99.1)
    assert latency_stats([]).runs == 0


def test_kernel_table_and_op_type_sums():
    names = ["conv1", "conv2", "relu", "cond"]
    # kernels x runs; 'cond' ran in 2 of 4 runs (an If branch), twice each time.
    time = np.array([[10, 12, 11, 13], [20, 20, 20, 20], [2, 2, 2, 2], [0, 6, 0, 6]], dtype=float)
    calls = np.array([[1] * 4, [1] * 4, [1] * 4, [0, 2, 0, 2]])
    info = {n: KernelInfo(n, op, "CPUExecutionProvider", activation_bytes=100, parameter_bytes=50, output_bytes=50)
            for n, op in zip(names, ["Conv", "Conv", "Relu", "Add"])}
    stats, total = kernel_table(names, time, calls, info, {}, {}, {"conv1": 2_000_000})
    by = {k.name: k for k in stats}
    assert total == pytest.approx(11.5 + 20 + 2 + 3)
    assert by["conv1"].mean_us == 11.5 and by["conv1"].p50_us == 11.5 and by["conv1"].min_us == 10
    assert by["conv1"].gflops_per_s == pytest.approx(2_000_000 / 11_500) and by["conv1"].intensity == 10_000
    assert by["cond"].runs == 2 and by["cond"].mean_us == 6 and by["cond"].calls_per_run == 2
    assert by["cond"].per_run_us == 3.0 and by["conv1"].per_run_us == 11.5
    assert [k.name for k in stats] == ["conv2", "conv1", "cond", "relu"]
    assert sum(k.share for k in stats) == pytest.approx(1.0)
    ops = {o.op_type: o for o in op_type_table(stats, total)}
    assert ops["Conv"].count == 2 and ops["Conv"].total_us == pytest.approx(31.5)
    assert ops["Conv"].mean_us == pytest.approx(15.75) and ops["Add"].total_us == pytest.approx(3.0)
    assert sum(o.total_us for o in ops.values()) == pytest.approx(total)
    assert provider_table(stats, total)[0].share == pytest.approx(1.0)


def test_a_stalled_run_does_not_move_shares():
    time = np.array([[10, 10, 10, 1000], [10, 10, 10, 10]], dtype=float)
    stats, total = kernel_table(["a", "b"], time, np.ones((2, 4), dtype=int), {}, {}, {}, {})
    by = {k.name: k for k in stats}
    assert by["a"].mean_us == 257.5 and by["a"].max_us == 1000
    assert total == 20.0 and by["a"].share == by["b"].share == 0.5


def kernel(name, gflops, intensity=10.0, flops=1_000_000, share=0.1):
    return KernelStat(name=name, op_type="Conv", provider="CPU", group=0, original_nodes=[], mean_us=1.0,
                      p50_us=1.0, p90_us=1.0, min_us=1.0, max_us=1.0, share=share, per_run_us=1.0, runs=1, flops=flops,
                      gflops_per_s=gflops, intensity=intensity)


def test_slow_kernels_are_flagged_only_at_comparable_intensity_and_size():
    kernels = [kernel("a", 100), kernel("b", 110), kernel("c", 90), kernel("d", 105), kernel("e", 95), kernel("slow", 10),
               kernel("memory_bound", 10, intensity=1.0), kernel("tiny", 10, flops=1000),
               kernel("negligible", 10, share=0.001)]
    flagged, findings = flag_slow_kernels(kernels)
    assert [k.name for k in flagged if k.slow_ratio] == ["slow"]
    assert findings[0].rule == "MI841" and findings[0].node == "slow" and "9.0x below the median of its 9 Conv kernels" in findings[0].message and len(findings) == 1


def test_base_op_and_speedup_interval():
    assert [base_op(o) for o in ("QLinearConv", "FusedMatMul", "QGemm", "ConvInteger", "Relu", "Fused")] == \
        ["Conv", "MatMul", "Gemm", "Conv", "Relu", "Fused"]
    a = [100.0 + i % 5 for i in range(40)]
    b = [50.0 + i % 3 for i in range(40)]
    point, low, high = speedup_interval(a, b)
    assert point == pytest.approx(102 / 51) and low <= point <= high and high - low < 0.2
    assert math.isnan(speedup_interval([], b)[0])
