"""Generic dataclass <-> JSON-ready dict conversion for result types.

Non-finite floats become the strings "inf", "-inf" and "nan" (JSON has no such numbers, and
`allow_nan=False` would otherwise reject them); they are read back into floats by type hints.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import sys
import typing
from typing import Any, Dict, Tuple, Type, TypeVar, Union

T = TypeVar("T")
NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def encode_float(value: float) -> Union[float, str]:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


_FIELDS: Dict[type, Tuple[str, ...]] = {}
"""Serialised field names per dataclass type (a layer report encodes ~10,000 objects of a few types)."""


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, enums, tuples, numpy scalars and non-finite floats to plain JSON values."""
    kind = type(obj)
    # plain values first: a 50,000-node result is millions of them (exact type checks are cheap)
    if kind is str or obj is None or kind is bool or kind is int:
        return obj
    if kind is float:
        return encode_float(obj)
    if kind is list or kind is tuple:
        return [v if type(v) is str else to_jsonable(v) for v in obj]  # names: no call per leaf
    if kind is dict:
        return {str(k): v if type(v) is str else to_jsonable(v) for k, v in obj.items()}
    names = _FIELDS.get(kind)
    if names is None and dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(obj) if not f.metadata.get("transient"))
    if names is not None:
        return {name: to_jsonable(getattr(obj, name)) for name in names}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, bool) or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return encode_float(obj)
    if hasattr(obj, "item"):  # numpy scalar
        return to_jsonable(obj.item())
    if hasattr(obj, "__fspath__"):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


_FIELDS: Dict[type, tuple] = {}
"""Dataclass -> its serialised field names (dataclasses.fields is slow enough to show at scale)."""


def decode_value(value: Any) -> Any:
    """Untyped decoding: non-finite strings back to floats inside dicts and lists."""
    if isinstance(value, str) and value in NONFINITE:
        return NONFINITE[value]
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        return {k: decode_value(v) for k, v in value.items()}
    return value


def from_jsonable(cls: Type[T], data: Any) -> T:
    """Rebuild `cls` (a dataclass, possibly nested) from `to_jsonable` output."""
    return typing.cast(T, _decode(cls, data))


def _decode(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return decode_value(value)
    if origin is Union:
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _decode(arg, value)
            except (TypeError, ValueError, KeyError):
                continue
        return decode_value(value)
    if origin in (list, typing.List, tuple, typing.Tuple) or tp in (list, tuple):
        if origin in (tuple, typing.Tuple) or tp is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_decode(args[0], v) for v in value)
            if args:
                return tuple(_decode(a, v) for a, v in zip(args, value))
            return tuple(decode_value(value))
        return [_decode(args[0] if args else Any, v) for v in value]
    if origin in (dict, typing.Dict) or tp is dict:
        val_type = args[1] if len(args) == 2 else Any
        key_type = args[0] if args else str
        return {(int(k) if key_type is int else k): _decode(val_type, v) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is float:
        if isinstance(value, str):
            if value in NONFINITE:
                return NONFINITE[value]
            raise ValueError(f"not a number: {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"not an int: {value!r}")
        return int(value)
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise TypeError(f"expected {tp.__name__}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise TypeError(f"expected an object for {tp.__name__}")
        hints = type_hints(tp)
        kwargs: Dict[str, Any] = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _decode(hints[f.name], value[f.name])
        return tp(**kwargs)
    return value


def type_hints(cls: type) -> Dict[str, Any]:
    """`typing.get_type_hints` of a result dataclass, in its module's names. A result module may
    import a section's type only on first use (PEP 562 `__getattr__`, e.g. results.compare):
    a name missing from the module's globals is resolved through the module once, then retried."""
    module = sys.modules[cls.__module__]
    while True:
        try:
            return typing.get_type_hints(cls, vars(module))
        except NameError as error:
            name = error.name
            if not name or name in vars(module):
                raise
            try:
                getattr(module, name)  # imports the section and binds the name in the module
            except AttributeError:
                raise error from None
            if name not in vars(module):
                raise
