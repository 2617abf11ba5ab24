"""The value infos' types read from a serialised model through a three-field schema.

Shape inference hands back the whole model serialised; parsing it as a ModelProto and reading each of
its 50,000 value infos field by field (a wrapper per field, a `SerializeToString` per type to find the
few dozen distinct types) cost ~0.45 s at 50,000 nodes, a third of the types' time. Here the bytes are
parsed with a schema that has only ModelProto.graph (7) and the graph's input (11), output (12) and
value_info (13) entries, each entry only its name (1) and type (2) as raw bytes: protobuf's C parser
skips the nodes and weights, each distinct type's bytes are parsed once as a `TypeProto`, and the names
are decoded from UTF-8. ~0.2 s, the same table in the same order.

For bytes protobuf serialised itself (what `onnx.shape_inference` returns): there each singular field
appears once. A type given twice would be merged by ONNX's schema and replaced by this one.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from .types import Dim

TypeRead = Tuple[int, Optional[Tuple[Dim, ...]]]
"""(element type, shape or None), as `protoutil._read_type` reads a TypeProto."""


def _schema() -> Any:
    """The message class of the reduced ModelProto (in a pool of its own: no name can clash)."""
    proto = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="mi_value_types.proto", package="mi_value_types", syntax="proto2")
    entry = file.message_type.add(name="Entry")  # ValueInfoProto: name, type
    for name, number in (("name", 1), ("type", 2)):
        entry.field.add(name=name, number=number, type=proto.TYPE_BYTES, label=proto.LABEL_OPTIONAL)
    graph = file.message_type.add(name="Graph")  # GraphProto: input, output, value_info
    for name, number in (("input", 11), ("output", 12), ("value_info", 13)):
        graph.field.add(name=name, number=number, type=proto.TYPE_MESSAGE, type_name=".mi_value_types.Entry",
                        label=proto.LABEL_REPEATED)
    model = file.message_type.add(name="Model")  # ModelProto: graph
    model.field.add(name="graph", number=7, type=proto.TYPE_MESSAGE, type_name=".mi_value_types.Graph",
                    label=proto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mi_value_types.Model"))


_MODEL = _schema()


def read_value_types(data: bytes, read_type: Callable[[bytes], TypeRead]) -> Optional[Dict[str, TypeRead]]:
    """name -> (element type, shape) of the serialised ModelProto's graph value infos, then inputs, then
    outputs, filled as `protoutil._type_table` fills it (an untyped entry does not replace a typed one);
    `read_type` reads one TypeProto's bytes. None when the bytes do not parse or a name is not UTF-8
    (the caller then parses them as a ModelProto)."""
    try:
        graph = _MODEL.FromString(data).graph
        table: Dict[str, TypeRead] = {}
        fill_type_table(((entry.name.decode(), entry.type) for items in (graph.value_info, graph.input, graph.output)
                         for entry in items), table, read_type)
    except (UnicodeDecodeError, DecodeError):
        return None
    return table


def fill_type_table(entries: Iterable[Tuple[str, bytes]], table: Dict[str, TypeRead],
                    read_type: Callable[[bytes], TypeRead]) -> None:
    """(name, serialised TypeProto) pairs into `table`, each distinct type read once (a few dozen among
    50,000 tensors); an untyped entry does not replace a typed one. The one loop behind both readers."""
    known: Dict[bytes, TypeRead] = {}
    for name, key in entries:
        read = known.get(key)
        if read is None:
            read = known[key] = read_type(key)
        if not read[0] and name in table:
            continue
        table[name] = read
