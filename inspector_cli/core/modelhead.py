"""The few facts an outputs-only comparison needs from a model file, read from its protobuf wire
format without importing onnx or parsing the graph (issue 16).

`read_model_head` returns the IR version, producer, default-domain opset and graph name (what
`ModelRef` records) and the graph's inputs (initializers excluded) and outputs as `TensorInfo`,
equal to what `ModelGraph.inputs/outputs` give for the same file. Nodes and weights are skipped by
their lengths: the walk touches a few bytes per node. onnxruntime's own view of the model
(`get_inputs()`) is not used for this: it reports a declared-but-shapeless input as a scalar (`[]`)
and fills in types the file leaves undeclared, so samples would be checked and paired differently.

Anything this walk does not handle exactly (protobuf groups, a singular message given twice, which
protobuf merges, text that is not UTF-8, a truncated field, a file that is not a model) makes it
return None: the caller then loads the model the usual way, which reports what is wrong.
"""
from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

from .types import Dim, TensorInfo
from .wire import read_varint

_MASK64 = (1 << 64) - 1


class _Unsupported(Exception):
    """The wire data is something this reader does not interpret exactly."""


@dataclass(frozen=True)
class ModelHead:
    """What `read_model_head` reads: the model's header facts and its graph's inputs and outputs."""

    ir_version: int
    producer_name: str
    producer_version: str
    opset: int
    """The default domain's opset ('' or 'ai.onnx', first import), 0 when absent (as `ModelGraph.opset`)."""
    graph_name: str
    inputs: Tuple[TensorInfo, ...]
    outputs: Tuple[TensorInfo, ...]



def _fields(buf: "bytes | mmap.mmap", start: int, end: int) -> Iterator[Tuple[int, int, int, int]]:
    """(field number, wire type, value, end) of each field in [start, end): for varints the value
    itself, for length-delimited fields the payload's start (`end` is then the payload's end)."""
    pos = start
    while pos < end:
        tag, pos = read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = read_varint(buf, pos, end)
            yield number, wire, value, pos
            continue
        if wire == 2:
            length, value = read_varint(buf, pos, end)
            pos = value + length
        elif wire in (1, 5):
            value, pos = pos, pos + (8 if wire == 1 else 4)
        else:
            raise _Unsupported(f"wire type {wire}")  # groups: deprecated, never written by ONNX tools
        if number == 0 or pos > end:
            raise _Unsupported("truncated or invalid field")
        yield number, wire, value, pos


def _int64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF  # protobuf keeps the low 32 bits of an int32 varint
    return value - (1 << 32) if value >> 31 else value


def _text(buf: "bytes | mmap.mmap", start: int, end: int) -> str:
    try:
        return bytes(buf[start:end]).decode("utf-8")
    except UnicodeDecodeError:
        raise _Unsupported("text that is not UTF-8") from None


def _expect(wire: int, want: int) -> None:
    if wire != want:  # protobuf would keep it as an unknown field: not worth interpreting here
        raise _Unsupported("unexpected wire type")


def _dimension(buf: "bytes | mmap.mmap", start: int, end: int) -> Dim:
    """One dimension as `protoutil._dims` reads it: the value, a non-empty name, else None
    (dim_value and dim_param are a oneof: the last one given wins)."""
    dim: Dim = None
    for number, wire, value, stop in _fields(buf, start, end):
        if number == 1:
            _expect(wire, 0)
            dim = _int64(value)
        elif number == 2:
            _expect(wire, 2)
            dim = _text(buf, value, stop) or None
    return dim


def _tensor_type(buf: "bytes | mmap.mmap", start: int, end: int) -> Tuple[int, Optional[Tuple[Dim, ...]]]:
    elem_type, shape_at = 0, None
    for number, wire, value, stop in _fields(buf, start, end):
        if number == 1:
            _expect(wire, 0)
            elem_type = _int32(value)
        elif number == 2:
            _expect(wire, 2)
            if shape_at is not None:
                raise _Unsupported("shape given twice (protobuf merges them)")
            shape_at = (value, stop)
    if shape_at is None:
        return elem_type, None
    dims: List[Dim] = []
    for number, wire, value, stop in _fields(buf, *shape_at):
        if number == 1:
            _expect(wire, 2)
            dims.append(_dimension(buf, value, stop))
    return elem_type, tuple(dims)


_TYPE_ONEOF = {1, 4, 5, 7, 8, 9}
"""TypeProto's `value` oneof: tensor, sequence, map, opaque, sparse tensor, optional."""
_KINDS = {4: "sequence", 5: "map", 7: "opaque", 8: "sparse_tensor", 9: "optional"}
"""`TensorInfo.kind` of each, as `protoutil.value_info_to_tensor` names them."""


