"""Reading tensors from onnxruntime's own optimised graph, so that capturing them changes nothing.

Exposing a tensor of a QDQ model as an output stops onnxruntime fusing DequantizeLinear -> Conv ->
QuantizeLinear into QLinearConv (measured with onnxruntime 1.32: also when the exposed tensor is
the QuantizeLinear's int8 output), so an instrumented int8 model runs 2-3x slower and is no longer
the model that is deployed. Instead, the plain session saves its optimised graph
(`optimized_model_filepath`); that graph is run with optimisation disabled and the tensors are
exposed *there*: the fused kernels stay, and their int8 outputs are read and dequantised in numpy.

Where an original tensor lives in the optimised graph:
- a float tensor whose name survives is taken as is (onnxruntime runs fp16 models on CPU in fp32 and
  renames the tensors `InsertedPrecisionFreeCast_<name>`: those are taken too);
- a quantised value (a QuantizeLinear output of the original) is the integer output of the
  optimised node that carries the name of the original producer (QLinearConv keeps the Conv's
  name, possibly with a `_token_N` suffix) or of a QuantizeLinear, and only when its output scale
  is the very initializer the original QuantizeLinear used;
- layouts are followed through Transposes and channels-last kernels (the NHWC QLinearConv), and
  the array is transposed back in numpy.
Anything not found this way is captured from the original graph instead (and said so).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...core.graph import ModelGraph, NodeInfo
from ...core.quantparams import QOP_OUTPUT_PARAMS, QuantSpec, dequantize
from .semantic import FLOAT_TYPES, SemanticGraph, TensorView

Perm = Optional[Tuple[int, ...]]
UNKNOWN: Tuple[int, ...] = (-1,)
"""Layout that could not be followed (a transpose of the model itself applied to a relaid tensor)."""
_TOKEN = re.compile(r"_token_\d+$")
_ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "QLinearAdd",
                          "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QuantizeLinear", "DequantizeLinear",
                          "Cast", "Identity", "Max", "Min", "Sum", "HardSigmoid", "Erf", "Gelu", "FastGelu"})
_CHANNELS_LAST = frozenset({"NhwcMaxPool", "NhwcConv"})
_RENAMED_PREFIXES = ("", "InsertedPrecisionFreeCast_")
"""How onnxruntime renames a tensor it keeps: as is, or (fp16 on CPU, computed in fp32) with this prefix."""


@dataclass(frozen=True)
class OptView:
    """Where an original tensor's value is read in the optimised graph."""

    expose: str
    quant: Optional[QuantSpec] = None
    """Dequantisation, with initializer names of the optimised graph."""
    perm: Perm = None
    """The optimised array is `original.transpose(perm)`; None when the layouts agree."""

    def decode(self, values: np.ndarray, opt: "OptimizedGraph", out: Optional[np.ndarray] = None) -> np.ndarray:
        if self.perm is not None:
            values = values.transpose(np.argsort(self.perm))
        if self.quant is None:
            return values
        return opt.dequantize(values, self.quant, out=out)


