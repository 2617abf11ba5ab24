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

import hashlib
import mmap
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Set, Tuple

import onnx

from ...core.graph import ModelGraph
from ...core.lazyload import MIN_EXTERNAL_BYTES

FULL_HASH_BYTES = MIN_EXTERNAL_BYTES
"""Constants up to this size are hashed whole; larger ones by dims and a strided sample, whether they are
in memory or left in the file by the lazy loader (the same token either way)."""
_SAMPLES = 256
_SAMPLE_BYTES = 16
_COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal"})


class Signatures:
    """Signature of every tensor of a graph (top level), and which of them are inexact."""

    def __init__(self, graph: ModelGraph, input_tokens: Mapping[str, str]) -> None:
        self.of: Dict[str, str] = {}
        self.inexact: Set[str] = set()
        self._folder = graph.folder
        self._files: Dict[str, Optional[mmap.mmap]] = {}
        scope: Dict[str, str] = {}
        for name in graph.input_names:
            scope[name] = _h("input", input_tokens.get(name, "unpaired:" + name))
        self._constants(graph.model.graph.initializer, scope)
        for node in graph.nodes:
            self._node(graph.node_proto(node.name), scope)
        self.of = scope
        for mapped in self._files.values():
            if mapped is not None:
                mapped.close()
        self._files.clear()

    def _constants(self, tensors: Iterable[onnx.TensorProto], scope: Dict[str, str]) -> None:
        for tensor in tensors:
            token, exact = self._digest(tensor)
            scope[tensor.name] = token
            if not exact:
                self.inexact.add(token)

    def _node(self, node: onnx.NodeProto, scope: Dict[str, str]) -> None:
        ins = [scope.get(t, _h("unknown", t)) if t else "-" for t in node.input]
        inexact = any(t in self.inexact for t in ins)
        if node.op_type in _COMMUTATIVE and node.domain in ("", "ai.onnx"):
            ins = sorted(ins)
        attrs = []
        for attr in sorted(node.attribute, key=lambda a: a.name):
            value, exact = self._attribute(attr, scope)
            attrs.append(f"{attr.name}={value}")
            inexact = inexact or not exact
        base = _h(node.op_type, node.domain, *attrs, "|", *ins)
        for index, out in enumerate(node.output):
            if out:
                token = _h(base, str(index))
                scope[out] = token
                if inexact:
                    self.inexact.add(token)

    def _attribute(self, attr: onnx.AttributeProto, scope: Dict[str, str]) -> Tuple[str, bool]:
        if attr.type == onnx.AttributeProto.GRAPH:
            return self._subgraph(attr.g, scope)
        if attr.type == onnx.AttributeProto.GRAPHS:
            parts = [self._subgraph(g, scope) for g in attr.graphs]
            return _h(*(p for p, _ in parts)), all(e for _, e in parts)
        if attr.type == onnx.AttributeProto.TENSOR:
            return self._digest(attr.t)
        if attr.type == onnx.AttributeProto.TENSORS:
            parts = [self._digest(t) for t in attr.tensors]
            return _h(*(p for p, _ in parts)), all(e for _, e in parts)
        return repr(onnx.helper.get_attribute_value(attr)), True

    def _subgraph(self, graph: onnx.GraphProto, outer: Dict[str, str]) -> Tuple[str, bool]:
        """The body's signature: its inputs by position, outer-scope reads by their signatures."""
        scope = dict(outer)
        for index, value in enumerate(graph.input):
            scope[value.name] = _h("body-input", str(index))
        self._constants(graph.initializer, scope)
        for node in graph.node:
            self._node(node, scope)
        outs = [scope.get(v.name, _h("unknown", v.name)) for v in graph.output]
        return _h("body", *outs), not any(t in self.inexact for t in outs)


    def _digest(self, tensor: onnx.TensorProto) -> Tuple[str, bool]:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            return tensor_digest(tensor)
        # Large weights stay in the file (lazyload.py, external data): a strided sample of their bytes
        # tells different weights of one shape apart (the K and V projections) without reading them all.
        head = (str(tensor.data_type), ",".join(map(str, tensor.dims)))
        info = {e.key: e.value for e in tensor.external_data}
        mapped = self._file(info.get("location", ""))
        offset, length = int(info.get("offset", 0) or 0), int(info.get("length", 0) or 0)
        if mapped is None or not length or offset + length > len(mapped):
            return _h("external", *head), False
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


def tensor_digest(tensor: onnx.TensorProto) -> Tuple[str, bool]:
    """(hash of an in-memory constant's type, shape and content, whether the content was hashed whole)."""
    head = (str(tensor.data_type), ",".join(map(str, tensor.dims)))
    raw = tensor.raw_data
    if not raw:
        raw = onnx.numpy_helper.to_array(tensor).tobytes() if _typed_size(tensor) else b""
    if len(raw) < FULL_HASH_BYTES:
        return _h("const", *head, hashlib.blake2b(raw, digest_size=16).hexdigest()), True
    return _sampled(head, raw, 0, len(raw)), False


def _sampled(head: Tuple[str, str], buf: "bytes | mmap.mmap", offset: int, length: int) -> str:
    """Hash of `_SAMPLES` strided slices of buf[offset:offset+length] (the same for in-memory and
    file-backed copies of one tensor)."""
    step = max(1, length // _SAMPLES)
    parts = [bytes(buf[offset + i:offset + min(i + _SAMPLE_BYTES, length)]) for i in range(0, length, step)][:_SAMPLES]
    return _h("const~", *head, str(length), hashlib.blake2b(b"".join(parts), digest_size=16).hexdigest())


def _typed_size(tensor: onnx.TensorProto) -> int:
    return (len(tensor.float_data) + len(tensor.int32_data) + len(tensor.int64_data) + len(tensor.double_data)
            + len(tensor.uint64_data) + len(tensor.string_data))


def _h(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=12).hexdigest()
