"""Loading a model without copying its weights: large initializers become references into the file.

A 100 MB model parsed by protobuf costs 0.2 s and 100 MB of memory in Python, and every session
made from a modified copy (extra outputs) serialises those 100 MB again and onnxruntime parses
them once more. The weights of an `.onnx` file are stored verbatim (`raw_data` bytes), so they
can stay where they are: this loader walks the protobuf wire format, keeps every field except
the `raw_data` of large initializers, and turns those into ONNX external-data references (the
model file itself, at the byte offset of the data). The result is an ordinary ModelProto that
onnxruntime loads with `session.model_external_initializers_file_folder_path` (as for any model
with external data) and that `onnx.external_data_helper` reads tensor by tensor.

Only the ModelProto -> GraphProto -> TensorProto path is walked; everything else is copied as is.
"""
from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import onnx

from .filehash import prefetch as prefetch_sha256
from .graph import ModelGraph, check_external_data, load_model, rebase_symlinked_data
from .protoutil import external_tensors, read_varint

MIN_EXTERNAL_BYTES = 4096
"""Initializers smaller than this stay inline (scales, zero points and shapes are read often)."""
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _fields(buf: "mmap.mmap | bytes", start: int, end: int) -> List[Tuple[int, int, int, int, int]]:
    """(field number, wire type, field start, payload start, field end) of every field in [start, end)."""
    fields = []
    pos = start
    while pos < end:
        begin = pos
        tag, pos = read_varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = read_varint(buf, pos)
            payload = pos
        elif wire == 1:
            payload, pos = pos, pos + 8
        elif wire == 5:
            payload, pos = pos, pos + 4
        elif wire == 2:
            length, payload = read_varint(buf, pos)
            pos = payload + length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        fields.append((number, wire, begin, payload, pos))
    return fields


def _field(number: int, payload: bytes) -> bytes:
    return _encode_varint((number << 3) | 2) + _encode_varint(len(payload)) + payload


def _external_entry(key: str, value: str) -> bytes:
    return _field(_TENSOR_EXTERNAL_DATA, _field(1, key.encode()) + _field(2, value.encode()))


def _next_field(buf: "mmap.mmap | bytes", pos: int) -> Tuple[int, int, int, int]:
    """(field number, wire type, payload start, field end) of the field at `pos`. Tags and lengths
    under 128 (nearly all of them) are read inline: this runs for every node and initializer."""
    tag = buf[pos]
    pos += 1
    if tag & 0x80:
        tag, pos = read_varint(buf, pos - 1)
    wire = tag & 7
    if wire == 2:
        length = buf[pos]
        pos += 1
        if length & 0x80:
            length, pos = read_varint(buf, pos - 1)
        return tag >> 3, wire, pos, pos + length
    if wire == 0:
        _, end = read_varint(buf, pos)
        return tag >> 3, wire, pos, end
    if wire == 1:
        return tag >> 3, wire, pos, pos + 8
    if wire == 5:
        return tag >> 3, wire, pos, pos + 4
    raise ValueError(f"unsupported protobuf wire type {wire}")


def _tensor(buf: "mmap.mmap | bytes", start: int, end: int, location: str) -> Optional[bytes]:
    """The TensorProto in [start, end) with its large raw_data turned into a reference; None when
    it has none (the caller then copies the original bytes)."""
    moved: List[Tuple[int, int, int]] = []  # (field start, payload start, field end); protobuf's last wins
    pos = start
    while pos < end:
        number, _wire, payload, stop = _next_field(buf, pos)
        if number == _TENSOR_RAW_DATA and stop - payload >= MIN_EXTERNAL_BYTES:
            moved.append((pos, payload, stop))
        pos = stop
    if not moved:
        return None
    out = bytearray()
    kept = start
    for begin, _payload, stop in moved:
        out += buf[kept:begin]
        kept = stop
    out += buf[kept:end]
    _begin, payload, stop = moved[-1]
    out += _external_entry("location", location) + _external_entry("offset", str(payload))
    out += _external_entry("length", str(stop - payload))
    out += _encode_varint(_TENSOR_DATA_LOCATION << 3) + _encode_varint(onnx.TensorProto.EXTERNAL)
    return bytes(out)


def _graph(buf: "mmap.mmap | bytes", start: int, end: int, location: str) -> bytes:
    """The GraphProto in [start, end) with large initializers rewritten; unchanged runs of fields
    (the nodes, small initializers) are copied as one slice each."""
    out = bytearray()
    run = pos = start
    while pos < end:
        number, wire, payload, stop = _next_field(buf, pos)
        if number == _GRAPH_INITIALIZER and wire == 2:
            tensor = _tensor(buf, payload, stop, location)
            if tensor is not None:
                out += buf[run:pos]
                out += _field(_GRAPH_INITIALIZER, tensor)
                run = stop
        pos = stop
    out += buf[run:end]
    return bytes(out)


