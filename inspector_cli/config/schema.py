"""JSON Schema of the config formats, generated from the commands' click parameters.

Config keys are the commands' flags (config/loader.py validates against them), so the schema is
derived from the same parameters and cannot drift: `mi config schema --out
inspector_cli/schemas/config-file.json` regenerates the shipped file, and a test fails when it
is out of date. Editors (e.g. the YAML language server) use it for completion and checking.

Values may also be `${VAR}` strings (suites interpolate them), numbers may be numeric strings
(YAML reads `1e-3` as a string), and options that repeat take a value or a list; options of the
form NAME=VALUE also take a mapping.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Mapping, Sequence

import click

from ..core.preprocess import CHANNEL_ORDERS, DTYPES, INTERPOLATIONS, LAYOUTS
from .suite import STEP_KEYS, STEP_KINDS

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config-file.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
ENV_STRING = {"type": "string", "pattern": r"\$\{"}
NUMERIC_STRING = {"type": "string", "pattern": r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"}


def option_keys(command: click.Command) -> Dict[str, click.Parameter]:
    """Documented config keys of a command: long flag names without '--', arguments by name (dashed)."""
    keys: Dict[str, click.Parameter] = {}
    for param in command.params:
        if isinstance(param, click.Argument):
            keys[(param.name or "").replace("_", "-")] = param
            continue
        for opt in getattr(param, "opts", []):
            if opt.startswith("--") and opt != "--help":
                keys[opt[2:]] = param
    return keys


def scalar_schema(param: click.Parameter) -> Dict[str, Any]:
    """The schema of one value of `param`, from its click type."""
    ptype = param.type
    custom = getattr(ptype, "json_schema", None)
    if isinstance(custom, dict):
        return dict(custom)
    if isinstance(param, click.Option) and param.is_flag:
        return {"type": "boolean"}
    if isinstance(ptype, click.Choice):
        return {"enum": [str(c) for c in ptype.choices]}
    if isinstance(ptype, (click.IntRange, click.FloatRange)):
        base: Dict[str, Any] = {"type": "integer" if isinstance(ptype, click.IntRange) else "number"}
        if ptype.min is not None:
            base["exclusiveMinimum" if ptype.min_open else "minimum"] = ptype.min
        if ptype.max is not None:
            base["exclusiveMaximum" if ptype.max_open else "maximum"] = ptype.max
        return {"anyOf": [base, NUMERIC_STRING, ENV_STRING]}
    if ptype is click.INT:
        return {"anyOf": [{"type": "integer"}, NUMERIC_STRING, ENV_STRING]}
    if ptype is click.FLOAT:
        return {"anyOf": [{"type": "number"}, NUMERIC_STRING, ENV_STRING]}
    if ptype is click.BOOL:
        return {"anyOf": [{"type": "boolean"}, ENV_STRING]}
    if isinstance(ptype, (click.Path, click.File)) or ptype is click.STRING:
        return {"type": "string"}
    return {"type": ["string", "number"]}  # custom types convert the value's text


def param_schema(param: click.Parameter) -> Dict[str, Any]:
    item = scalar_schema(param)
    many = getattr(param, "multiple", False) or (isinstance(param, click.Argument) and param.nargs != 1)
    if many:
        forms = [item, {"type": "array", "items": item}]
        # NAME=VALUE options (by type or metavar) also take {NAME: VALUE}, as the loader does
        if "=" in (param.type.name or "") or "=" in (getattr(param, "metavar", None) or ""):
            forms.append({"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}})
        schema: Dict[str, Any] = {"anyOf": forms}
    else:
        schema = item
    help_text = getattr(param, "help", None) or (f"the {param.name.upper()} argument" if param.name else "")
    if help_text:
        schema = {"description": " ".join(help_text.split()), **schema}
    return schema


def command_schema(command: click.Command) -> Dict[str, Any]:
    properties = {key: param_schema(param) for key, param in option_keys(command).items()}
    for key in list(properties):
        if "-" in key:  # the loader accepts min_cosine for min-cosine
            properties.setdefault(key.replace("-", "_"), {"$ref": f"#/$defs/command.{command.name}/properties/{key}"})
    return {"type": ["object", "null"], "properties": properties, "additionalProperties": False}


def preprocess_schema() -> Dict[str, Any]:
    size = {"anyOf": [{"type": "integer", "minimum": 1},
                      {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": 2},
                      {"type": "string"}]}
    numbers = {"anyOf": [{"type": "number"}, {"type": "string"},
                         {"type": "array", "items": {"type": ["number", "string"]}, "minItems": 1, "maxItems": 3}]}
    return {"type": "object", "additionalProperties": False, "properties": {
        "input": {"type": "string", "description": "Model input that takes the images (default: the only one)."},
        "resize": {**size, "description": "N: shorter side to N (aspect kept); [H, W]: exact size."},
        "center-crop": {**size, "description": "Center crop N or [H, W] after resize."},
        "interpolation": {"enum": list(INTERPOLATIONS)},
        "scale": {"type": ["number", "string"], "description": "Multiply pixels by this (e.g. 1/255)."},
        "mean": {**numbers, "description": "Subtracted after scaling, per output channel."},
        "std": {**numbers, "description": "Divided by after the mean, per output channel."},
        "channel-order": {"enum": list(CHANNEL_ORDERS)},
        "layout": {"enum": list(LAYOUTS), "description": "Default: as the model's input looks."},
        "dtype": {"enum": list(DTYPES), "description": "Default: the model input's dtype."},
    }}


def build_schema(commands: Mapping[str, click.Command], step_kinds: Sequence[str] = STEP_KINDS) -> Dict[str, Any]:
    """The schema for `commands` (name -> click command; groups are left out: they take no config)."""
    plain = {name: cmd for name, cmd in sorted(commands.items()) if not isinstance(cmd, click.Group)}
    defs: Dict[str, Any] = {f"command.{name}": command_schema(cmd) for name, cmd in plain.items()}
    shared: Dict[str, Any] = {}
    for name in plain:
        for key, value in defs[f"command.{name}"]["properties"].items():
            shared.setdefault(key, value)
    defs["defaults"] = {"type": ["object", "null"], "properties": shared, "additionalProperties": False,
                        "description": "Options for every command (or step) that has them."}
    version = {"const": 1}
    sections = {name: {"$ref": f"#/$defs/command.{name}"} for name in plain}
    defs["run-config"] = {"type": "object", "additionalProperties": False, "properties": {
        "version": version, "defaults": {"$ref": "#/$defs/defaults"}, **sections}}
    kinds = [k for k in step_kinds if k in plain]
    defs["step"] = {"type": "object", "additionalProperties": False, "minProperties": 1,
                    "properties": {**{k: {"type": "string"} for k in STEP_KEYS},
                                   **{k: {"$ref": f"#/$defs/command.{k}"} for k in kinds}},
                    "oneOf": [{"required": [k]} for k in kinds] or [{"required": ["__no_step_kinds__"]}]}
    defs["suite"] = {"type": "object", "additionalProperties": False, "required": ["steps"], "properties": {
        "version": version, "description": {"type": "string"}, "defaults": {"$ref": "#/$defs/defaults"},
        "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}}}
    defs["preprocess"] = preprocess_schema()
    defs["preprocess-file"] = {"type": "object", "additionalProperties": False, "required": ["preprocess"],
                               "properties": {"version": version, "preprocess": {"$ref": "#/$defs/preprocess"}}}
    return {
        "$schema": DRAFT,
        "title": "model-inspector (mi) configuration",
        "description": "A run config (mi -c FILE COMMAND), a suite (mi run FILE) or an image preprocessing spec "
                       "(--preprocess FILE). Generated from the commands' options by 'mi config schema'.",
        "anyOf": [{"$ref": "#/$defs/run-config"}, {"$ref": "#/$defs/suite"}, {"$ref": "#/$defs/preprocess-file"}],
        "$defs": defs,
    }


def schema_text(schema: Dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
