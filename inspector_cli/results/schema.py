"""JSON Schema (draft 2020-12) of each result kind, generated from the result dataclasses.

The schema is derived from the same type hints that `codec.from_jsonable` reads, so it cannot
drift from what is written; shipped copies live in inspector_cli/schemas/ and a test checks they are
up to date (regenerate with `python scripts/gen_schemas.py`).
"""
from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, Dict, Type

from .base import Result, known_kinds, result_class
from .codec import type_hints

NUMBER = {"anyOf": [{"type": "number"}, {"enum": ["inf", "-inf", "nan"]}],
          "description": "a number; non-finite values are the strings 'inf', '-inf', 'nan'"}


def _schema_for(tp: Any, defs: Dict[str, Any]) -> Dict[str, Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return {}
    if origin is typing.Union:
        options = [_schema_for(a, defs) for a in args if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        if type(None) in args:
            return {"anyOf": [schema, {"type": "null"}]}
        return schema
    if origin in (list, tuple) or tp in (list, tuple):
        item = args[0] if args else Any
        return {"type": "array", "items": _schema_for(item, defs)}
    if origin is dict or tp is dict:
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _schema_for(value, defs)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if tp is float:
        return dict(NUMBER)
    if tp is int:
        return {"type": "integer"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is str:
        return {"type": "string"}
    if dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion
            defs[name] = _dataclass_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    return {}


def _dataclass_schema(cls: type, defs: Dict[str, Any], skip: tuple = ()) -> Dict[str, Any]:
    hints = type_hints(cls)
    properties: Dict[str, Any] = {}
    required = []
    for f in dataclasses.fields(cls):
        if f.name in skip or f.metadata.get("transient"):
            continue
        properties[f.name] = _schema_for(hints[f.name], defs)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            required.append(f.name)
    schema: Dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    doc = (cls.__doc__ or "").strip().splitlines()
    if doc and not doc[0].startswith(cls.__name__ + "("):
        schema["description"] = doc[0]
    return schema


FINGERPRINT: Dict[str, Any] = {
    "type": "object",
    "description": "the environment of the run (core/fingerprint.py); absent in results written before it existed",
    "properties": {
        "mi": {"type": ["string", "null"]}, "python": {"type": ["string", "null"]},
        "onnxruntime": {"type": "object"}, "onnx": {"type": ["string", "null"]}, "numpy": {"type": ["string", "null"]},
        "cpu": {"type": "object", "properties": {"model": {"type": ["string", "null"]},
                                                 "flags": {"type": "array", "items": {"type": "string"}}}},
        "threads": {"type": "object"}, "os": {"type": "object"},
    },
}


def envelope_schema(kind: str) -> Dict[str, Any]:
    """The full schema of an `mi` JSON document of `kind` (envelope + results)."""
    from .document import SCHEMA_VERSION

    cls: Type[Result] = result_class(kind)
    defs: Dict[str, Any] = {}
    results = _dataclass_schema(cls, defs, skip=("models", "config", "inputs", "fingerprint"))
    model_ref = _schema_for(_field_type(cls, "models"), defs) if _has_field(cls, "models") else {"type": "array"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://model-inspector.invalid/schemas/{kind}.schema.json",
        "title": f"mi {kind} result",
        "type": "object",
        "required": ["schema_version", "kind", "tool_version", "created", "fingerprint", "models", "config", "verdict",
                     "results"],
        "additionalProperties": False,
        "properties": {
            "schema_version": {"const": SCHEMA_VERSION},
            "kind": {"const": kind},
            "tool_version": {"type": "string"},
            "created": {"type": "string", "format": "date-time"},
            "fingerprint": FINGERPRINT,
            "models": model_ref,
            "config": {"type": "object"},
            "inputs": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            "verdict": {
                "type": "object", "additionalProperties": False,
                "required": ["passed", "exit_code", "summary"],
                "properties": {"passed": {"type": "boolean"}, "exit_code": {"type": "integer"},
                               "summary": {"type": "string"}},
            },
            "results": results,
        },
        "$defs": defs,
    }


def _has_field(cls: type, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def _field_type(cls: type, name: str) -> Any:
    return type_hints(cls)[name]


def all_schemas() -> Dict[str, Dict[str, Any]]:
    return {kind: envelope_schema(kind) for kind in known_kinds()}
