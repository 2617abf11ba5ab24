"""Small graphs built with onnx.helper, and the CLI invoke helper, shared by the tests."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import onnx
from click.testing import CliRunner, Result
from onnx import TensorProto, helper, numpy_helper

from inspector_cli.cli import cli

F = TensorProto.FLOAT


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
               outputs: Sequence[onnx.ValueInfoProto], initializers: Sequence[onnx.TensorProto] = (),
               opset: int = 17, name: str = "g") -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def vi(name: str, shape: Optional[Sequence[Any]], elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def affine_model(scale: float = 1.0, shift: float = 0.0, shape: Sequence[Any] = (1, 4), out: str = "y",
                 inp: str = "x", elem: int = F) -> onnx.ModelProto:
    """y = x * scale + shift: two models with different scale/shift give known differences."""
    np_type = {F: np.float32, TensorProto.FLOAT16: np.float16}[elem]
    nodes = [helper.make_node("Mul", [inp, "s"], ["m"], name="mul"),
             helper.make_node("Add", ["m", "b"], [out], name="add")]
    return make_model(nodes, [vi(inp, list(shape), elem)], [vi(out, list(shape), elem)],
                      [init("s", np.array(scale, np_type)), init("b", np.array(shift, np_type))])


def invoke(args: Sequence[str], exit_code: Optional[int] = 0, **kwargs: Any) -> Result:
    """Run `mi ARGS` in-process; assert the exit code (None = don't)."""
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, **kwargs)
    if exit_code is not None:
        assert result.exit_code == exit_code, (
            f"exit {result.exit_code} != {exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def read_json(path: Path) -> Dict[str, Any]:
    return json.loads(Path(path).read_text())


def output_entry(document: Dict[str, Any], name: str) -> Dict[str, Any]:
    for out in document["results"]["outputs"]:
        if out["name"] == name:
            return out
    raise KeyError(name)


def save_npz(folder: Path, samples: List[Dict[str, np.ndarray]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, feeds in enumerate(samples):
        np.savez(folder / f"s{i:03d}.npz", **feeds)
    return folder
