"""Repro bundles (`--repro DIR`): the origin node alone, its input values, and how to replay it.

For each origin node, DIR/<node>/ holds `origin.onnx` (the node as a one-node model; the weights
it reads stay initializers inside it), `inputs.npz` (the values of its other inputs, captured on
the first failing sample), `replay.py` (plain onnxruntime, no mi needed) and `README.txt` with the
`mi` command that finds the same origin again.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Dict, List, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .model import PreparedModel

REPLAY = '''"""Replays the origin node of a NaN/Inf found by mi nan-bisect (needs numpy and onnxruntime)."""
import pathlib

import numpy as np
import onnxruntime as ort

here = pathlib.Path(__file__).resolve().parent
session = ort.InferenceSession(str(here / "origin.onnx"), providers=["CPUExecutionProvider"])
with np.load(here / "inputs.npz", allow_pickle=False) as data:
    feeds = {{name: data[name] for name in data.files}}
for output, value in zip([o.name for o in session.get_outputs()], session.run(None, feeds)):
    if value.dtype.kind == "f":
        print(f"{{output}}: {{int(np.isnan(value).sum())}} NaN, {{int(np.isinf(value).sum())}} Inf of {{value.size}}")
    else:
        print(f"{{output}}: {{value.dtype}} {{list(value.shape)}}")
'''


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "node"


def one_node_model(prepared: PreparedModel, node_name: str, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """The node alone: its weights as initializers, every other input a graph input typed from `values`."""
    graph = prepared.graph
    info = graph.node_by_name[node_name]
    proto = onnx.NodeProto()
    proto.CopyFrom(graph.node_proto(node_name))
    names = list(dict.fromkeys([t for t in info.inputs if t] + list(info.implicit_inputs)))
    inputs, initializers = [], []
    for name in names:
        if prepared.is_initializer(name):
            value = prepared.initializer(name)
            if value is not None:
                initializers.append(numpy_helper.from_array(value, name))
                continue
        value = values[name]
        inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape)))
    outputs = []
    for out in info.outputs:
        if out:
            elem = graph.tensor_info(out).elem_type
            outputs.append(helper.make_tensor_value_info(out, elem, None) if elem else onnx.ValueInfoProto(name=out))
    sub = helper.make_graph([proto], f"origin_{safe_name(node_name)}", inputs, outputs, initializers)
    model = helper.make_model(sub, opset_imports=list(graph.model.opset_import), ir_version=graph.model.ir_version,
                              producer_name="mi nan-bisect --repro")
    model.functions.extend(graph.model.functions)
    return model


def input_values(prepared: PreparedModel, node_name: str, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Values of the node's non-weight inputs on this sample (one run exposing just them)."""
    info = prepared.graph.node_by_name[node_name]
    names = [t for t in dict.fromkeys([t for t in info.inputs if t] + list(info.implicit_inputs))
             if not prepared.is_initializer(t)]
    values = {t: feeds[t] for t in names if t in feeds}
    computed = [t for t in names if t not in values]
    if computed:
        session = prepared.open_full(computed, label="repro")
        values.update(session.run(feeds, computed))
    return values


def write_bundle(prepared: PreparedModel, node_name: str, feeds: Mapping[str, np.ndarray], folder: Path,
                 *, sample: str, model_label: str) -> Path:
    """Write DIR/<node>/ and return that folder."""
    target = folder / safe_name(node_name)
    target.mkdir(parents=True, exist_ok=True)
    values = input_values(prepared, node_name, feeds)
    onnx.save(one_node_model(prepared, node_name, values), str(target / "origin.onnx"))
    np.savez(target / "inputs.npz", **values)
    (target / "replay.py").write_text(REPLAY.format(), encoding="utf-8")
    lines: List[str] = [
        f"Origin of NaN/Inf: node '{node_name}' of {model_label}, captured on sample {sample}.",
        "",
        "Replay with mi (finds the same origin):",
        f"  mi nan-bisect {shlex.quote(str(target / 'origin.onnx'))} --inputs {shlex.quote(str(target / 'inputs.npz'))}",
        "Replay with onnxruntime only:",
        f"  python {shlex.quote(str(target / 'replay.py'))}",
        "",
    ]
    (target / "README.txt").write_text("\n".join(lines), encoding="utf-8")
    return target
