"""The protobuf varint reader, in a module that imports nothing: the wire walks of the lazy loader,
of `mi validate` and of the model header reader (core/modelhead.py, which must not import onnx) share it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    import mmap


def read_varint(buf: "bytes | mmap.mmap", pos: int, end: Optional[int] = None) -> Tuple[int, int]:
    """The protobuf varint at `pos` of `buf`: (value, position after it).

    Raises EOFError when it runs into `end` (default: the end of `buf`) and ValueError when it is
    longer than the 10 bytes a 64-bit varint can take. The one varint reader of the package.
    """
    end = len(buf) if end is None else end
    value, shift = 0, 0
    while True:
        if pos >= end:
            raise EOFError("the data ends inside a varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
