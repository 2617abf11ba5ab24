"""Zoo members edited with a tool we did not write: onnx-graphsurgeon (issue 41), how TensorRT users cut,
fold and fix graphs. Each starts from a zoo model's torch export made without torch's constant folding
(what exporters that do not fold leave), then a graph-surgeon script as users write it:

- `resnet_gs_cut`: the ResNet backbone cut at its pooled features (the classifier head removed by
  `cleanup()`), constants folded (`fold_constants()`: 105 -> 53 nodes), the new output declared with its
  type only (`Variable(dtype=...)`: graph-surgeon writes a type without a `shape` field for a tensor whose
  shape it does not know).
- `bert_gs`: BERT with its constants folded (376 -> 222 nodes) and both outputs re-declared with their type
  only, as a script that rebuilds `graph.outputs` writes them.
- `resnet_dupnames`: ResNet with a Clip(0, 6) inserted after every Relu by a graph-surgeon loop that names
  each inserted node "relu6" (graph-surgeon does not check names). onnxruntime refuses the file ("two nodes
  with same node name"): the sweep expects every command that runs it to stop in one line (exit 3), and
  `mi validate` to exit 1 (`Spec.refused`).

onnx-graphsurgeon is in the dev extra (a 60 kB pure-Python wheel: numpy, onnx); its constant folding runs
onnxruntime.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, List

import numpy as np

GS_VARIANTS = ("qdq_u8u8", "fp16", "renamed")
"""Variants the edited members get: one int8, one fp16, and a re-export with other names on top."""


def _unfolded(base: str):
    """The zoo model `base` exported by torch (torchscript) without constant folding, as an onnx.ModelProto."""
    import onnx
    import torch

    from .models import SPECS
    spec = next(s for s in SPECS if s.name == base)
    sample = spec.inputs(1, 0)[0]
    names = list(sample)
    args = tuple(torch.from_numpy(np.asarray(sample[n])) for n in names)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "unfolded.onnx"
        torch.onnx.export(spec.build(), args, str(path), dynamo=False, do_constant_folding=False, input_names=names,
                          output_names=list(spec.output_names), opset_version=spec.opset,
                          dynamic_axes=spec.dynamic or None)
        return onnx.load(str(path))


def _export(graph):
    import onnx_graphsurgeon as gs
    return gs.export_onnx(graph)


def resnet_cut() -> object:
    """The backbone of the zoo's ResNet: outputs its pooled features (type only), head cut, constants folded."""
    import onnx_graphsurgeon as gs

    graph = gs.import_onnx(_unfolded("resnet"))
    graph.fold_constants().cleanup()
    pooled = [n for n in graph.nodes if n.op in ("GlobalAveragePool", "AveragePool", "ReduceMean")]
    features = pooled[-1].outputs[0]  # the head's input: the last pooling (the stem's MaxPool is not one)
    features.dtype, features.shape = np.float32, None
    graph.outputs = [features]
    graph.cleanup().toposort()
    return _export(graph)


def bert_folded() -> object:
    """The zoo's BERT with constants folded and its outputs re-declared with their type only."""
    import onnx_graphsurgeon as gs

    graph = gs.import_onnx(_unfolded("bert"))
    graph.fold_constants().cleanup()
    for output in graph.outputs:
        output.shape = None
    graph.toposort()
    return _export(graph)


def resnet_dupnames() -> object:
    """The zoo's ResNet with Clip(0, 6) after every Relu, each inserted node named 'relu6'."""
    import onnx_graphsurgeon as gs

    graph = gs.import_onnx(_unfolded("resnet"))
    graph.fold_constants().cleanup()
    low, high = gs.Constant("relu6_min", np.array(0.0, np.float32)), gs.Constant("relu6_max", np.array(6.0, np.float32))
    for index, relu in enumerate([n for n in graph.nodes if n.op == "Relu"]):
        out = relu.outputs[0]
        clipped = gs.Variable(f"{out.name}_relu6", dtype=np.float32)
        for consumer in list(out.outputs):
            consumer.inputs = [clipped if t is out else t for t in consumer.inputs]
        graph.nodes.append(gs.Node("Clip", name="relu6", inputs=[out, low, high], outputs=[clipped]))
    graph.cleanup().toposort()
    return _export(graph)


def specs(spec_type: type, images: Callable, text: Callable, img_dyn: dict, text_dyn: dict) -> List[object]:
    """The edited members, as `models.Spec`s (passed in: this module is imported by models.py)."""
    recipe = {"tool": "onnx-graphsurgeon", "v": 1}
    return [
        spec_type("resnet_gs_cut", "features", resnet_cut, images(224), ("features",), {}, 17, "onnx-graphsurgeon",
                  {**recipe, "base": "resnet", "edit": "fold+cut@pool+typed-only"}, variants=GS_VARIANTS),
        spec_type("bert_gs", "text", bert_folded, text(16, 1000), ("last_hidden_state", "pooler_output"), {}, 14,
                  "onnx-graphsurgeon", {**recipe, "base": "bert", "edit": "fold+typed-only"}, int4=True,
                  variants=GS_VARIANTS + ("int4",)),
        spec_type("resnet_dupnames", "cnn", resnet_dupnames, images(224), ("logits",), {}, 17, "onnx-graphsurgeon",
                  {**recipe, "base": "resnet", "edit": "relu6-same-name"}, variants=(),
                  refused="two nodes with same node name"),
    ]
