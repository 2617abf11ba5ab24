"""MI1xx: the file itself. A file that is not a loadable model is a finding (exit 1), never a crash.

When parsing fails, the file is diagnosed: empty, text (Git LFS pointers, HTML, JSON), truncated
(found by walking the top-level protobuf fields: one declares more bytes than the file holds), or
simply not a protobuf.
"""
from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import onnx

from ..core.external_data import MALFORMED, MISSING, OUTSIDE, external_data_defects
from ..core.graph import parse_model_file
from ..core.protoutil import iter_subgraphs, read_varint
from ..errors import ModelLoadError
from .context import Reporter

# ModelProto field numbers -> names (onnx.proto); a file starting with anything else is not ONNX.
_MODEL_FIELDS = {1: "ir_version", 2: "producer_name", 3: "producer_version", 4: "domain", 5: "model_version",
                 6: "doc_string", 7: "graph", 8: "opset_import", 14: "metadata_props", 20: "training_info",
                 25: "functions", 26: "configuration"}
_WIRE_TYPES = {0: "varint", 1: "fixed64", 2: "bytes", 5: "fixed32"}


@dataclass
class Loaded:
    """A parsed model and what loading learnt about it."""

    model: onnx.ModelProto
    weights_readable: bool = True
    runtime_ok: bool = True
    """False when the IR version rules out the checker and onnxruntime."""


def load_checked(path: Path, reporter: Reporter) -> Optional[Loaded]:
    """Parse `path`, reporting every loading defect; None when nothing further can be checked."""
    size = path.stat().st_size
    if size == 0:
        reporter.report("MI101", f"{path.name} is empty (0 bytes)")
        return None
    try:
        model = parse_model_file(path)
    except ModelLoadError as exc:
        _diagnose(path, size, exc, reporter)
        return None
    corrupt = _invalid_text(model)
    if corrupt:
        reporter.report("MI102", f"{path.name} is corrupt: {corrupt} is not valid UTF-8", size_bytes=size)
        return None
    loaded = Loaded(model)
    if model.ir_version > onnx.IR_VERSION:
        reporter.report("MI105", f"IR version {model.ir_version} is newer than this onnx supports ({onnx.IR_VERSION})",
                        ir_version=model.ir_version, supported=onnx.IR_VERSION)
        loaded.runtime_ok = False
    else:
        needed = _min_ir_version(model)
        if needed and model.ir_version < needed:
            reporter.report("MI106", f"IR version {model.ir_version} is older than opset {_default_opset(model)} "
                                     f"requires (IR >= {needed})", hint=f"set model.ir_version = {needed}",
                            ir_version=model.ir_version, required=needed)
    for tensor, kind, problem in external_data_defects(model, path):
        reporter.report(EXTERNAL_DATA_RULES[kind], f"tensor '{tensor}': {problem}", tensor=tensor)
        loaded.weights_readable = False
    return loaded


EXTERNAL_DATA_RULES = {MISSING: "MI108", OUTSIDE: "MI109", MALFORMED: "MI110"}


def _invalid_text(model: onnx.ModelProto) -> Optional[str]:
    """The first name field that is not valid UTF-8 (byte corruption), or None.

    The protobuf runtime hands such a field back as `bytes` (or raises on access), so a flipped byte
    in a name would otherwise surface as an exception deep inside a rule or inside onnxruntime.
    """
    if _all_text(model):
        return None

    def bad(*values: object) -> bool:
        return any(isinstance(v, bytes) or (isinstance(v, list) and any(isinstance(x, bytes) for x in v))
                   for v in values)

    where = "the model header"
    try:
        if bad(model.producer_name, model.producer_version, model.domain, [i.domain for i in model.opset_import]):
            return f"a name in {where}"
        for graph in (model.graph, *iter_subgraphs(model.graph)):
            for index, node in enumerate(graph.node):
                where = f"node #{index} of graph '{graph.name!s}'"
                if bad(node.name, node.op_type, node.domain, list(node.input), list(node.output),
                       [a.name for a in node.attribute]):
                    return f"a name in {where}"
            for kind, items in (("initializer", graph.initializer), ("input", graph.input),
                                ("output", graph.output), ("value_info", graph.value_info)):
                for index, item in enumerate(items):
                    where = f"{kind} #{index} of graph '{graph.name!s}'"
                    if bad(item.name):
                        return f"the name of {where}"
    except UnicodeDecodeError:
        return f"a name in {where}"
    return None


def _all_text(model: onnx.ModelProto) -> bool:
    """True when every name `_invalid_text` checks is `str`: one C-level join per field kind raises
    TypeError on the first `bytes` (the per-name scan cost ~1 s at 50,000 nodes); the scan then names it."""
    try:
        "".join([model.producer_name, model.producer_version, model.domain, *(i.domain for i in model.opset_import)])
        for graph in (model.graph, *iter_subgraphs(model.graph)):
            nodes = graph.node
            "".join([n.name for n in nodes] + [n.op_type for n in nodes] + [n.domain for n in nodes])
            "".join([t for n in nodes for t in n.input[:]] + [t for n in nodes for t in n.output[:]])
            "".join([a.name for n in nodes if n.attribute for a in n.attribute])
            "".join([item.name for items in (graph.initializer, graph.input, graph.output, graph.value_info)
                     for item in items])
    except (TypeError, UnicodeDecodeError):
        return False
    return True


