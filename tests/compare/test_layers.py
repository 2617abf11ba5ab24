"""`mi compare --layers`: capture, first divergence, isolation, chunking, observer checks, golden mode."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from inspector_cli.compare.config import CompareConfig, LayerConfig
from inspector_cli.core.runner import OptLevel, RuntimeConfig
from inspector_cli.diff.gates import Gate
from inspector_cli.testing.models import build_cnn, image_samples, save_samples
from inspector_cli.workflows.compare import compare_models

from ..fixtures.helpers import invoke, read_json, save
from ..fixtures.layer_models import perturbed


@pytest.fixture(scope="module")
def perturbed_pair(tmp_path_factory):
    """fp32 CNN and a copy whose conv_7 weights got noise (conv_7 -> bn_8 feeds the first residual Add)."""
    folder = tmp_path_factory.mktemp("perturbed")
    a = build_cnn(seed=0, softmax=False)
    a_path = save(a, folder / "a.onnx")
    b_path = save(perturbed(a, "conv_7.weight", scale=0.6), folder / "b.onnx")
    save_samples(image_samples(3, seed=5), folder / "data")
    return a_path, b_path, folder / "data"


def layers_of(result):  # type: ignore[no-untyped-def]
    return {row.name: row for row in result.layers.layers}


def test_first_divergence_is_the_perturbed_layer(perturbed_pair):
    a, b, data = perturbed_pair
    tensor = compare_models(a, b, CompareConfig(inputs=(str(data),), layers=LayerConfig(granularity="tensor")))
    section = tensor.layers
    assert section.first_divergence == "conv_7_out" and section.first_divergence_metrics == ["cosine"]
    rows = layers_of(tensor)
    upstream = [r for r in section.layers if r.index < rows["conv_7_out"].index]
    assert upstream and all(r.dataset["cosine"] == 1.0 and r.dataset["max_abs"] == 0.0 for r in upstream)
    assert rows["conv_7_out"].dataset["cosine"] < 0.99 and rows["conv_7_out"].method == "name"
    chain = compare_models(a, b, CompareConfig(inputs=(str(data),), layers=LayerConfig()))
    assert chain.layers.first_divergence == "bn_8_out"  # the Conv+BatchNormalization chain conv_7 starts
    assert layers_of(chain)["bn_8_out"].op_a == "Conv+BatchNormalization"
    assert chain.layers.skipped["inside a fused chain (--granularity tensor compares it)"] == 11
    assert chain.layers.skipped["same values as another compared tensor (Reshape, Flatten, Identity, Cast, Q/DQ)"] == 1
    assert chain.passed  # layer thresholds mark the divergence; without --gate-layers they do not fail the run


def test_isolation_points_at_the_perturbed_layer_and_marks_downstream_inherited(perturbed_pair):
    a, b, data = perturbed_pair
    result = compare_models(a, b, CompareConfig(inputs=(str(data),),
                                                layers=LayerConfig(granularity="tensor", isolate=("all",))))
    rows = layers_of(result)
    culprit = rows["conv_7_out"]
    assert culprit.error_source == "own" and culprit.own_share == pytest.approx(1.0, abs=1e-6)
    assert culprit.isolated["cosine"] == pytest.approx(culprit.dataset["cosine"], abs=1e-7)
    downstream = [r for r in result.layers.layers if r.index > culprit.index]
    assert len(downstream) >= 8
    for row in downstream:
        assert row.dataset["cosine"] < 1.0  # the error reached it ...
        assert row.error_source == "inherited" and row.own_share < 1e-6  # ... but it adds none of its own
        assert row.isolated["sqnr"] > 100
    assert all(r.error_source is None for r in result.layers.layers if r.index < culprit.index)  # no error at all


def test_chunked_capture_equals_all_at_once(cnn_pair):
    fp32, int8, data = cnn_pair
    exact = RuntimeConfig(opt_level=OptLevel.DISABLE)  # no fusions: every chunking runs the very same kernels

    def run(max_memory):  # type: ignore[no-untyped-def]
        config = CompareConfig(inputs=(str(data),), runtime=exact, layers=LayerConfig(max_memory=max_memory))
        return compare_models(fp32, int8, config)

    whole, chunked = run(None), run(40_000)
    assert whole.layers.capture.strategy == "all-at-once" and whole.layers.capture.chunks == 1
    assert chunked.layers.capture.strategy == "chunked" and chunked.layers.capture.chunks >= 3
    assert chunked.layers.capture.runs == 2 * 6 * chunked.layers.capture.chunks
    assert [r.name for r in whole.layers.layers] == [r.name for r in chunked.layers.layers]
    for x, y in zip(whole.layers.layers, chunked.layers.layers):
        assert x.dataset == y.dataset and x.worst == y.worst
    assert whole.outputs[0].dataset == chunked.outputs[0].dataset


def test_deployed_capture_reads_onnxruntimes_own_int8_tensors(cnn_pair):
    fp32, int8, data = cnn_pair
    deployed = compare_models(fp32, int8, CompareConfig(inputs=(str(data),), layers=LayerConfig()))
    instrumented = compare_models(fp32, int8, CompareConfig(inputs=(str(data),),
                                                            layers=LayerConfig(capture="instrumented")))
    assert deployed.layers.capture.capture_b == "deployed" and instrumented.layers.capture.capture_b == "instrumented"
    observer_b = [c for c in deployed.layers.observer if c.model == "B"]
    assert observer_b and all(c.identical for c in observer_b)  # reading them changed nothing
    assert len(deployed.layers.layers) == len(instrumented.layers.layers) == 11
    assert deployed.layers.layers[0].name == "input" and deployed.layers.layers[0].method == "qdq"
    for x, y in zip(deployed.layers.layers[:-1], instrumented.layers.layers[:-1]):  # the last is the float output
        assert x.name == y.name and x.dtype_b in ("int8 (dequantised)", "uint8 (dequantised)")
        assert y.dtype_b == "int8 (dequantised)"
        # the same quantity, computed by QLinearConv instead of float Conv + Q/DQ: a few quantisation steps apart
        assert x.dataset["cosine"] == pytest.approx(y.dataset["cosine"], abs=2e-3)


def test_qdq_noise_is_measured_for_quantised_layers(cnn_pair):
    fp32, int8, data = cnn_pair
    result = compare_models(fp32, int8, CompareConfig(inputs=(str(data),), layers=LayerConfig(isolate=("worst:2",))))
    isolated = [r for r in result.layers.layers if r.isolated is not None]
    assert len(isolated) == 2 and set(result.layers.isolation["isolated"]) == {r.name for r in isolated}
    worst_two = sorted(result.layers.layers, key=lambda r: r.dataset["cosine"])[:2]
    assert {r.name for r in isolated} == {r.name for r in worst_two}
    quantised = [r for r in isolated if r.qdq_noise is not None]
    assert quantised and all(20 < r.qdq_noise["sqnr"] < 60 for r in quantised)  # int8 rounding noise


def test_layer_gates_only_fail_the_run_with_gate_layers(tmp_path, cnn_pair):
    fp32, int8, data = cnn_pair
    base = ["compare", fp32, int8, "-i", data, "--layers", "all", "--layer-min-cosine", "0.99999", "--json"]
    invoke(base + [tmp_path / "a.json"], exit_code=0)
    invoke(base + [tmp_path / "b.json", "--gate-layers"], exit_code=1)
    doc = read_json(tmp_path / "b.json")
    section = doc["results"]["layers"]
    # int8 rounding of the input itself already costs more than 1e-5 of cosine: the first divergence
    assert section["layers"][0]["name"] == section["first_divergence"] == "input"
    assert section["layers"][0]["op_a"] == "input" and section["layers"][0]["dataset"]["cosine"] < 0.99999
    assert section["thresholds"] == [{"metric": "cosine", "op": ">=", "threshold": 0.99999, "target": None,
                                      "source": "user", "flag": "layer-min-cosine"}]
    layer_gates = [g for g in doc["results"]["gates"] if g["scope"] == "layer"]
    assert len(layer_gates) == len(section["layers"]) and not any(g["passed"] for g in layer_gates)
    assert section["pairing"] == {"fused": 8, "qdq": 3} and section["capture"]["capture_b"] == "deployed"
    assert doc["verdict"]["exit_code"] == 1 and "first divergence at 'input'" in doc["verdict"]["summary"]


def test_layer_flags_need_layers_and_golden_needs_one_model(cnn_pair, tmp_path):
    fp32, int8, data = cnn_pair
    result = invoke(["compare", fp32, int8, "-i", data, "--isolate", "all"], exit_code=2)
    assert "--isolate needs --layers" in result.stderr
    def error(argv):  # the one Error: line of a usage error (exit 2)
        lines = [line for line in invoke(argv, exit_code=2).stderr.splitlines() if line.startswith("Error:")]
        assert len(lines) == 1
        return lines[0]

    assert "worst:x" in error(["compare", fp32, int8, "-i", data, "--layers", "all", "--isolate", "worst:x"])
    assert "--golden" in error(["compare", fp32, int8, "--golden", data])
    assert "MODEL_B" in error(["compare", fp32])
    assert "--map" in error(["compare", fp32, int8, "-i", data, "--map", "relu_3_out=x"])  # intermediate: needs --layers


def test_per_model_opt_levels(cnn_pair):
    fp32, _, data = cnn_pair
    config = CompareConfig(inputs=(str(data),), runtime=RuntimeConfig(opt_level=OptLevel.DISABLE),
                           runtime_b=RuntimeConfig(opt_level=OptLevel.ALL), layers=LayerConfig(granularity="tensor"))
    result = compare_models(fp32, fp32, config)
    assert result.config["runtime"]["opt_level"] == "disable" and result.config["runtime_b"]["opt_level"] == "all"
    assert len(result.layers.layers) == 21 and {r.method for r in result.layers.layers} == {"name"}  # softmax=False
    assert min(r.dataset["cosine"] for r in result.layers.layers) > 0.999999  # fusions only reorder float sums


def test_golden_mode_on_a_zoo_folder(tmp_path):
    import onnxruntime as ort

    model = build_cnn(seed=2, softmax=False)
    path = save(model, tmp_path / "model.onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for k, sample in enumerate(image_samples(2, seed=8)):
        folder = tmp_path / "golden" / f"test_data_set_{k}"
        folder.mkdir(parents=True)
        (folder / "input_0.pb").write_bytes(onnx.numpy_helper.from_array(sample["input"], "input").SerializeToString())
        out = session.run(None, sample)[0]
        (folder / "output_0.pb").write_bytes(onnx.numpy_helper.from_array(out, "").SerializeToString())
    result = invoke(["compare", path, "--golden", tmp_path / "golden", "--min-cosine", "0.999999", "--json",
                     tmp_path / "g.json"], exit_code=0)
    out = read_json(tmp_path / "g.json")["results"]["outputs"][0]
    assert out["name"] == "logits" and out["matched_by"] == "golden" and out["samples"] == 2
    assert out["dataset"]["cosine"] == 1.0 and out["dataset"]["max_abs"] == 0.0
    assert "PASS" in result.stdout
    wrong = tmp_path / "golden" / "test_data_set_1" / "output_0.pb"
    tensor = onnx.TensorProto()
    tensor.ParseFromString(wrong.read_bytes())
    wrong.write_bytes(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor) * -1, "").SerializeToString())
    invoke(["compare", path, "--golden", tmp_path / "golden", "--min-cosine", "0.99"], exit_code=1)


def test_golden_npz_holds_inputs_and_outputs(tmp_path):
    model = build_cnn(seed=2, softmax=False)
    path = save(model, tmp_path / "model.onnx")
    sample = image_samples(1, seed=8)[0]
    np.savez(tmp_path / "s0.npz", input=sample["input"], logits=np.zeros((1, 10), np.float32))
    config = CompareConfig(golden=str(tmp_path), gates=(Gate("min-cosine", "cosine", 0.5),))
    result = compare_models(path, None, config)  # type: ignore[arg-type]
    assert result.outputs[0].dataset["cosine"] == 0.0 and not result.passed  # reference all zero, model not


def test_yaml_config_with_layers_and_map(tmp_path, cnn_pair):
    fp32, int8, data = cnn_pair
    config = tmp_path / "run.yaml"
    config.write_text("version: 1\ncompare:\n  layers: [all]\n  layer-min-sqnr: 20\n  isolate: ['worst:2']\n"
                      "  map: {relu_3_out: relu_3_out_DequantizeLinear_Output}\n")
    invoke(["-c", config, "compare", fp32, int8, "-i", data, "--json", tmp_path / "r.json"], exit_code=0)
    section = read_json(tmp_path / "r.json")["results"]["layers"]
    first = section["layers"][1]
    assert first["name"] == "relu_3_out" and first["method"] == "map" and first["name_b"] == "relu_3_out_DequantizeLinear_Output"
    assert section["thresholds"][0]["metric"] == "sqnr" and len(section["isolation"]["isolated"]) == 2
    shipped_config = Path(__file__).resolve().parents[2] / "configs" / "compare-layers.yaml"
    shipped = invoke(["-c", shipped_config, "compare", fp32, int8, "-i", data, "--format", "markdown"], exit_code=0)
    assert "layers in the reference's order (11 compared; layer thresholds: cosine >= 0.98, sqnr >= 20)" in shipped.stdout
    assert "isolated cos" in shipped.stdout


def test_layer_gate_and_isolate_names_must_exist(cnn_pair):
    fp32, int8, data = cnn_pair
    result = invoke(["compare", fp32, int8, "-i", data, "--layers", "all", "--layer-max-abs", "nope*=1"], exit_code=2)
    assert "no compared layer is named 'nope*'" in result.stderr
    result = invoke(["compare", fp32, int8, "-i", data, "--layers", "all", "--isolate", "relu_99_out"], exit_code=2)
    assert "--isolate relu_99_out: no compared layer" in result.stderr
    ok = invoke(["compare", fp32, int8, "-i", data, "--layers", "all", "--layer-max-abs", "relu_*=100",
                 "--isolate", "bn_*", "--format", "csv"], exit_code=0)
    rows = [line for line in ok.stdout.splitlines() if line.startswith("layers in the reference")]
    assert len(rows) == 11 and sum(",own," in r or ",mixed," in r or ",inherited," in r for r in rows) == 3
