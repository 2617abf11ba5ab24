"""Computation signatures: a hash of everything a tensor's value depends on, names left out.

A re-export by another tool renames every node and tensor but computes the same thing. Structural
pairing follows data inputs, so it cannot start at a chain that reads none: an attention mask
built from `Shape`/`Gather` chains and boolean ops, a causal mask, an `If` choosing a branch on a
flag. Everything downstream of such a chain then stays unpaired (BERT renamed: 17 of 72 layers).

The signature of a tensor hashes the op type, domain and attributes of its producer (subgraphs of
`If`/`Loop`/`Scan` included, outer-scope reads resolved to their signatures), the signatures of its
inputs and its output index. Graph inputs are tokens shared by the paired inputs of both models;
constants (initializers, `Constant`) are hashed by type, shape and content. Two tensors with equal
signatures are the same computation on the same inputs: the same value, up to the precision of the
arithmetic. Content of large or external constants is sampled, not hashed whole: such signatures
are `inexact` (they still tell different weights apart, but are not proof of equality).
"""
from __future__ import annotations

import mmap
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import onnx

from ...core.graph import ModelGraph
from ...core.lazyload import MIN_EXTERNAL_BYTES

FULL_HASH_BYTES = MIN_EXTERNAL_BYTES
"""Constants up to this size are hashed whole; larger ones by dims and a strided sample, whether they are
in memory or left in the file by the lazy loader (the same token either way)."""
_SAMPLES = 4096
_COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal"})


class Signatures:
    """Signature of every tensor of a graph (top level), and which of them are inexact.

    Tokens are Python hashes of tuples: compared only within one process (both graphs of a comparison),
    and some 30x cheaper than a cryptographic digest per node (20k-node graphs)."""

    def __init__(self, graph: ModelGraph, input_tokens: Mapping[str, str]) -> None:
        self.inexact: Set[int] = set()
        self._folder = graph.folder
        self._files: Dict[str, Optional[mmap.mmap]] = {}
        scope: Dict[str, int] = {}
        for name in graph.input_names:
            scope[name] = hash(("input", input_tokens.get(name, "unpaired:" + name)))
        self._constants(graph.model.graph.initializer, scope)
        node_proto = graph.node_proto  # the graph's own name -> proto index, shared with node_attribute
        for node in graph.nodes:
            self._node(node.op_type, node.domain, node.inputs, node.outputs, node_proto(node.name).attribute, scope)
        self.of: Dict[str, int] = scope
        for mapped in self._files.values():
            if mapped is not None:
                mapped.close()
        self._files.clear()

    def _constants(self, tensors: Iterable[onnx.TensorProto], scope: Dict[str, int]) -> None:
        for tensor in tensors:
            token, exact = self._digest(tensor)
            scope[tensor.name] = token
            if not exact:
                self.inexact.add(token)

    def _node(self, op_type: str, domain: str, inputs: Sequence[str], outputs: Sequence[str],
              attributes: Sequence[onnx.AttributeProto], scope: Dict[str, int]) -> None:
        get = scope.get
        ins = tuple([get(t) or hash(("unknown", t)) if t else 0 for t in inputs])
        inexact = bool(self.inexact) and not self.inexact.isdisjoint(ins)
        if op_type in _COMMUTATIVE and domain in ("", "ai.onnx"):
            ins = tuple(sorted(ins))
        attrs: Tuple[object, ...] = ()
        if attributes:
            parts = []
            for attr in sorted(attributes, key=lambda a: a.name):
                value, exact = self._attribute(attr, scope)
                parts.append((attr.name, value))
                inexact = inexact or not exact
            attrs = tuple(parts)
        base = hash((op_type, domain, attrs, ins))
        for index, out in enumerate(outputs):
            if out:
                token = hash((base, index))
                scope[out] = token
                if inexact:
                    self.inexact.add(token)

    def _attribute(self, attr: onnx.AttributeProto, scope: Dict[str, int]) -> Tuple[object, bool]:
        if attr.type == onnx.AttributeProto.GRAPH:
            return self._subgraph(attr.g, scope)
        if attr.type == onnx.AttributeProto.GRAPHS:
            parts = [self._subgraph(g, scope) for g in attr.graphs]
            return tuple(p for p, _ in parts), all(e for _, e in parts)
        if attr.type == onnx.AttributeProto.TENSOR:
            return self._digest(attr.t)
        if attr.type == onnx.AttributeProto.TENSORS:
            parts = [self._digest(t) for t in attr.tensors]
            return tuple(p for p, _ in parts), all(e for _, e in parts)
        return attr.SerializeToString(), True  # ints, floats, strings and their lists, name included

    def _subgraph(self, graph: onnx.GraphProto, outer: Dict[str, int]) -> Tuple[int, bool]:
        """The body's signature: its inputs by position, outer-scope reads by their signatures."""
        scope = dict(outer)
        for index, value in enumerate(graph.input):
            scope[value.name] = hash(("body-input", index))
        self._constants(graph.initializer, scope)
        for node in graph.node:
            self._node(node.op_type, node.domain, node.input, node.output, node.attribute, scope)
        outs = tuple(scope.get(v.name) or hash(("unknown", v.name)) for v in graph.output)
        return hash(("body", outs)), not any(t in self.inexact for t in outs)

    def _digest(self, tensor: onnx.TensorProto) -> Tuple[int, bool]:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            return tensor_digest(tensor)
        # Large weights stay in the file (lazyload.py, external data): a strided sample of their bytes
        # tells different weights of one shape apart (the K and V projections) without reading them all.
        head = (tensor.data_type, tuple(tensor.dims))
        info = {e.key: e.value for e in tensor.external_data}
        mapped = self._file(info.get("location", ""))
        offset, length = int(info.get("offset", 0) or 0), int(info.get("length", 0) or 0)
        if mapped is None or not length or offset + length > len(mapped):
            return hash(("external", head)), False
        return _sampled(head, mapped, offset, length), False

    def _file(self, location: str) -> Optional[mmap.mmap]:
        if location not in self._files:
            self._files[location] = None
            if self._folder is not None and location:
                try:
                    with open(Path(self._folder) / location, "rb") as f:
                        self._files[location] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    pass  # unreadable: shape only
        return self._files[location]


def tensor_digest(tensor: onnx.TensorProto) -> Tuple[int, bool]:
    """(hash of an in-memory constant's type, shape and content, whether the content was hashed whole)."""
    head = (tensor.data_type, tuple(tensor.dims))
    raw = tensor.raw_data
    if not raw:
        raw = onnx.numpy_helper.to_array(tensor).tobytes() if _typed_size(tensor) else b""
    if len(raw) < FULL_HASH_BYTES:
        return hash(("const", head, raw)), True
    return _sampled(head, raw, 0, len(raw)), False


def _sampled(head: Tuple[int, Tuple[int, ...]], buf: "bytes | mmap.mmap", offset: int, length: int) -> int:
    """Hash of `_SAMPLES` bytes at an even stride through buf[offset:offset+length] (the same for in-memory
    and file-backed copies of one tensor)."""
    view = np.frombuffer(buf, dtype=np.uint8, count=length, offset=offset)
    sample = view[::max(1, length // _SAMPLES)][:_SAMPLES].tobytes()
    del view  # an mmap cannot close while a numpy view exports it
    return hash(("const~", head, length, sample))


def _typed_size(tensor: onnx.TensorProto) -> int:
    return (len(tensor.float_data) + len(tensor.int32_data) + len(tensor.int64_data) + len(tensor.double_data)
            + len(tensor.uint64_data) + len(tensor.string_data))