class OptimizedGraph:
    """onnxruntime's optimised graph of a model, with the layout and quantisation of its tensors."""

    def __init__(self, graph: ModelGraph, original_nodes: Optional[set] = None,
                 original_tensors: Optional[set] = None) -> None:
        self.graph = graph
        self.original_nodes = set(original_nodes or ())
        self.original_tensors = set(original_tensors or ())
        """The original graph's tensor names: a Transpose writing one from a tensor onnxruntime made is
        the model's own transpose moved (see `_moved_transpose`), not a relayout."""
        self.names = set(graph.producer) | set(graph.input_names)
        self.by_base_name: Dict[str, List[NodeInfo]] = {}
        for node in graph.nodes:
            for key in dict.fromkeys((node.name, _TOKEN.sub("", node.name))):
                self.by_base_name.setdefault(key, []).append(node)
        self._inits = {t.name: t for t in graph.model.graph.initializer}
        self._arrays: Dict[str, Optional[np.ndarray]] = {}
        self.perm: Dict[str, Perm] = {}
        self.quant: Dict[str, QuantSpec] = {}
        self._analyse()

    def array(self, name: str) -> Optional[np.ndarray]:
        if name not in self._arrays:
            from ...core.weights import initializer_array

            tensor = self._inits.get(name)
            self._arrays[name] = initializer_array(self.graph, tensor) if tensor is not None else None
        return self._arrays[name]

    def dequantize(self, values: np.ndarray, spec: QuantSpec, out: Optional[np.ndarray] = None) -> np.ndarray:
        zero = self.array(spec.zero_point) if spec.zero_point else None
        return dequantize(values, self.array(spec.scale), zero, spec.axis, out=out)

    def _analyse(self) -> None:
        for node in self.graph.nodes:
            ins = [t for t in node.inputs]
            data = [t for t in ins if t and t not in self._inits]
            in_perm = self.perm.get(data[0]) if data else None
            if in_perm == UNKNOWN:
                out_perm = UNKNOWN if node.op_type in _ELEMENTWISE or node.op_type == "Transpose" else None
            elif node.op_type == "Transpose" and (node.name in self.original_nodes
                                                  or _TOKEN.sub("", node.name) in self.original_nodes):
                out_perm = None if in_perm is None else UNKNOWN  # the model's own transpose
            elif node.op_type == "Transpose" and in_perm is None and self._moved_transpose(data, node.outputs):
                out_perm = None
            elif node.op_type == "Transpose":
                order = self.graph.node_attribute(node.name, "perm")
                if order is not None:
                    base = in_perm if in_perm is not None else tuple(range(len(order)))  # type: ignore[arg-type]
                    out = tuple(base[i] for i in order)  # type: ignore[union-attr]
                    out_perm: Perm = None if out == tuple(range(len(out))) else out
                else:
                    out_perm = None
            elif self.graph.node_attribute(node.name, "channels_last") == 1 or node.op_type in _CHANNELS_LAST:
                out_perm = (0, 2, 3, 1)
            elif node.op_type in _ELEMENTWISE:
                out_perm = in_perm
            else:
                out_perm = None
            for out in node.outputs:
                if out:
                    self.perm[out] = out_perm
            self._quantisation(node, ins)

    def _moved_transpose(self, data: List[str], outputs: List[str]) -> bool:
        """An inserted Transpose from a tensor onnxruntime made (no original name) to an original tensor:
        the transpose optimiser pushed the model's own Transpose past an op (Llama's rotary embedding:
        MatMul -> Transpose -> Concat becomes MatMul -> Concat 'Concat_1' -> Transpose writing
        'Concat_1_output_0'), so the tensor it writes is the original in the original layout. Taken for
        a relayout and undone, a square [1, 16, 16] read transposed (cosine 0.06 where the truth is 1):
        the declared shapes cannot tell a square tensor's layout (capture.settle_layout)."""
        if not self.original_tensors or not data or not outputs:
            return False
        source_is_original = any(data[0].startswith(p) and data[0][len(p):] in self.original_tensors
                                 for p in _RENAMED_PREFIXES)
        return not source_is_original and outputs[0] in self.original_tensors

    def _quantisation(self, node: NodeInfo, ins: List[str]) -> None:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(ins) >= 2:
            spec = QuantSpec(ins[1], ins[2] if len(ins) > 2 and ins[2] else None,
                             int(self.graph.node_attribute(node.name, "axis", 1)))  # type: ignore[arg-type]
            self.quant.setdefault(node.outputs[0] if node.op_type == "QuantizeLinear" else ins[0], spec)
        elif node.op_type in QOP_OUTPUT_PARAMS and node.outputs:
            s, z = QOP_OUTPUT_PARAMS[node.op_type]
            if len(ins) > s:
                self.quant.setdefault(node.outputs[0], QuantSpec(ins[s], ins[z] if len(ins) > z and ins[z] else None))
        elif node.op_type in ("Transpose", "MaxPool", "NhwcMaxPool", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                              "Identity", "Slice", "Gather") and ins and ins[0] in self.quant:
            self.quant.setdefault(node.outputs[0], self.quant[ins[0]])

    # ---- locating ---------------------------------------------------------------------------------
    def locate(self, original: SemanticGraph, view: TensorView) -> Optional[OptView]:
        """Where `view` (of the original graph) is read in this graph, or None."""
        found = self._locate(original, view)
        return None if found is None or found.perm == UNKNOWN else found

    def _locate(self, original: SemanticGraph, view: TensorView) -> Optional[OptView]:
        if view.quant is None:
            if original.elem_type(view.expose) not in (0, *FLOAT_TYPES):
                return None
            for prefix in _RENAMED_PREFIXES:
                if prefix + view.expose in self.names:
                    return OptView(prefix + view.expose, None, self.perm.get(prefix + view.expose))
            return None
        if view.expose in self.names:
            spec = self.quant.get(view.expose)
            if spec is not None and self._same_scale(original, view.quant.scale, spec.scale):
                return OptView(view.expose, spec, self.perm.get(view.expose))
        return self._by_producer(original, view)

    def _same_scale(self, original: SemanticGraph, scale: str, opt_scale: str) -> bool:
        """The same initializer, or (onnxruntime shares equal constants) one with the same value."""
        if scale == opt_scale:
            return True
        x, y = original.array(scale), self.array(opt_scale)
        return x is not None and y is not None and x.shape == y.shape and bool(np.array_equal(x, y))

    def _by_producer(self, original: SemanticGraph, view: TensorView) -> Optional[OptView]:
        assert view.quant is not None
        q_node = original.graph.producer.get(view.expose)
        if q_node is None or not q_node.inputs:
            return None
        canonical = original.canonical(q_node.inputs[0])
        producer = original.graph.producer.get(canonical)
        names = [producer.name] if producer is not None else []
        names.append(q_node.name)
        for base in names:
            for node in self.by_base_name.get(base, []):
                found = self._quantised_output(original, node, view.quant.scale)
                if found is not None:
                    return OptView(found, self.quant[found], self.perm.get(found))
        return None

    def _quantised_output(self, original: SemanticGraph, node: NodeInfo, scale: str, depth: int = 3) -> Optional[str]:
        """The node's output (or, through up to `depth` single consumers, a later tensor) holding
        integers quantised with the original's `scale`."""
        out = node.outputs[0] if node.outputs else ""
        spec = self.quant.get(out)
        if spec is not None:
            return out if self._same_scale(original, scale, spec.scale) else None
        if depth == 0:
            return None
        consumers = self.graph.consumers.get(out, [])
        if len(consumers) != 1:
            return None
        return self._quantised_output(original, consumers[0], scale, depth - 1)
