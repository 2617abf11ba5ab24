from __future__ import annotations

import json
import math

import onnx
import pytest
import yaml

from inspector_cli.core.runner import OptLevel, RuntimeConfig
from inspector_cli.errors import UsageError
from inspector_cli.remedy.evaluate import Evaluator, parse_target
from inspector_cli.remedy.fallback import own_errors_from_layers, plan_fallback
from inspector_cli.remedy.optbisect import bisect_optimizers, with_disabled_optimizers
from inspector_cli.remedy.qdq_patch import bypass_qdq, quantised_nodes

from .models import quantize_qdq

TARGETS = [parse_target("cosine>=0.995"), parse_target("top1>=0.99")]


def test_parse_target():
    assert parse_target("logits:max_abs<=0.1").describe() == "logits:max_abs<=0.1"
    with pytest.raises(UsageError, match="cosine is bounded with >="):
        parse_target("cosine<=0.5")
    with pytest.raises(UsageError, match="unknown metric 'cosinus'"):
        parse_target("cosinus>=0.5")


def test_bypass_keeps_other_quantisers_and_restores_folded_relu(broken_pair):
    fp32, broken = broken_pair["fp32"], broken_pair["broken"]
    assert quantised_nodes(broken) == ["conv1", "conv2", "conv3", "conv4", "flatten", "fc"]
    patched = bypass_qdq(broken, ["conv3"], fp32)
    onnx.checker.check_model(patched)
    ops = {n.name: n for n in patched.graph.node}
    # conv3 reads the float weight of the fp32 model, and conv2's output through the restored Relu
    assert ops["conv3"].input[1] == "conv3__input1_float"
    assert ops["relu2__restored"].op_type == "Relu"
    assert ops["conv3"].input[0] == "relu2_out__float"
    # conv2 and conv4 keep their quantised weights
    assert ops["conv2"].input[1] == "conv2.weight_DequantizeLinear_Output"
    with pytest.raises(KeyError, match="nosuch"):
        bypass_qdq(broken, ["nosuch"])


def test_plan_names_exactly_the_broken_nodes(broken_pair, tmp_path):
    """The plan is measured as quantize_static builds the exclude list (issue 29). conv1 must be excluded
    (x's quantiser, 25x too small, is asked for by conv1 alone), conv3 too (its per-tensor weight), and
    conv2: with conv2 quantised, conv3 reads a dequantised input, and onnxruntime's WeightBiasQuantization
    re-quantises the excluded conv3's float weight per tensor at the default level ({conv1, conv3}
    deployed: 0.9826, the target missed)."""
    fp32, broken, samples = broken_pair["fp32"], broken_pair["broken"], broken_pair["samples"]
    plan = plan_fallback(fp32, broken, samples, TARGETS, max_nodes=6)
    assert plan.found
    assert sorted(plan.nodes) == ["conv1", "conv2", "conv3"]
    assert plan.baseline["cosine>=0.995"] < 0.7  # measured 0.638: both breaks together
    assert plan.final["cosine>=0.995"] >= 0.995 and plan.final["top1>=0.99"] == 1.0
    # reference + baseline + 6 candidate sensitivities (conv2's candidate {conv2, conv1, conv3} meets
    # alone: the first greedy step is cached) + the prune trials {conv2, conv3} and {conv1, conv3}
    # ({conv2, conv1} is conv1's candidate, measured already)
    assert plan.runs == 10
    assert [(s.action, s.node) for s in plan.steps] == [("add", "conv2"), ("remove", "conv3"), ("remove", "conv1"),
                                                        ("remove", "conv2")]
    assert plan.steps[0].meets and not any(s.meets for s in plan.steps[1:])
    assert plan.steps[3].metrics["cosine>=0.995"] < 0.99  # {conv1, conv3}: conv3's weight re-quantised

    # the patched model, re-checked independently of the search
    ev = Evaluator(samples, [f"s{i}" for i in range(12)], TARGETS)
    ev.set_reference(fp32.SerializeToString())
    assert ev.evaluate(plan.model.SerializeToString()).meets

    # exclude lists, JSON and YAML, and onnxruntime's quantize_static fed with them: the re-quantised
    # model, deployed at the default level, gives the plan's figures
    listed = json.loads(plan.write_exclude_list(tmp_path / "nodes.json").read_text())
    assert sorted(listed["nodes_to_exclude"]) == ["conv1", "conv2", "conv3"]
    assert yaml.safe_load(plan.write_exclude_list(tmp_path / "nodes.yaml").read_text())["found"] is True
    requantised = quantize_qdq(broken_pair["folder"] / "fp32.onnx", tmp_path / "requant.onnx",
                               broken_pair["calibration"], nodes_to_exclude=tuple(listed["nodes_to_exclude"]))
    rebuilt = ev.evaluate(onnx.load(requantised).SerializeToString())
    assert rebuilt.meets
    assert abs(rebuilt.summary(TARGETS)["cosine>=0.995"] - plan.final["cosine>=0.995"]) < 2e-3


