"""--simulate fp16 on an fp32 model: the first tensors that would overflow or flush to zero."""
from __future__ import annotations

import numpy as np

from inspector_cli.nanbisect.config import NanBisectConfig, Simulate
from inspector_cli.workflows.nan_bisect import nan_bisect

from ..fixtures import nan_models as nm
from ..fixtures.helpers import init, make_model, vi


def scaled_model():
    """x*100 ('up') -> *1000 ('up2', beyond 65504 for x > 0.65) -> *1e-3 ('down');
    x*1e-9 ('tiny', below 6e-8) -> 1/that ('recip', where a zero becomes Inf)."""
    nodes = [nm.node("Mul", ["x", "k100"], "u", "up"), nm.node("Mul", ["u", "k1000"], "u2", "up2"),
             nm.node("Mul", ["u2", "kmilli"], "y", "down"),
             nm.node("Mul", ["x", "knano"], "t", "tiny"), nm.node("Reciprocal", ["t"], "r", "recip"),
             nm.node("Mul", ["r", "knano"], "z", "back")]
    return make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4]), vi("z", [1, 4])],
                      [init("k100", np.array(100, np.float32)), init("k1000", np.array(1000, np.float32)),
                       init("kmilli", np.array(1e-3, np.float32)), init("knano", np.array(1e-9, np.float32)),
                       init("big", np.array([7e4], np.float32))])


def test_first_overflow_and_underflow(tmp_path):
    path, data = nm.write(tmp_path, scaled_model(), [{"x": nm.row(0.1, 0.2, 0.3, 0.4)},
                                                      {"x": nm.row(0.9, 0.2, 0.3, 0.4)}])
    result = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), simulate=Simulate.FP16))
    assert result.exit_code == 1 and result.nonfinite == 0 and result.fp16 == 2
    first, second = result.records
    # sample 0: nothing reaches 65504 before 'tiny' flushes to zero; its Reciprocal then overflows
    assert [(e.rule, e.tensor, e.node) for e in first.fp16] == [("fp16-underflow", "t", "tiny"),
                                                                ("fp16-overflow", "r", "recip")]
    assert first.fp16[0].count == 4
    # sample 1: 0.9 * 1e5 = 9e4 > 65504 first appears at 'up2' (not at the later 'down' or 'recip')
    assert [(e.rule, e.node) for e in second.fp16] == [("fp16-overflow", "up2"), ("fp16-underflow", "tiny")]
    assert second.fp16[0].count == 1 and abs(second.fp16[0].max_abs - 9e4) < 1
    groups = {(g.kind, g.node): g.samples for g in result.groups}
    assert groups == {("fp16-overflow", "up2"): 1, ("fp16-overflow", "recip"): 1, ("fp16-underflow", "tiny"): 2}
    assert any("'big' holds values up to |x| = 70000" in w for w in result.warnings)


def test_fp16_safe_model_passes(tmp_path):
    path, data = nm.write(tmp_path, nm.chain(), [{"x": np.full((1, 8), 2.0, np.float32)}])
    result = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), simulate=Simulate.FP16,
                                                   max_memory=200))
    assert result.exit_code == 0 and result.fp16 == 0 and result.plan["chunks"] > 1


def test_chunked_full_scan_of_a_batch_equals_one_run_per_sample(tmp_path):
    """--deep --all under a budget that needs several runs per sample: the shard is processed
    chunk-major (one session per chunk for all its samples) with the same answers."""
    from inspector_cli.nanbisect.batch import record_line

    samples = [{"x": nm.row(-1, 2, 3, 4)}, {"x": nm.row(1, 2, 3, 4)}, {"x": nm.row(-1, -2, 3, 4)}]
    path, data = nm.write(tmp_path, nm.masked(with_real=True), samples)
    wide = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), deep=True, all_origins=True))
    tight = nan_bisect(str(path), NanBisectConfig(inputs=(str(data),), deep=True, all_origins=True, max_memory=40))
    assert wide.plan["chunks"] == 1 and tight.plan["chunks"] >= 3
    strip = [record_line(r).replace(r.strategy, "").replace(f'"runs":{r.runs}', "") for r in tight.records]
    assert strip == [record_line(r).replace(r.strategy, "").replace(f'"runs":{r.runs}', "") for r in wide.records]
    assert [(r.sample, r.origin.node, [m.node for m in r.masked]) for r in tight.records] == [
        ("x_0000.npz", "sqrt", ["log"]), ("x_0001.npz", "sqrt", []), ("x_0002.npz", "sqrt", ["log"])]
