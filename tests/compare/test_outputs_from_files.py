"""An outputs-only comparison of two plain files is planned from their headers (compare/plan
`plan_from_files`: no onnx, no graph) and must write exactly the JSON the graph-loading path
writes; it falls back to that path whenever a header cannot be read or a session cannot be built."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
from onnx import TensorProto, helper

import inspector_cli.workflows.compare as workflow
from inspector_cli.compare.config import CompareConfig
from inspector_cli.compare.plan import FileModel, plan_comparison, plan_from_files
from inspector_cli.core.synthetic import SyntheticSpec
from inspector_cli.errors import InputDataError

from ..fixtures.helpers import affine_model, invoke, make_model, save, save_npz, vi


def _without_time(document: Dict[str, Any]) -> Dict[str, Any]:
    document = dict(document)
    document.pop("created")
    return document


def _run(tmp_path: Path, argv: List[str], name: str) -> Dict[str, Any]:
    out = tmp_path / name
    invoke(["-q", "compare", *argv, "--json", out], exit_code=None)
    return _without_time(json.loads(out.read_text()))


def _both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: List[str]) -> tuple:
    used: List[Any] = []
    real = workflow.plan_from_files

    def spy(*args: Any) -> Any:
        plan = real(*args)
        used.append(plan)
        return plan

    monkeypatch.setattr(workflow, "plan_from_files", spy)
    fast = _run(tmp_path, argv, "fast.json")
    assert len(used) == 1 and isinstance(used[0].graph_a, FileModel)  # the header path did run
    monkeypatch.setattr(workflow, "plan_from_files", lambda *args: None)
    usual = _run(tmp_path, argv, "usual.json")
    return fast, usual


def test_same_json_as_the_graph_path_with_gates_and_renamed_outputs(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    a = save(affine_model(2.0, 1.0, shape=("N", 4)), tmp_path / "a.onnx")
    b_model = affine_model(2.01, 1.0, shape=("N", 4), out="y_b")
    b_model.producer_name, b_model.producer_version = "quantiser", "9"
    b = save(b_model, tmp_path / "b.onnx")
    rng = np.random.default_rng(0)
    data = save_npz(tmp_path / "data", [{"x": rng.normal(size=(2, 4)).astype(np.float32)} for _ in range(3)])
    fast, usual = _both_paths(tmp_path, monkeypatch, [a, b, "--inputs", data, "--max-abs", "0.01"])
    assert fast == usual
    assert fast["verdict"]["exit_code"] == 1  # |0.01 x| exceeds 0.01 somewhere: a real gate outcome
    assert fast["models"][1]["producer"] == "quantiser 9" and fast["models"][0]["opset"] == 17
    assert fast["results"]["outputs"][0]["matched_by"] == "position"


@pytest.mark.parametrize("model,variant", [("bert", "qdq_u8u8"), ("resnet", "fp16_io")])
def test_same_json_on_zoo_model_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, variant: str) -> None:
    zoo = Path.home() / ".cache" / "mi-zoo" / "zoo-fast" / model
    if not (zoo / "fp32.onnx").exists() or not (zoo / f"{variant}.onnx").exists():
        pytest.skip("the zoo is not built here")
    fast, usual = _both_paths(tmp_path, monkeypatch, [zoo / "fp32.onnx", zoo / f"{variant}.onnx", "--inputs", zoo / "data"])
    assert fast == usual
    assert fast["models"][0]["sha256"] and fast["inputs"]["count"] > 0 and fast["results"]["outputs"]


def test_a_shapeless_input_is_unknown_as_in_the_file(tmp_path: Path) -> None:
    # onnxruntime reports a declared-but-shapeless input as a scalar; the file (and the usual path) says
    # "no shape", so synthetic samples need --shape on both paths alike
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], [vi("y", None)])
    path = save(model, tmp_path / "m.onnx")
    with pytest.raises(InputDataError, match="input 'x' has an unknown shape"):
        plan_from_files(path, path, CompareConfig())
    with pytest.raises(InputDataError, match="input 'x' has an unknown shape"):
        plan_comparison(path, path, CompareConfig())
    config = CompareConfig(synthetic=SyntheticSpec(shapes=(("x", (2, 3)),)))
    plan = plan_from_files(path, path, config)
    assert plan is not None and plan.graph_a.inputs[0].shape is None
    assert plan.graph_a.display_name == str(path) and plan.outputs.pairs[0].a == "y"
    assert plan_comparison(path, path, config).samples.describe() == plan.samples.describe()


def test_an_unreadable_header_or_a_broken_session_takes_the_usual_path(tmp_path: Path) -> None:
    good = save(affine_model(2.0, 1.0), tmp_path / "good.onnx")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x08garbage")
    assert plan_from_files(good, broken, CompareConfig()) is None
    result = invoke(["-q", "compare", good, broken], exit_code=3)
    assert "broken.onnx: not a valid ONNX protobuf" in result.stderr
    # a header that reads, a model onnxruntime refuses: the usual path's error, not an assertion
    bad_op = make_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="n")], [vi("x", [1, 4])], [vi("y", [1, 4])])
    refused = save(bad_op, tmp_path / "refused.onnx")
    assert plan_from_files(good, refused, CompareConfig()) is not None
    result = invoke(["-q", "compare", good, refused], exit_code=None)
    assert result.exit_code == 3 and "onnxruntime could not load the model" in result.stderr


def test_pairing_errors_come_first_as_on_the_usual_path(tmp_path: Path) -> None:
    a = save(affine_model(2.0, 1.0), tmp_path / "a.onnx")
    two_out = make_model([helper.make_node("Relu", ["x"], ["p"], name="r"), helper.make_node("Neg", ["x"], ["q"], name="n")],
                         [vi("x", [1, 4])], [vi("p", [1, 4]), vi("q", [1, 3])])
    b = save(two_out, tmp_path / "b.onnx")
    result = invoke(["-q", "compare", a, b], exit_code=None)
    assert result.exit_code == 3 and "no output of" in result.stderr