def test_excluding_conv3_alone_is_undone_by_weight_bias_quantization(broken_pair, tmp_path):
    """Why conv2 is in the plan above: quantize_static excluding conv1 and conv3 only meets the targets
    in QDQ arithmetic (no graph optimisation); deployed, onnxruntime's WeightBiasQuantization
    re-quantises conv3's float weight (per tensor, outlier channel included) because its input comes from
    a DequantizeLinear. The optimiser bisection names that pass, and without it the model meets them."""
    fp32, samples = broken_pair["fp32"], broken_pair["samples"]
    requantised = quantize_qdq(broken_pair["folder"] / "fp32.onnx", tmp_path / "requant.onnx",
                               broken_pair["calibration"], nodes_to_exclude=("conv1", "conv3"))
    model = onnx.load(requantised)
    plain = Evaluator(samples, [f"s{i}" for i in range(12)], TARGETS, RuntimeConfig(opt_level=OptLevel.DISABLE))
    plain.set_reference(fp32.SerializeToString())
    assert plain.evaluate(model.SerializeToString()).meets
    default = Evaluator(samples, [f"s{i}" for i in range(12)], TARGETS)
    default.set_reference(fp32.SerializeToString())
    assert not default.evaluate(model.SerializeToString()).meets
    found = bisect_optimizers(model.SerializeToString(), samples[:4], RuntimeConfig(opt_level=OptLevel.DISABLE),
                              RuntimeConfig(opt_level=OptLevel.ALL), atol=1e-4, rtol=1e-3)
    assert found.culprits == ["WeightBiasQuantization"] and not found.together
    assert "conv3" in found.rewritten_nodes["WeightBiasQuantization"]
    t = len(found.applied)
    assert found.session_builds <= 2 * math.log2(t) + 2
    # deployed with every optimisation but that one, the re-quantised model meets the targets
    deployed = Evaluator(samples, [f"s{i}" for i in range(12)], TARGETS,
                         with_disabled_optimizers(RuntimeConfig(), found.culprits))
    deployed.set_reference(fp32.SerializeToString())
    assert deployed.evaluate(model.SerializeToString()).meets


def test_exclusion_keeps_a_quantiser_a_quantised_neighbour_asks_for(broken_pair):
    """exclude_qdq as quantize_static(nodes_to_exclude) builds it: excluding conv3 floats its weight but
    keeps the pairs of its input (conv2 asks for it) and output (conv4 asks for it); excluding conv2 and
    conv3 removes the pair between them, restoring the Relu folded into it."""
    from inspector_cli.remedy.exclusion import Quantisers, exclude_qdq

    fp32, broken = broken_pair["fp32"], broken_pair["broken"]
    quantisers = Quantisers(broken)
    # conv3 with conv2 and conv4 (not fc: once conv4 is excluded the passive Flatten no longer quantises its
    # output, fc does, calibrating it on its own, but a Flatten's output holds its input's values: the range
    # is the one it shared)
    assert quantisers.unit("conv3") == ["conv3", "conv2", "conv4"]
    assert quantisers.unit("conv1") == ["conv1", "conv2"]  # x is a graph input: conv1 alone asks for it
    def producers(model):
        return {o: n for n in model.graph.node for o in n.output}

    one = exclude_qdq(broken, ["conv3"], fp32)
    conv3 = next(n for n in one.graph.node if n.name == "conv3")
    assert conv3.input[1] == "conv3__input1_float"
    assert producers(one)[conv3.input[0]].op_type == "DequantizeLinear"
    assert [c.op_type for c in one.graph.node if conv3.output[0] in c.input] == ["QuantizeLinear"]
    assert not any(n.op_type == "Relu" for n in one.graph.node)
    two = exclude_qdq(broken, ["conv2", "conv3"], fp32)
    conv2, conv3 = (next(n for n in two.graph.node if n.name == name) for name in ("conv2", "conv3"))
    bypassed = producers(two)[conv3.input[0]]
    assert bypassed.op_type == "Identity" and bypassed.input[0] == "relu2_out__float"
    assert producers(two)["relu2_out__float"].op_type == "Relu"  # restored from the fp32 model
    assert producers(two)[conv2.input[0]].op_type == "DequantizeLinear"  # conv1 still asks for its pair
    with pytest.raises(KeyError, match="nosuch"):
        exclude_qdq(broken, ["nosuch"])


