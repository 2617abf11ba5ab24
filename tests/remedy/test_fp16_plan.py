from __future__ import annotations

import numpy as np
import onnx

from inspector_cli.remedy.evaluate import Evaluator, parse_target
from inspector_cli.remedy.fp16_plan import (
    convert_fp16,
    evaluate_fp16,
    plan_fp16_blocklist,
)

from .models import overflow_fp32, overflow_samples

TARGETS = [parse_target("cosine>=0.999")]


def nonfinite_samples(model: onnx.ModelProto, fp32: onnx.ModelProto, samples) -> list:
    ev = Evaluator(samples, [f"s{i}" for i in range(len(samples))], TARGETS)
    ev.set_reference(fp32.SerializeToString())
    return evaluate_fp16(ev, model).nonfinite_samples


def test_block_list_removes_every_overflow_and_is_minimal():
    fp32, samples = overflow_fp32(), overflow_samples()
    # the plain fp16 conversion overflows on the large samples only
    assert nonfinite_samples(convert_fp16(fp32, []), fp32, samples) == ["s1", "s3", "s5"]
    plan = plan_fp16_blocklist(fp32, samples, TARGETS)
    assert plan.baseline_nonfinite_samples == ["sample1", "sample3", "sample5"]
    assert plan.found
    # clamp (Max) is on the converter's default op block list, so it stays fp32 without being listed
    assert plan.sources == ["mm1", "clamp", "scale"]
    assert plan.node_block_list == ["mm1", "scale"]
    assert plan.final["cosine>=0.999"] > 0.999
    # verified with onnxconverter_common's converter: the block list keeps every output finite ...
    assert nonfinite_samples(convert_fp16(fp32, plan.node_block_list), fp32, samples) == []
    # ... and removing any listed node brings an overflow back
    for node in plan.node_block_list:
        rest = [n for n in plan.node_block_list if n != node]
        assert nonfinite_samples(convert_fp16(fp32, rest), fp32, samples), node
    # the patched model has Casts around the kept nodes and fp16 weights elsewhere
    ops = [n.op_type for n in plan.model.graph.node]
    assert "Cast" in ops
    inits = {t.name: t.data_type for t in plan.model.graph.initializer}
    assert inits["w1"] == onnx.TensorProto.FLOAT and inits["w2"] == onnx.TensorProto.FLOAT16
    assert np.isfinite(plan.final["cosine>=0.999"])
