"""Tensor types computed in a forked child (core/typefork.py): the same types as in-process, and every
way the child can fail falls back to the in-process computation, with no child left behind.

The fork is refused in a process with other threads (pytest's may have onnxruntime's), so the fork
cases run in a fresh interpreter, as `mi` does."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

from inspector_cli.core.graph import load_model
from inspector_cli.core.types import TensorInfo
from inspector_cli.errors import ModelLoadError
from inspector_cli.core.light import light_copy
from inspector_cli.core.protoutil import add_initializer_types, infer_tensor_info, light_value_types
from inspector_cli.testing.transformer import build_transformer

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                                reason="the child is used on Linux with two CPUs only")


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("typefork") / "enc.onnx"
    onnx.save(build_transformer(layers=3, hidden=16, heads=2, ffn=32, vocab=64), str(path))
    return path


def test_the_childs_table_plus_the_initializers_is_the_in_process_result(encoder: Path) -> None:
    model = onnx.load(str(encoder))
    info = {name: TensorInfo(name, elem_type, shape) for name, (elem_type, shape) in light_value_types(model).items()}
    add_initializer_types(model.graph, info)
    expected = infer_tensor_info(light_copy(model))
    assert list(info.items()) == list(expected.items())  # same entries, same order
    assert info["last_hidden_state"].shape == ("batch", "seq", 16)
    assert info["embeddings.word"] == TensorInfo("embeddings.word", 1, (64, 16))


_SCRIPT = textwrap.dedent("""
    import json, os, signal, sys
    from inspector_cli.core import graph as core_graph, protoutil, typefork
    from inspector_cli.core.graph import load_model
    typefork.FORK_MIN_NODES = 0
    case, path = sys.argv[1], sys.argv[2]
    started = []
    def start(model, nodes):
        pending = typefork.start(model, nodes)
        started.append(pending is not None)
        if pending is not None and case == "killed":
            os.kill(pending._pid, signal.SIGKILL)
        return pending
    core_graph.start_type_child = start
    if case == "failing":
        def fail(model):
            raise RuntimeError("inference broke")
        protoutil.light_value_types = fail  # in the child only: the parent's path does not call it
    out = {"started": started, "ran": []}
    try:
        with typefork.while_waiting(lambda: out["ran"].append(len(started))):
            graph = load_model(path, early_types=True)
            if case == "copied":  # copies get a spent handle: they never read the pipe nor signal the child
                import copy, pickle
                spent = [copy.copy(graph._pending_types), copy.deepcopy(graph._pending_types),
                         pickle.loads(pickle.dumps(graph._pending_types))]
                out["copies"] = [p.result() for p in spent]
            out["types"] = [[k, v.elem_type, list(v.shape) if v.shape is not None else None]
                            for k, v in graph.all_tensor_info().items()]
        out["left"] = len(typefork._WHILE_WAITING)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    try:
        os.waitpid(-1, os.WNOHANG)
        out["children_left"] = True
    except ChildProcessError:
        out["children_left"] = False
    print(json.dumps(out))
""")


def _run(case: str, path: Path) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _SCRIPT, case, str(path)], capture_output=True, text=True, env=env,
                          timeout=300, check=True)
    return json.loads(done.stdout)


def _in_process(path: Path) -> list:
    graph = load_model(path)
    return [[k, v.elem_type, list(v.shape) if v.shape is not None else None] for k, v in graph.all_tensor_info().items()]


@linux_only
@pytest.mark.parametrize("case", ["plain", "killed", "failing", "copied"])
def test_types_from_the_child_or_its_fallback_equal_the_in_process_types(encoder: Path, case: str) -> None:
    out = _run(case, encoder)
    assert out["started"] == [True]  # the child was forked...
    assert out["types"] == _in_process(encoder)  # ...and its types (or the fallback's) are the same, in order
    assert out["children_left"] is False  # reaped
    assert out["ran"] == [1] and out["left"] == 0  # the waiting task ran once, after the fork, and is gone
    if case == "copied":
        assert out["copies"] == [None, None, None]


def _not_utf8_node_name(encoder: Path, folder: Path) -> Path:
    """A top-level node name that is not UTF-8: found by the topology, after the fork."""
    data = encoder.read_bytes()
    name = b"\x1a\x10embeddings/Shape"  # NodeProto.name (field 3, 16 bytes)
    assert data.count(name) == 1
    path = folder / "bad.onnx"
    path.write_bytes(data.replace(name, b"\x1a\x10embeddings/\xbd\xbdape"))
    return path


def _data_outside_the_folder(encoder: Path, folder: Path) -> Path:
    """An external-data location outside the model's folder: refused by the guard, after the fork."""
    model = onnx.load(str(encoder))
    onnx.save(model, str(folder / "ext.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    model = onnx.load(str(folder / "ext.onnx"), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../w.bin"
    onnx.save(model, str(folder / "ext.onnx"))
    return folder / "ext.onnx"


@linux_only
@pytest.mark.parametrize("broken, message", [
    (_not_utf8_node_name, "not a valid ONNX protobuf (node 1's name is not UTF-8 text) (the file is corrupt)"),
    (_data_outside_the_folder, "tensor 'embeddings.word': external data location '../w.bin' resolves outside the model's "
                               "folder"),
])
def test_a_load_that_fails_after_the_fork_reports_as_before_and_stops_the_child(tmp_path: Path, encoder: Path,
                                                                                broken, message: str) -> None:
    path = broken(encoder, tmp_path)
    out = _run("plain", path)
    assert out["started"] == [True]
    assert out["error"].startswith(f"ModelLoadError: {path}: {message}")
    with pytest.raises(ModelLoadError) as in_process:
        load_model(path)
    assert out["error"] == f"ModelLoadError: {in_process.value}"  # the in-process message, whole
    assert "types" not in out and out["children_left"] is False