def _default_opset(model: onnx.ModelProto) -> int:
    return next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), 0)


def _min_ir_version(model: onnx.ModelProto) -> int:
    """Minimum IR version for the default-domain opset (other domains' tables are too loosely followed:
    onnxruntime's own quantiser stamps ai.onnx.ml 5 on IR 8 models, and runtimes accept that)."""
    opset = _default_opset(model)
    if not opset:
        return 0
    try:
        return int(onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)], ignore_unknown=True))
    except (ValueError, KeyError, TypeError):
        return 0


def _diagnose(path: Path, size: int, exc: ModelLoadError, reporter: Reporter) -> None:
    with open(path, "rb") as handle:
        head = handle.read(512)
    text = _text_preview(head)
    if text is not None:
        lfs = head.startswith(b"version https://git-lfs")
        reporter.report("MI103", f"{path.name} is a text file ({size} bytes) starting with \"{text}\"",
                        hint="a Git LFS pointer: run 'git lfs pull'" if lfs else None, size_bytes=size)
        return
    state, detail = walk_fields(path, size)
    if state == "truncated":
        reporter.report("MI104", f"{path.name} is truncated: {detail}", size_bytes=size)
        return
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # any decode failure: the message from parse_model_file says which
        reason = exc.message.split(": ", 1)[-1]
        reporter.report("MI102", f"{path.name}: {reason}", hint=None if state == "ok" else detail, size_bytes=size)
        return
    corrupt = _invalid_text(model)
    if corrupt:  # parse_model_file refuses names that are not UTF-8; say which, as MI102
        reporter.report("MI102", f"{path.name} is corrupt: {corrupt} is not valid UTF-8", size_bytes=size)
    elif not model.HasField("graph") and not model.opset_import and model.ir_version <= 0:
        reporter.report("MI102", f"{path.name} decodes as a protobuf but has none of an ONNX model's fields "
                                 "(no ir_version, graph or opset_import)", size_bytes=size)
    elif model.ir_version <= 0:
        reporter.report("MI105", f"ir_version is {model.ir_version} (not set): the model does not say which "
                                 "ONNX IR it follows", ir_version=model.ir_version)
    else:
        missing = " and ".join(m for m, ok in (("graph", model.HasField("graph")),
                                               ("opset_import", bool(model.opset_import))) if not ok)
        reporter.report("MI107", f"{path.name} parsed but has no {missing}", size_bytes=size)


def _text_preview(head: bytes) -> Optional[str]:
    """The first line, escaped and cut, when the bytes look like text; None for binary data."""
    if not head or b"\x00" in head:
        return None
    try:
        decoded = head.decode("utf-8")
    except UnicodeDecodeError:
        # A multi-byte character cut at the 512-byte boundary is still text.
        try:
            decoded = head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return None
    printable = sum(1 for c in decoded if c.isprintable() or c in "\r\n\t")
    if printable < 0.95 * len(decoded):
        return None
    first = decoded.strip().splitlines()[0] if decoded.strip() else ""
    return (first[:60] + "...") if len(first) > 60 else first


class _Broken(Exception):
    """A verdict of walk_fields found while reading a varint: ('truncated' or 'invalid', why)."""

    def __init__(self, verdict: str, why: str) -> None:
        super().__init__(why)
        self.verdict, self.why = verdict, why


def _varint(buf: "mmap.mmap", pos: int, size: int, start: int, inside: str, malformed: str) -> Tuple[int, int]:
    """read_varint, its two failures told as 'the file ends inside {inside}' / 'malformed {malformed}'."""
    try:
        return read_varint(buf, pos, size)
    except EOFError:
        raise _Broken("truncated", f"the file ends inside {inside} at byte {start}") from None
    except ValueError:
        raise _Broken("invalid", f"byte {start}: malformed {malformed}") from None


def walk_fields(path: Path, size: int) -> Tuple[str, str]:
    """Walk the top-level protobuf fields without reading their payloads.

    Returns ('ok', ''), ('truncated', what ran past the end) or ('invalid', why).
    """
    if size == 0:
        return "ok", ""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        try:
            return _walk(buf, size)
        except _Broken as broken:
            return broken.verdict, broken.why


def _walk(buf: "mmap.mmap", size: int) -> Tuple[str, str]:
    pos = 0
    while pos < size:
        start = pos
        key, pos = _varint(buf, pos, size, start, "a field key", "field key")
        number, wire = key >> 3, key & 7
        if wire not in _WIRE_TYPES or number == 0:
            return "invalid", f"byte {start}: wire type {wire} of field {number} is not valid protobuf"
        field_name = _MODEL_FIELDS.get(number, f"#{number}")
        if wire == 0:
            _, pos = _varint(buf, pos, size, start, f"field '{field_name}'", f"varint in field '{field_name}'")
            continue
        if wire == 2:
            need, pos = _varint(buf, pos, size, start, f"the length of field '{field_name}'",
                                f"length of field '{field_name}'")
        else:
            need = 8 if wire == 1 else 4
        remaining = size - pos
        if need > remaining:
            return "truncated", (f"field '{field_name}' at byte {start} declares {need} bytes but only "
                                 f"{remaining} remain (the file should be at least {pos + need} "
                                 f"bytes, it has {size})")
        pos += need
    return "ok", ""
