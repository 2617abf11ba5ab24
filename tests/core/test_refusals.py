"""A model onnxruntime refuses to load is never analysed as if it loaded (issue 41).

Two nodes sharing a name: mi renamed the later one in memory and every command analysed the renamed
copy (`compare M M` PASS, `profile` and `nan-bisect` CLEAN, `validate` a warning, MI308), while
onnxruntime refuses the file ("two nodes with same node name"). Now every command that runs it stops in
one line (exit 3), validate errs (MI308), and `--rename-duplicate-nodes` analyses the renamed copy on
purpose, recorded in the result (`models[].renamed_nodes`, `runtime.rename_duplicate_nodes`). A graph
output that no node makes: `probe` exposed only the tensors it reads and said PASS (exit 0); onnxruntime
refuses the file ("Graph output (z) does not exist in the graph")."""
from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ..fixtures.helpers import init, make_model, save, vi
from ..fixtures.subproc import assert_status, run_mi

RUNNING = {
    "compare": ["compare", "{m}", "{m}"],
    "compare-layers": ["compare", "{m}", "{m}", "--layers", "all"],
    "probe": ["probe", "{m}", "--no-history"],
    "nan-bisect": ["nan-bisect", "{m}"],
    "profile": ["profile", "{m}", "--runs", "2", "--warmup", "0"],
}


def _duplicates():
    """x -> Relu 'block' -> Mul 'block' (the same name) -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="block"),
             helper.make_node("Mul", ["a", "two"], ["y"], name="block")]
    return make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], [init("two", np.array(2.0, np.float32))])


def _in_subgraph():
    """The duplicate names inside an If's then-branch (onnxruntime checks every graph)."""
    then = helper.make_graph([helper.make_node("Neg", ["a"], ["t"], name="s"),
                              helper.make_node("Relu", ["t"], ["t2"], name="s")], "then", [],
                             [vi("t2", [2, 4])])
    other = helper.make_graph([helper.make_node("Relu", ["a"], ["e"], name="q")], "else", [], [vi("e", [2, 4])])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
    return make_model(nodes, [vi("x", [2, 4]), vi("c", [], TensorProto.BOOL)], [vi("y", [2, 4])])


def _dangling_output():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    return make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4]), vi("z", [2, 4])])


def _refused_by_onnxruntime(path) -> str:
    with pytest.raises(Exception) as caught:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return str(caught.value)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("refused")
    built = {name: save(build(), folder / f"{name}.onnx") for name, build in
             (("dup", _duplicates), ("dupsub", _in_subgraph), ("dangling", _dangling_output))}
    assert "two nodes with same node name" in _refused_by_onnxruntime(built["dup"])
    assert "two nodes with same node name" in _refused_by_onnxruntime(built["dupsub"])
    assert "Graph output (z) does not exist" in _refused_by_onnxruntime(built["dangling"])
    return built


def _errors(ran):
    return [line for line in ran.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("command", list(RUNNING))
def test_every_running_command_stops_in_one_line(models, tmp_path, command):
    """Before: exit 0 (PASS / CLEAN) on the renamed copy, for every command here."""
    args = [a.replace("{m}", str(models["dup"])) for a in RUNNING[command]]
    ran = run_mi(args, cwd=tmp_path)
    assert_status(ran, 3)
    lines = _errors(ran)
    assert len(lines) == 1, lines
    assert "onnxruntime refuses this model: 2 nodes are named 'block' (onnxruntime: two nodes with same node name)" \
        in lines[0] and "--rename-duplicate-nodes" in lines[0]


def test_duplicates_in_a_subgraph_stop_compare(models, tmp_path):
    ran = run_mi(["compare", models["dupsub"], models["dupsub"]], cwd=tmp_path)
    assert_status(ran, 3)
    assert "2 nodes are named 's'" in _errors(ran)[0]


@pytest.mark.parametrize("model", ["dup", "dupsub"])
def test_validate_errs(models, tmp_path, model):
    """Before: MI308 was a warning, and the session ran on the renamed copy: exit 0."""
    ran = run_mi(["validate", models[model], "--json", tmp_path / "v.json"], cwd=tmp_path)
    assert_status(ran, 1)
    findings = json.loads((tmp_path / "v.json").read_text())["results"]["findings"]
    errors = [(f["rule"], f["severity"]) for f in findings if f["severity"] == "error"]
    assert errors == [("MI308", "error")]
    assert "onnxruntime refuses the model" in findings[0]["message"]


@pytest.mark.parametrize("command", ["compare-layers", "probe", "nan-bisect", "profile"])
def test_rename_flag_analyses_the_copy_and_says_so(models, tmp_path, command):
    args = [a.replace("{m}", str(models["dup"])) for a in RUNNING[command]]
    ran = run_mi([*args, "--rename-duplicate-nodes", "--json", tmp_path / "r.json"], cwd=tmp_path)
    assert_status(ran, 0)
    document = json.loads((tmp_path / "r.json").read_text())
    assert {m["path"]: m["renamed_nodes"] for m in document["models"]} == {str(models["dup"]): {"block_1": "block"}}
    assert document["results"]["runtime"]["rename_duplicate_nodes"] is True
    assert "analysed a copy with 1 duplicate node name(s) renamed ('block' -> 'block_1')" in " ".join(ran.stdout.split())


def test_probe_refuses_a_graph_output_no_node_makes(models, tmp_path):
    """Before: probe exposed only the tensors it reads (the dangling output undeclared) and passed."""
    ran = run_mi(["probe", models["dangling"], "--no-history"], cwd=tmp_path)
    assert_status(ran, 3)
    assert "graph output 'z' is made by no node" in _errors(ran)[0]
    flagged = run_mi(["probe", models["dangling"], "--no-history", "--rename-duplicate-nodes"], cwd=tmp_path)
    assert_status(flagged, 3)  # the flag renames nodes; it cannot make this file load


def test_sequence_mode_stops_too(tmp_path):
    """`--sequence` opens its sessions through the same gate. Before: PASS over the steps."""
    nodes = [helper.make_node("Add", ["x", "state"], ["a"], name="n"),
             helper.make_node("Tanh", ["a"], ["state_out"], name="n"), helper.make_node("Relu", ["state_out"], ["y"], name="r")]
    model = save(make_model(nodes, [vi("x", [1, 4]), vi("state", [1, 4])], [vi("y", [1, 4]), vi("state_out", [1, 4])]),
                 tmp_path / "rnn.onnx")
    steps = tmp_path / "steps"
    steps.mkdir()
    for i in range(3):
        np.savez(steps / f"step_{i:03d}.npz", x=np.full((1, 4), 0.1 * i, np.float32))
    ran = run_mi(["compare", model, model, "--sequence", steps], cwd=tmp_path)
    assert_status(ran, 3)
    assert "2 nodes are named 'n'" in _errors(ran)[0] and len(_errors(ran)) == 1
    assert_status(run_mi(["compare", model, model, "--sequence", steps, "--rename-duplicate-nodes"], cwd=tmp_path), 0)
