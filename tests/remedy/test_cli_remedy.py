"""`mi compare --fallback-plan / --bisect-optimizers / --labels` end to end, and the run fingerprint."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from inspector_cli.diff.metrics import compare_arrays
from inspector_cli.results.base import known_kinds
from inspector_cli.results.schema import envelope_schema

from ..cli.test_reports import validate_document
from ..fixtures.helpers import init, invoke, make_model, read_json, save, save_npz, vi
from .models import dq_float_conv


def _pair_on_disk(broken_pair) -> Path:
    folder: Path = broken_pair["folder"]
    if not (folder / "data").exists():
        save_npz(folder / "data", broken_pair["samples"])
    return folder


def test_fallback_plan_names_the_two_broken_quantisers(broken_pair, tmp_path):
    folder = _pair_on_disk(broken_pair)
    fixed, nodes, out = tmp_path / "fixed.onnx", tmp_path / "nodes.json", tmp_path / "out.json"
    result = invoke(["compare", folder / "fp32.onnx", folder / "broken.onnx", "--inputs", folder / "data",
                     "--fallback-plan", "--target", "cosine>=0.995", "--target", "top1>=0.99", "--max-nodes", 6,
                     "--write-model", fixed, "--exclude-list", nodes, "--json", out, "--html", tmp_path / "r.html"],
                    exit_code=0)
    assert "fallback plan (nodes kept in float)" in result.stdout
    html = (tmp_path / "r.html").read_text()
    assert "fallback plan (nodes kept in float)" in html and "per-channel advice (weight SQNR dB)" in html
    assert "plan found: conv2, conv1, conv3" in result.stdout
    document = read_json(out)
    validate_document(document)
    plan = document["results"]["remedy"]["fallback"]
    assert plan["mode"] == "qdq" and plan["found"] is True
    assert sorted(plan["nodes"]) == ["conv1", "conv2", "conv3"]
    assert plan["runs"] == 10  # as the engine test: reference, baseline, 6 sensitivities, 2 prune trials
    assert plan["baseline"]["cosine>=0.995"] < 0.7 and plan["recheck_meets"] is True
    assert sorted(json.loads(nodes.read_text())["nodes_to_exclude"]) == ["conv1", "conv2", "conv3"]
    # per-channel advice: conv3's outlier-channel weight gains, and per-channel alone is enough there
    advice = {a["node"]: a for a in plan["weight_advice"]}
    assert advice["conv3"]["advise_per_channel"] is True and advice["conv3"]["per_channel_enough"] is True
    assert advice["conv1"]["per_channel_enough"] is False
    # the written model, re-checked here without mi: output cosine against fp32 over the 12 samples
    ref = ort.InferenceSession(str(folder / "fp32.onnx"))
    patched = ort.InferenceSession(str(fixed))
    stats = None
    for feeds in broken_pair["samples"]:
        pair = compare_arrays(ref.run(None, feeds)[0], patched.run(None, feeds)[0])
        stats = pair if stats is None else stats.merge(pair)
    assert stats.metrics()["cosine"] >= 0.995


def test_unreachable_target_exits_1_with_the_best_found(broken_pair, tmp_path):
    folder = _pair_on_disk(broken_pair)
    out = tmp_path / "out.json"
    result = invoke(["compare", folder / "fp32.onnx", folder / "broken.onnx", "--inputs", folder / "data",
                     "--fallback-plan", "--target", "cosine>=0.99999", "--max-nodes", 1, "--json", out], exit_code=1)
    assert "no fallback plan of at most 1 candidate(s) meets the targets" in result.stdout
    plan = read_json(out)["results"]["remedy"]["fallback"]
    # the best single candidate, conv2's (conv2 with conv1 and conv3, which share its quantisers): 0.99978
    assert plan["found"] is False and sorted(plan["nodes"]) == ["conv1", "conv2", "conv3"]
    assert 0.999 < plan["final"]["cosine>=0.99999"] < 0.99999
    assert [f["rule"] for f in read_json(out)["results"]["findings"]] == ["MI861"]


def test_plan_flags_need_fallback_plan(broken_pair):
    folder = _pair_on_disk(broken_pair)
    result = invoke(["compare", folder / "fp32.onnx", folder / "broken.onnx", "--target", "cosine>=0.9"], exit_code=2)
    assert "--target needs --fallback-plan, which moved to `mi fix FP32 QUANTISED ... --target ...`" in result.stderr


def test_bisect_optimizers_names_the_pass(tmp_path):
    model = save(dq_float_conv(), tmp_path / "dq.onnx")
    rng = np.random.default_rng(2)
    save_npz(tmp_path / "data", [{"x": rng.normal(0, 1, size=(1, 2, 6, 6)).astype(np.float32)} for _ in range(3)])
    out = tmp_path / "out.json"
    result = invoke(["compare", model, model, "--inputs", tmp_path / "data", "--a-opt-level", "disable",
                     "--b-opt-level", "all", "--bisect-optimizers", "--json", out], exit_code=0)
    assert "WeightBiasQuantization changes the outputs" in result.stdout
    section = read_json(out)["results"]["remedy"]["optimizers"]
    assert section["culprits"] == ["WeightBiasQuantization"]
    assert "conv" in section["rewritten_nodes"]["WeightBiasQuantization"]
    assert section["session_builds"] <= 2 * np.log2(len(section["applied"])) + 2


def _label_case(tmp_path: Path) -> Path:
    """A: logits = x; B: logits = x * [1, 1, 1, 0] (class 3 can never win). Labels: s000, s001 -> 3
    (A right, B wrong), s002 -> 0 (both right), s003 -> 1 with x's top class 3 and class 1 second
    (A wrong, B right). Top-1: A 3/4, B 2/4, drop 0.25."""
    for name, scale in (("a", [1, 1, 1, 1]), ("b", [1, 1, 1, 0])):
        nodes = [helper.make_node("Mul", ["x", "s"], ["logits"], name="mul")]
        save(make_model(nodes, [vi("x", [1, 4])], [vi("logits", [1, 4])],
                        [init("s", np.array(scale, np.float32))]), tmp_path / f"{name}.onnx")
    rows = [[0.1, 0.2, 0.3, 0.9], [0.0, 0.5, 0.1, 0.8], [0.9, 0.1, 0.2, 0.3], [0.1, 0.6, 0.2, 0.7]]
    save_npz(tmp_path / "data", [{"x": np.array([r], np.float32)} for r in rows])
    (tmp_path / "labels.csv").write_text("sample,label\ns000,3\ns001,3\ns002,0\ns003,1\n")
    return tmp_path


def test_labels_accuracy_flips_and_gates(tmp_path):
    folder = _label_case(tmp_path)
    base = ["compare", folder / "a.onnx", folder / "b.onnx", "--inputs", folder / "data",
            "--labels", folder / "labels.csv"]
    out = tmp_path / "out.json"
    invoke([*base, "--json", out], exit_code=0)
    top1, top5 = read_json(out)["results"]["remedy"]["accuracy"]
    assert (top1["k"], top1["samples"], top1["accuracy_a"], top1["accuracy_b"]) == (1, 4, 0.75, 0.5)
    assert top1["drop"] == 0.25
    assert top1["a_right_b_wrong"] == ["s000.npz", "s001.npz"] and top1["a_wrong_b_right"] == ["s003.npz"]
    assert top1["drop_ci95"][0] <= 0.25 <= top1["drop_ci95"][1]
    assert (top5["accuracy_a"], top5["accuracy_b"]) == (1.0, 1.0)  # 4 classes: top-5 holds them all
    invoke([*base, "--max-accuracy-drop", 0.3], exit_code=0)
    result = invoke([*base, "--max-accuracy-drop", 0.2], exit_code=1)
    assert "top-1 accuracy drop 0.2500 > --max-accuracy-drop 0.2" in result.stdout
    invoke([*base, "--min-accuracy", 0.5], exit_code=0)
    invoke([*base, "--min-accuracy", 0.6], exit_code=1)
    result = invoke(["compare", folder / "a.onnx", folder / "b.onnx", "--min-accuracy", 0.6], exit_code=2)
    assert "--min-accuracy needs --labels FILE" in result.stderr


def test_fingerprint_in_every_kind_and_in_report_diff(tmp_path):
    for kind in known_kinds():
        schema = envelope_schema(kind)
        assert "fingerprint" in schema["required"] and "fingerprint" in schema["properties"], kind
    folder = _label_case(tmp_path)
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    invoke(["compare", folder / "a.onnx", folder / "b.onnx", "--inputs", folder / "data", "--json", old])
    document = read_json(old)
    import platform

    assert document["fingerprint"]["python"] == platform.python_version()
    assert document["fingerprint"]["onnxruntime"]["version"] == ort.__version__
    document["fingerprint"]["onnxruntime"]["version"] = "1.0.0"  # the "old" run had an older onnxruntime
    old.write_text(json.dumps(document))
    invoke(["compare", folder / "a.onnx", folder / "b.onnx", "--inputs", folder / "data", "--json", new])
    diff = tmp_path / "diff.json"
    result = invoke(["report", old, new, "--diff", "--json", diff], exit_code=0)
    assert "environment changes" in result.stdout and "onnxruntime.version" in result.stdout
    changes = read_json(diff)["results"]["environment"]
    assert changes == [{"key": "onnxruntime.version", "old": "1.0.0", "new": ort.__version__}]
    validate_document(read_json(diff))
    # a saved result read back keeps the fingerprint it was written with
    from inspector_cli.serialize import envelope, read_result

    assert envelope(read_result(old))["fingerprint"]["onnxruntime"]["version"] == "1.0.0"


def test_fp16_block_list_through_nan_bisect_and_compare(tmp_path):
    from inspector_cli.remedy.fp16_plan import convert_fp16

    from .models import overflow_fp32, overflow_samples

    fp32 = save(overflow_fp32(), tmp_path / "fp32.onnx")
    fp16 = save(convert_fp16(overflow_fp32(), []), tmp_path / "fp16.onnx")
    data = save_npz(tmp_path / "data", overflow_samples())
    fixed, block, out = tmp_path / "fixed.onnx", tmp_path / "block.yaml", tmp_path / "nan.json"
    result = invoke(["nan-bisect", fp16, "--inputs", data, "--fallback-plan", "--reference", fp32,
                     "--target", "cosine>=0.999", "--write-model", fixed, "--exclude-list", block, "--json", out],
                    exit_code=0)
    assert "plan found: mm1, scale" in result.stdout
    import yaml

    assert yaml.safe_load(block.read_text())["node_block_list"] == ["mm1", "scale"]
    document = read_json(out)
    validate_document(document)
    plan = document["results"]["remedy"]["fallback"]
    assert plan["mode"] == "fp16" and plan["found"] and plan["recheck_meets"] is True
    assert plan["baseline_nonfinite_samples"] == ["s001.npz", "s003.npz", "s005.npz"]
    # the patched model keeps mm1 and scale in fp32: Casts around them
    assert any(n.op_type == "Cast" for n in onnx.load(str(fixed)).graph.node)
    # compare fp32 fp16 --fallback-plan takes the same path
    result = invoke(["compare", fp32, fp16, "--inputs", data, "--fallback-plan", "--target", "cosine>=0.999"])
    assert "fp32 block list (fp16)" in result.stdout and "plan found: mm1, scale" in result.stdout
    result = invoke(["nan-bisect", fp16, "--inputs", data, "--fallback-plan"], exit_code=2)
    assert "--fallback-plan needs --reference FP32.onnx" in result.stderr


def test_quantisation_step_error_of_an_exact_off_by_one_is_1(tmp_path):
    """A: y = x + 0; B: y = DQ(Q(x + 0.5)) with scale 0.5 and x on the grid: b - a is exactly one step."""
    from onnx import TensorProto

    a = make_model([helper.make_node("Add", ["x", "zero"], ["y"], name="add")], [vi("x", [1, 4])], [vi("y", [1, 4])],
                   [init("zero", np.array(0.0, np.float32))])
    nodes = [helper.make_node("Add", ["x", "half"], ["t"], name="add"),
             helper.make_node("QuantizeLinear", ["t", "s", "zp"], ["tq"], name="q"),
             helper.make_node("DequantizeLinear", ["tq", "s", "zp"], ["y"], name="dq")]
    b = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])],
                   [init("half", np.array(0.5, np.float32)), init("s", np.array(0.5, np.float32)),
                    helper.make_tensor("zp", TensorProto.INT8, [], [0])])
    save(a, tmp_path / "a.onnx")
    save(b, tmp_path / "b.onnx")
    save_npz(tmp_path / "data", [{"x": np.array([[0.0, 1.5, -2.0, 10.0]], np.float32)},
                                 {"x": np.array([[3.0, -0.5, 7.5, 1.0]], np.float32)}])
    out = tmp_path / "out.json"
    invoke(["compare", tmp_path / "a.onnx", tmp_path / "b.onnx", "--inputs", tmp_path / "data", "--layers", "all",
            "--json", out])
    rows = {r["layer"]: r for r in read_json(out)["results"]["remedy"]["quant_steps"]}
    assert rows["y"]["scale"] == 0.5
    assert rows["y"]["max_steps"] == 1.0 and rows["y"]["mean_steps"] == 1.0
    assert rows["y"]["flagged"] is False  # one step is not "a few"
    # ... and it is a column of the layer table (shown with --columns / --wide)
    from inspector_cli.render.compare_view import compare_view
    from inspector_cli.serialize import read_result

    table = compare_view(read_result(out)).tables[0]
    column = table.columns.index("q steps max/mean")
    assert [row[column].text for row in table.rows if row[1].text == "y"] == ["1.00/1.00"]


def test_simulated_vs_deployed_names_the_likely_cause(broken_pair):
    from inspector_cli.remedy.qstep_layers import simulated_finding, u8s8
    from inspector_cli.results.remedy import SimulatedRow

    rows = [SimulatedRow("logits", 0.968, 0.933), SimulatedRow("conv1_out", 0.999, 0.9985)]
    assert u8s8(broken_pair["broken"])  # quantize_static's default: uint8 activations, int8 weights
    finding = simulated_finding(rows, broken_pair["broken"], ["avx2"])
    assert finding is not None and finding.tensor == "logits"
    assert "cosine 0.9680 in QDQ arithmetic but 0.9330 as deployed" in finding.message
    assert "reduce_range=True" in finding.message
    with_vnni = simulated_finding(rows, broken_pair["broken"], ["avx2", "avx512_vnni"])
    assert with_vnni is not None and "--bisect-optimizers" in with_vnni.message
    on_arm = simulated_finding(rows, broken_pair["broken"], ["asimd", "asimddp"])  # no VNNI, no saturation either
    assert on_arm is not None and "--bisect-optimizers" in on_arm.message
    assert simulated_finding([SimulatedRow("logits", 0.968, 0.967)], broken_pair["broken"], []) is None


def test_int8_activations_run_as_u8s8_on_x86(cnn_pair):
    """quantize_static with int8 activations (s8s8): on x86 onnxruntime shifts the activations to uint8
    before fusing (measured: the demo CNN quantised s8s8 loses as much to AVX2's saturation as u8s8,
    logits cosine 0.9858 deployed, 0.9998 in QDQ arithmetic), so the cause is the same."""
    import onnx

    from inspector_cli.remedy.qstep_layers import simulated_finding, u8s8
    from inspector_cli.results.remedy import SimulatedRow

    _, int8, _ = cnn_pair
    model = onnx.load(str(int8))
    activation_zero_points = {i.name: i.data_type for i in model.graph.initializer}
    assert {activation_zero_points[n.input[2]] for n in model.graph.node if n.op_type == "QuantizeLinear"
            and n.input[0] not in activation_zero_points} == {onnx.TensorProto.INT8}
    assert u8s8(model)
    finding = simulated_finding([SimulatedRow("logits", 0.9998, 0.9858)], model, ["avx2", "fma"])
    assert finding is not None and "u8s8 products saturate" in finding.message
    weight_only = onnx.load(str(int8))
    for node in weight_only.graph.node:  # keep the weights' quantisers only: float activations
        if node.op_type == "QuantizeLinear" and node.input[0] not in activation_zero_points:
            node.op_type = "Identity"
            del node.input[1:]
    assert not u8s8(weight_only)


def test_fp16_steps_count_the_samples_that_overflow(tmp_path):
    from inspector_cli.remedy.fp16_plan import convert_fp16

    from .models import overflow_fp32, overflow_samples

    fp32 = save(overflow_fp32(), tmp_path / "fp32.onnx")
    fp16 = save(convert_fp16(overflow_fp32(), []), tmp_path / "fp16.onnx")
    data = save_npz(tmp_path / "data", overflow_samples())
    out = tmp_path / "out.json"
    invoke(["compare", fp32, fp16, "--inputs", data, "--fallback-plan", "--target", "cosine>=0.999", "--json", out])
    steps = read_json(out)["results"]["remedy"]["fallback"]["steps"]
    # baseline: the three large samples overflow; the sources block list (mm1, clamp, scale): none
    assert [(s["action"], s["metrics"]["nonfinite_samples"]) for s in steps[:2]] == [("baseline", 3.0), ("sources", 0.0)]
