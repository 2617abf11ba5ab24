"""Issue 29: every model the fix-it tier patches, runs from bytes or writes stands alone.

The pair is over 1 MiB, so the lazy loader turns its weights into references into the source
files; the commands run with absolute paths from another working folder, as a user would."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.external_data_helper import uses_external_data

from inspector_cli.core.lazyload import load_model_lazy, save_standalone, standalone_graph_model
from inspector_cli.diff.metrics import compare_arrays
from inspector_cli.errors import UsageError
from inspector_cli.remedy.qdq_patch import bypass_qdq, quantised_nodes

from ..fixtures.helpers import invoke, read_json
from .models import quantize_qdq
from .standalone_models import build_relu6_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return build_relu6_pair(tmp_path_factory.mktemp("relu6") / "models")


def _cosine(fp32: Path, model: Path, samples) -> float:
    ref, other = ort.InferenceSession(str(fp32)), ort.InferenceSession(str(model))
    stats = None
    for feeds in samples:
        pair = compare_arrays(ref.run(None, feeds)[0], other.run(None, feeds)[0])
        stats = pair if stats is None else stats.merge(pair)
    return float(stats.metrics()["cosine"])


def _target(pair) -> float:
    """Halfway between the quantised model's output cosine and 1 (issue 29's target)."""
    folder = pair["folder"]
    baseline = _cosine(folder / "fp32.onnx", folder / "int8.onnx", pair["samples"])
    assert 0.99 < baseline < 0.99999
    return round(baseline + (1 - baseline) / 2, 6)


def test_lazy_weights_are_references_and_standalone_reads_them_in(pair):
    graph = load_model_lazy(pair["folder"] / "fp32.onnx")
    assert graph.uses_external_data  # the premise: fc1.weight points into fp32.onnx
    model = standalone_graph_model(graph)
    assert not any(uses_external_data(t) for t in model.graph.initializer)
    assert graph.uses_external_data  # the loaded graph itself is left as it is
    reference = onnx.load(pair["folder"] / "fp32.onnx")
    assert model.graph.initializer[4].raw_data == reference.graph.initializer[4].raw_data


def test_fallback_plan_from_another_folder_writes_a_model_that_moves(pair, tmp_path, monkeypatch):
    """Old code: exit 3 (the reference, run from bytes, names 'fp32.onnx' relative to the working folder)."""
    folder = pair["folder"]
    target = _target(pair)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "out"
    out.mkdir()
    invoke(["compare", folder / "fp32.onnx", folder / "int8.onnx", "--inputs", folder / "data", "--fallback-plan",
            "--target", f"cosine>={target}", "--write-model", out / "fixed.onnx", "--exclude-list",
            out / "nodes.json", "--json", out / "r.json"], exit_code=0)
    plan = read_json(out / "r.json")["results"]["remedy"]["fallback"]
    assert plan["found"] is True and plan["recheck_meets"] is True
    written = onnx.load(out / "fixed.onnx", load_external_data=False)
    assert not any(uses_external_data(t) for t in written.graph.initializer)  # weights embedded
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(out / "fixed.onnx", moved / "fixed.onnx")  # alone, without the source models beside it
    monkeypatch.chdir(moved)
    assert _cosine(folder / "fp32.onnx", moved / "fixed.onnx", pair["samples"]) >= target
    # the exclude list fed back into quantize_static reproduces the plan's metric (deployed, default level)
    nodes = json.loads((out / "nodes.json").read_text())["nodes_to_exclude"]
    assert nodes == plan["fp32_nodes"]
    requant = quantize_qdq(folder / "fp32.onnx", tmp_path / "requant.onnx", pair["calibration"],
                           nodes_to_exclude=tuple(nodes), per_channel=True)
    metric = plan["final"][f"cosine>={target:g}"]
    assert abs(_cosine(folder / "fp32.onnx", requant, pair["samples"]) - metric) <= 0.002


def test_write_model_over_an_input_is_refused(pair, tmp_path):
    """Old code: onnx.save over int8.onnx (exit 0), the source file rewritten with references into itself."""
    folder = tmp_path / "copy"
    shutil.copytree(pair["folder"], folder)
    before = hashlib.sha256((folder / "int8.onnx").read_bytes()).hexdigest()
    result = invoke(["compare", folder / "fp32.onnx", folder / "int8.onnx", "--inputs", folder / "data",
                     "--fallback-plan", "--target", "cosine>=0.99999", "--write-model", folder / "int8.onnx"],
                    exit_code=2)
    assert "is an input model" in result.stderr
    assert hashlib.sha256((folder / "int8.onnx").read_bytes()).hexdigest() == before


def test_save_standalone_refuses_references_and_replaces_atomically(pair, tmp_path):
    graph = load_model_lazy(pair["folder"] / "fp32.onnx")
    with pytest.raises(ValueError, match="external data"):
        save_standalone(graph.model, tmp_path / "x.onnx")
    with pytest.raises(UsageError, match="input model"):
        save_standalone(standalone_graph_model(graph), pair["folder"] / "fp32.onnx", [pair["folder"] / "fp32.onnx"])
    path = save_standalone(standalone_graph_model(graph), tmp_path / "x.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.onnx"]  # no temporary folder left behind
    assert onnx.load(path).graph.initializer[4].raw_data == onnx.load(pair["folder"] / "fp32.onnx").graph.initializer[4].raw_data


def test_bypass_restores_a_clip_whose_bounds_are_constant_nodes(pair):
    """Old code: ValueError 'patched graph has a cycle or a missing input at node act1_DequantizeLinear'
    (MobileNetV2 per-channel QDQ: the Clip's bounds are Constant nodes of the fp32 model)."""
    fp32, int8 = onnx.load(pair["folder"] / "fp32.onnx"), onnx.load(pair["folder"] / "int8.onnx")
    assert "Clip" not in {n.op_type for n in int8.graph.node}  # folded by quantize_static
    patched = bypass_qdq(int8, quantised_nodes(int8), fp32)
    restored = [n for n in patched.graph.node if n.op_type == "Clip"]
    assert [n.name for n in restored] == ["clip1__restored", "clip2__restored"]
    ref, run = ort.InferenceSession(fp32.SerializeToString()), ort.InferenceSession(patched.SerializeToString())
    batch = {"x": np.concatenate([s["x"] for s in pair["samples"]]) * 4}  # large enough for Clip's 6 to bite
    np.testing.assert_allclose(run.run(None, batch)[0], ref.run(None, batch)[0], rtol=1e-5, atol=1e-5)


def test_bisect_optimizers_from_another_folder(pair, tmp_path, monkeypatch):
    """Old code: exit 3 (model B run from bytes with references into 'fp32.onnx' of the working folder)."""
    folder = pair["folder"]
    monkeypatch.chdir(tmp_path)
    result = invoke(["compare", folder / "fp32.onnx", folder / "fp32.onnx", "--inputs", folder / "data",
                     "--a-opt-level", "disable", "--b-opt-level", "all", "--bisect-optimizers"], exit_code=0)
    assert "optimiser bisection" in result.stdout


def test_qoperator_model_is_refused_in_one_line(pair, tmp_path, monkeypatch):
    """Old code: exit 1, 'plan not found' with no candidate and no word on QOperator."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(pair["calibration"])

        def get_next(self):
            return next(self.items, None)

    folder = pair["folder"]
    monkeypatch.chdir(folder)  # the models' folder: old code then gets past the paths to the plan
    quantize_static(str(folder / "fp32.onnx"), str(tmp_path / "qop.onnx"), Reader(), quant_format=QuantFormat.QOperator)
    result = invoke(["compare", folder / "fp32.onnx", tmp_path / "qop.onnx", "--inputs", folder / "data",
                     "--fallback-plan", "--target", "cosine>=0.99999"], exit_code=2)
    assert "QOperator format (QGemm, QLinearConv)" in result.stderr
    assert "Traceback" not in result.stderr


def test_fp16_plan_without_the_converter_names_the_extra(pair, tmp_path, monkeypatch):
    """Old code: exit 4, ModuleNotFoundError: onnxconverter_common (after a core-only install)."""
    import sys

    from onnxconverter_common import float16

    folder = pair["folder"]
    fp16 = float16.convert_float_to_float16(onnx.load(folder / "fp32.onnx"), keep_io_types=True)
    onnx.save(fp16, tmp_path / "fp16.onnx")
    monkeypatch.chdir(folder)  # the models' folder: old code then fails on the import, not on the paths
    for name in [m for m in sys.modules if m.startswith("onnxconverter_common")]:
        monkeypatch.setitem(sys.modules, name, None)  # as after a core-only install: import raises
    result = invoke(["compare", folder / "fp32.onnx", tmp_path / "fp16.onnx", "--inputs", folder / "data",
                     "--fallback-plan"], exit_code=2)
    assert "pip install 'model-inspector[fp16]'" in result.stderr


def test_fp16_block_list_from_another_folder_moves_and_reproduces(pair, tmp_path, monkeypatch):
    """Old code: exit 3 (the fp32 reference run from bytes with references into 'fp32.onnx')."""
    from onnxconverter_common import float16

    folder = pair["folder"]
    fp16 = float16.convert_float_to_float16(onnx.load(folder / "fp32.onnx"), keep_io_types=True)
    onnx.save(fp16, tmp_path / "fp16.onnx")
    baseline = _cosine(folder / "fp32.onnx", tmp_path / "fp16.onnx", pair["samples"])
    assert 0.9999 < baseline < 1.0
    target = float(f"{baseline + (1 - baseline) / 2:.10f}")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    invoke(["compare", folder / "fp32.onnx", tmp_path / "fp16.onnx", "--inputs", folder / "data", "--fallback-plan",
            "--target", f"cosine>={target}", "--write-model", tmp_path / "fixed.onnx",
            "--exclude-list", tmp_path / "block.json", "--json", tmp_path / "r.json"], exit_code=0)
    plan = read_json(tmp_path / "r.json")["results"]["remedy"]["fallback"]
    assert plan["mode"] == "fp16" and plan["found"] is True and plan["recheck_meets"] is True
    key = f"cosine>={target:.12g}"
    assert list(plan["recheck"]) == [key]
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(tmp_path / "fixed.onnx", moved / "fixed.onnx")
    assert _cosine(folder / "fp32.onnx", moved / "fixed.onnx", pair["samples"]) >= target
    blocks = json.loads((tmp_path / "block.json").read_text())["node_block_list"]
    assert blocks == plan["nodes"] and blocks
    again = float16.convert_float_to_float16(onnx.load(folder / "fp32.onnx"), keep_io_types=True,
                                             node_block_list=blocks)
    onnx.save(again, tmp_path / "again.onnx")
    assert abs(_cosine(folder / "fp32.onnx", tmp_path / "again.onnx", pair["samples"]) - plan["recheck"][key]) <= 0.002


def test_save_standalone_past_the_embed_limit_writes_its_own_data_file(pair, tmp_path, monkeypatch):
    """Past protobuf's 2 GiB (here a limit lowered to 1 kB) the weights go to `<name>.data` beside the
    model, under its own name: the two files moved together load anywhere."""
    import inspector_cli.core.lazyload as lazyload

    monkeypatch.setattr(lazyload, "EMBED_LIMIT", 1000)
    model = standalone_graph_model(load_model_lazy(pair["folder"] / "fp32.onnx"))
    save_standalone(model, tmp_path / "big.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data"]
    header = onnx.load(tmp_path / "big.onnx", load_external_data=False)
    locations = {entry.value for t in header.graph.initializer if uses_external_data(t)
                 for entry in t.external_data if entry.key == "location"}
    assert locations == {"big.onnx.data"}
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("big.onnx", "big.onnx.data"):
        shutil.copy(tmp_path / name, moved / name)
    assert _cosine(pair["folder"] / "fp32.onnx", moved / "big.onnx", pair["samples"]) > 0.9999999


def test_nan_bisect_write_model_over_the_bisected_model_is_refused(tmp_path):
    """Old code: exit 0, fp16.onnx replaced by the converted model (the bisected input destroyed)."""
    from inspector_cli.remedy.fp16_plan import convert_fp16

    from ..fixtures.helpers import save, save_npz
    from .models import overflow_fp32, overflow_samples

    fp32 = save(overflow_fp32(), tmp_path / "fp32.onnx")
    fp16 = save(convert_fp16(overflow_fp32(), []), tmp_path / "fp16.onnx")
    data = save_npz(tmp_path / "data", overflow_samples())
    before = hashlib.sha256(fp16.read_bytes()).hexdigest()
    result = invoke(["nan-bisect", fp16, "--inputs", data, "--fallback-plan", "--reference", fp32,
                     "--write-model", fp16], exit_code=2)
    assert "is an input model" in result.stderr
    assert hashlib.sha256(fp16.read_bytes()).hexdigest() == before


def test_patched_model_keeps_values_only_its_subgraphs_read(tmp_path):
    """Old code: the pruning looked at node inputs only, so a value read only inside an If branch
    (Silero VAD's export does this) was dropped: 'This is an invalid model. In Node, ("If_9", If ...'."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.normal(0, 1, (4, 4)).astype(np.float32), "w")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    then_branch = helper.make_graph([helper.make_node("Identity", ["doubled"], ["then_y"])], "then", [],
                                    [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Neg", ["doubled"], ["else_y"])], "else", [],
                                    [helper.make_tensor_value_info("else_y", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Mul", ["h", "two"], ["doubled"], name="double"),  # read only by the branches
             helper.make_node("ReduceSum", ["x"], ["total"], name="sum", keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["cond"], name="positive"),
             helper.make_node("If", ["cond"], ["y"], name="choose", then_branch=then_branch, else_branch=else_branch)]
    graph = helper.make_graph(nodes, "if_model", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [w, two, numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    fp32 = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    fp32.ir_version = 8
    onnx.save(fp32, tmp_path / "fp32.onnx")
    calibration = [{"x": rng.normal(0, 1, (1, 4)).astype(np.float32)} for _ in range(8)]
    quantize_qdq(tmp_path / "fp32.onnx", tmp_path / "int8.onnx", calibration)
    int8 = onnx.load(tmp_path / "int8.onnx")
    assert "mm" in quantised_nodes(int8)
    for nodes_in_float in ([], ["mm"]):
        patched = bypass_qdq(int8, nodes_in_float, fp32)
        session = ort.InferenceSession(patched.SerializeToString())
        feeds = {"x": np.array([[1.0, -0.5, 2.0, 0.25]], np.float32)}
        expected = ort.InferenceSession(fp32.SerializeToString()).run(None, feeds)[0]
        got = session.run(None, feeds)[0]
        if nodes_in_float:  # mm in float: the fp32 function exactly
            np.testing.assert_allclose(got, expected, rtol=1e-6)