def stripped_model_bytes(path: Path) -> bytes:
    """The model's bytes with large inline initializers turned into references into `path`."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        out = bytearray()
        for number, wire, begin, payload, stop in _fields(buf, 0, len(buf)):
            if number == _MODEL_GRAPH and wire == 2:
                out += _field(_MODEL_GRAPH, _graph(buf, payload, stop, path.name))
            else:
                out += buf[begin:stop]
        return bytes(out)


def load_model_lazy(path: "str | os.PathLike[str]") -> ModelGraph:
    """Like `graph.load_model`, but large weights stay in the file (see the module doc).

    Falls back to the ordinary loader for files the wire walk cannot handle.
    """
    model_path = Path(path)
    if not model_path.is_file() or model_path.stat().st_size < (1 << 20):
        return load_model(model_path)  # small models: nothing to gain; the ordinary checks apply
    prefetch_sha256(model_path)  # for the result's ModelRef, on the idle core meanwhile
    try:
        data = stripped_model_bytes(model_path)
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception:  # malformed wire data of any kind: the ordinary loader reports it properly
        return load_model(model_path)
    if model.ir_version <= 0 or not model.HasField("graph") or not model.opset_import:
        return load_model(model_path)
    stored = external_tensors(model.graph)  # one pass for both the guard and the rebase
    check_external_data(model, model_path, stored)
    graph = ModelGraph.from_proto(model, model_path)
    graph.data_folder = rebase_symlinked_data(model, model_path, stored)
    return graph


# ---- models that stand alone -------------------------------------------------------------------
# The lazy loader's references point into the SOURCE file (location = its name, offset = where the
# bytes sit in it). A copy that is patched, saved or handed to onnxruntime as bytes must not keep
# them: onnxruntime resolves the locations of a model loaded from bytes against the working folder
# (or refuses them), and a file written elsewhere would point into a file it does not own.

EMBED_LIMIT = (2 << 30) - (64 << 20)
"""Protobuf's 2 GiB ceiling, less headroom for the graph itself: beyond it weights go beside the file."""


def standalone_model(model: onnx.ModelProto, folder: "Optional[os.PathLike[str] | str]") -> onnx.ModelProto:
    """A copy of `model` with every external-data tensor read in from `folder` (where its locations
    are relative to: `ModelGraph.folder`). The copy has no reference to any file, so it can be
    serialised, patched, run from bytes or saved anywhere. The model itself is left untouched.
    Locations were checked to stay inside `folder` when the model was loaded (core/external_data)."""
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    from .protoutil import iter_subgraphs

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graphs = [copy.graph, *iter_subgraphs(copy.graph)]
    if not any(uses_external_data(t) for g in graphs for t in g.initializer):
        return copy
    if folder is None:
        raise ValueError("the model has external data but no folder to read it from")
    load_external_data_for_model(copy, str(folder))
    return copy


def standalone_graph_model(graph: ModelGraph) -> onnx.ModelProto:
    """`standalone_model` of a loaded graph (lazy or not), its weights read from its own folder."""
    return standalone_model(graph.model, graph.folder.resolve() if graph.folder is not None else None)


def save_standalone(model: onnx.ModelProto, path: "os.PathLike[str] | str",
                    inputs: "Sequence[os.PathLike[str] | str]" = ()) -> Path:
    """Write `model` to `path` so that it stands alone: weights embedded, or (past `EMBED_LIMIT`)
    in `<name>.data` beside it under its own name; never a reference into another file. Written
    atomically (a temporary folder beside the target, then renamed), and refused (UsageError) when
    `path` is one of `inputs` (the models it was made from: writing over one would corrupt it)."""
    import shutil
    import tempfile

    from ..errors import UsageError

    target = Path(path)
    resolved = target.resolve()
    for source in inputs:
        if Path(source).resolve() == resolved:
            raise UsageError(f"--write-model {target}: that is an input model; writing over it would destroy it",
                             hint="give another file name")
    from onnx.external_data_helper import uses_external_data

    from .protoutil import iter_subgraphs

    if any(uses_external_data(t) for g in [model.graph, *iter_subgraphs(model.graph)] for t in g.initializer):
        raise ValueError("save_standalone: the model still references external data (use standalone_model first)")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        data_name = f"{target.name}.data"
        if model.ByteSize() < EMBED_LIMIT:
            (scratch / target.name).write_bytes(model.SerializeToString())
            written = [target.name]
        else:
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            onnx.save_model(copy, str(scratch / target.name), save_as_external_data=True,
                            all_tensors_to_one_file=True, location=data_name, size_threshold=1024)
            written = [data_name, target.name]  # the data first: the model never names a missing file
        for name in written:
            os.replace(scratch / name, target.parent / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