def _value_info(buf: "bytes | mmap.mmap", start: int, end: int) -> TensorInfo:
    """`protoutil.value_info_to_tensor` of one ValueInfoProto."""
    name, type_at = "", None
    for number, wire, value, stop in _fields(buf, start, end):
        if number == 1:
            _expect(wire, 2)
            name = _text(buf, value, stop)
        elif number == 2:
            _expect(wire, 2)
            if type_at is not None:
                raise _Unsupported("type given twice")
            type_at = (value, stop)
    if type_at is None:
        return TensorInfo(name)
    chosen, tensor_at = 0, None
    for number, wire, value, stop in _fields(buf, *type_at):
        if number in _TYPE_ONEOF:
            _expect(wire, 2)
            chosen = number
            if number == 1:
                if tensor_at is not None:
                    raise _Unsupported("tensor type given twice")
                tensor_at = (value, stop)
    if chosen != 1 or tensor_at is None:  # not a tensor (sequence, map, ...): no element type, no shape
        return TensorInfo(name, kind=_KINDS.get(chosen, "tensor"))
    elem_type, shape = _tensor_type(buf, *tensor_at)
    return TensorInfo(name, elem_type, shape)


_WALK_LIMIT = 64
"""Fields of one initializer walked in Python before `_initializer_names` falls back to a C-level find."""


class _LongTensor(Exception):
    """An initializer with more than `_WALK_LIMIT` fields (weights stored unpacked, one field each)."""


def _initializer_name(buf: "bytes | mmap.mmap", start: int, end: int, limit: int = 0) -> str:
    """TensorProto.name (field 8; the last one given wins, as protobuf reads it). With `limit`, raise
    `_LongTensor` after that many fields instead of walking on."""
    name = ""
    for count, (number, wire, value, stop) in enumerate(_fields(buf, start, end), 1):
        if number == 8:
            _expect(wire, 2)
            name = _text(buf, value, stop)
        if count == limit:
            raise _LongTensor
    return name


def _initializer_names(buf: "bytes | mmap.mmap", at: List[Tuple[int, int]], wanted: List[bytes]) -> Set[str]:
    """The names among the initializers at `at` that may equal a graph input's name. An initializer is
    a handful of fields (dims, type, name, raw_data, skipped by its length): walking them reads a few
    bytes, where searching the range for the names would read every weight byte (100 MB for
    ResNet-50). Weights stored unpacked (one field per value) would make the walk long: those ranges
    are searched for the wanted names first, and walked only when one occurs."""
    names: Set[str] = set()
    for start, end in at:
        try:
            names.add(_initializer_name(buf, start, end, _WALK_LIMIT))
        except _LongTensor:
            if any(buf.find(w, start, end) >= 0 for w in wanted):
                names.add(_initializer_name(buf, start, end))
    return names


def _graph(buf: "bytes | mmap.mmap", start: int, end: int) -> Tuple[str, List[TensorInfo], List[TensorInfo]]:
    name = ""
    initializer_at: List[Tuple[int, int]] = []
    inputs: List[TensorInfo] = []
    outputs: List[TensorInfo] = []
    for number, wire, value, stop in _fields(buf, start, end):
        if number == 2:
            _expect(wire, 2)
            name = _text(buf, value, stop)
        elif number == 5:
            _expect(wire, 2)
            initializer_at.append((value, stop))
        elif number in (11, 12):
            _expect(wire, 2)
            (inputs if number == 11 else outputs).append(_value_info(buf, value, stop))
    wanted = [t.name.encode("utf-8") for t in inputs]  # b"" (an unnamed input) is found in every range
    initializers = _initializer_names(buf, initializer_at, wanted) if inputs else set()
    return name, [t for t in inputs if t.name not in initializers], outputs


def _opset(buf: "bytes | mmap.mmap", start: int, end: int) -> Tuple[str, int]:
    domain, version = "", 0
    for number, wire, value, stop in _fields(buf, start, end):
        if number == 1:
            _expect(wire, 2)
            domain = _text(buf, value, stop)
        elif number == 2:
            _expect(wire, 0)
            version = _int64(value)
    return domain, version


def _model(buf: "bytes | mmap.mmap") -> Optional[ModelHead]:
    texts: Dict[int, str] = {2: "", 3: ""}
    ir_version, graph_at = 0, None
    opsets: List[Tuple[str, int]] = []
    for number, wire, value, stop in _fields(buf, 0, len(buf)):
        if number == 1:
            _expect(wire, 0)
            ir_version = _int64(value)
        elif number in texts:
            _expect(wire, 2)
            texts[number] = _text(buf, value, stop)
        elif number == 7:
            _expect(wire, 2)
            if graph_at is not None:
                raise _Unsupported("graph given twice")
            graph_at = (value, stop)
        elif number == 8:
            _expect(wire, 2)
            opsets.append(_opset(buf, value, stop))
    if ir_version <= 0 or graph_at is None or not opsets:
        return None  # not a usable model: the usual loader says why
    graph_name, inputs, outputs = _graph(buf, *graph_at)
    opset = next((version for domain, version in opsets if domain in ("", "ai.onnx")), 0)
    return ModelHead(ir_version, texts[2], texts[3], opset, graph_name, tuple(inputs), tuple(outputs))


def read_model_head(path: "str | Path") -> Optional[ModelHead]:
    """The header facts and graph inputs/outputs of the model file at `path`, or None when the file
    cannot be read this way (see the module doc): the caller then loads it as usual."""
    try:
        with open(path, "rb") as handle:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _model(buf)
    except (OSError, ValueError, EOFError, _Unsupported):  # mmap of an empty file raises ValueError
        return None