def test_plan_within_max_nodes_reports_best_found(broken_pair):
    fp32, broken, samples = broken_pair["fp32"], broken_pair["broken"], broken_pair["samples"]
    # conv1 ranked first and measured alone: its candidate {conv1, conv2} is the one step --max-nodes 1 allows
    plan = plan_fallback(fp32, broken, samples, TARGETS, max_nodes=1, own_errors={"conv1": 1.0}, sensitivity_top=1)
    assert not plan.found
    assert plan.nodes == ["conv1", "conv2"]  # the input quantiser fixed, conv3's weight still per tensor
    assert plan.final["cosine>=0.995"] == pytest.approx(plan.sensitivity["conv1"]["cosine>=0.995"])
    assert 0.9 < plan.final["cosine>=0.995"] < 0.995


def test_own_error_ranking_limits_the_sensitivity_runs(broken_pair):
    fp32, broken, samples = broken_pair["fp32"], broken_pair["broken"], broken_pair["samples"]
    own = {"conv3": 0.5, "conv1": 0.3, "conv2": 0.01}
    plan = plan_fallback(fp32, broken, samples, TARGETS, own_errors=own, sensitivity_top=2)
    assert sorted(plan.sensitivity) == ["conv1", "conv3"]  # only the top two were measured
    # measured gain puts conv1 first although its own error ranks second
    assert [s.node for s in plan.steps][:2] == ["conv1", "conv3"]
    assert sorted(plan.nodes) == ["conv1", "conv2", "conv3"] and plan.found
    # reference + baseline + 2 sensitivities + the union {conv1, conv2, conv3, conv4} + the prune trials
    # without conv4 (meets), conv3 ({conv1, conv2} cached), conv2, conv1 (fail)
    assert plan.runs == 8
    assert [(s.action, s.node, s.meets) for s in plan.steps[2:]] == [
        ("remove", "conv4", True), ("remove", "conv3", False), ("remove", "conv2", False), ("remove", "conv1", False)]


def test_tight_budget_gallops_instead_of_stepping(broken_pair):
    fp32, broken, samples = broken_pair["fp32"], broken_pair["broken"], broken_pair["samples"]
    plan = plan_fallback(fp32, broken, samples, TARGETS, max_nodes=6, max_runs=9)
    # the sensitivity phase keeps two runs for the search: 5 of the 6 candidates are measured
    # (7 runs; without own errors, weights by deployed SQNR first, so the weightless flatten is
    # left out); 2 left < 6 ordered candidates, so it gallops: prefix 1 (conv2's candidate) is cached
    # and meets; the prune trials {conv2, conv1} (cached) and {conv2, conv3}, {conv1, conv3} (runs 8, 9)
    assert sorted(plan.sensitivity) == ["conv1", "conv2", "conv3", "conv4", "fc"]
    assert next(iter(plan.sensitivity)) == "conv3"  # the outlier weight has the lowest SQNR
    assert plan.runs == 9
    assert plan.nodes == ["conv2", "conv1", "conv3"] and plan.found
    assert [(s.action, s.node) for s in plan.steps] == [("add", "conv2"), ("remove", "conv3"), ("remove", "conv1"),
                                                        ("remove", "conv2")]


def test_own_errors_from_layer_rows(broken_pair):
    rows = [("relu3_out_DequantizeLinear_Output", 0.40), ("relu3_out", 0.5), ("relu1_out", 0.9),
            ("logits", None), ("nosuch", 0.1)]
    assert own_errors_from_layers(broken_pair["broken"], rows) == pytest.approx({"conv3": 0.6, "conv1": 0.1})


def test_renamed_qdq_model_gets_fp32_names_in_the_exclude_list(broken_pair):
    from .models import renamed

    fp32, samples = broken_pair["fp32"], broken_pair["samples"]
    broken = renamed(broken_pair["broken"])
    conv_names = {n.name for n in broken.graph.node if n.op_type == "Conv"}
    plan = plan_fallback(fp32, broken, samples, TARGETS, max_nodes=6)
    assert plan.found and set(plan.nodes) <= conv_names  # n-names of the renamed model
    assert sorted(plan.fp32_nodes) == ["conv1", "conv2", "conv3"]
    names = dict(zip(plan.nodes, plan.fp32_nodes))
    first = next(iter(plan.sensitivity))  # ranked by deployed SQNR against the paired fp32 weight
    assert names.get(first) == "conv3"
    assert sorted(plan.exclude_list()["nodes_to_exclude"]) == ["conv1", "conv2", "conv3"]
    # without fp32 tensor names, folded Relus are restored from the quantisers' ranges
    assert any(n.op_type == "Relu" for n in plan.model.graph.node)
