"""YAML run configs: `version: 1`, optional `defaults:`, one section per command, keys = flag names.

Keys are checked against the command's own click parameters, so a config accepts exactly what the
flags accept and converts values the same way (`1e-3`, which YAML reads as a string, becomes a
float). Errors name the file and line: `run.yaml:7: compare.min-cosine: ...`. Relative paths in a
config are relative to the config file. Precedence: flag > command section > defaults > built-in.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

import click
import yaml

from ..errors import ConfigError

CONFIG_VERSION = 1
RESERVED_TOP_LEVEL = ("version", "defaults")


@dataclass
class ConfigFile:
    """A parsed config file with the line of every key, for file:line errors."""

    path: Path
    data: Dict[str, Any]
    lines: Dict[Tuple[str, ...], int] = field(default_factory=dict)

    def line_of(self, *keys: str) -> int:
        for depth in range(len(keys), 0, -1):
            if keys[:depth] in self.lines:
                return self.lines[keys[:depth]]
        return 1

    def error(self, keys: Tuple[str, ...], message: str, hint: Optional[str] = None) -> ConfigError:
        where = ".".join(keys)
        return ConfigError(f"{self.path}:{self.line_of(*keys)}: {where}: {message}", hint=hint)

    def section(self, name: str) -> Dict[str, Any]:
        value = self.data.get(name) or {}
        if not isinstance(value, dict):
            raise self.error((name,), f"expected a mapping of option: value, got {type(value).__name__}")
        return value


def load_config_file(path: "str | Path") -> ConfigFile:
    """Read a config with `yaml.safe_load` (never arbitrary objects) and record key lines.

    Loading is linear in the file's size: the file is composed once, and aliases that would expand
    to more than `ALIAS_BUDGET` nodes (an "alias bomb") or refer to themselves are refused.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    text = decode_config_bytes(path, path.read_bytes())
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # the reader checks characters here (NUL, other controls)
        root = loader.get_single_node()
        if root is not None:
            check_alias_expansion(path, root)
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = mark.line + 1
        elif isinstance(exc, yaml.reader.ReaderError):
            line = text.count("\n", 0, exc.position) + 1
        else:
            line = 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: invalid YAML: {problem}") from exc
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: a config must be a mapping with one section per command")
    config = ConfigFile(path=path, data=data)
    _record_lines(root, (), config.lines)
    version = data.get("version", CONFIG_VERSION)
    if version != CONFIG_VERSION:
        raise config.error(("version",), f"version {version!r} is not supported", hint=f"use version: {CONFIG_VERSION}")
    return config


# A config's nodes once every alias is expanded. Real configs reuse a block a few times; a "billion
# laughs" file (nine levels of nine-way aliases) would expand to 9^9 nodes and every later walk of
# the data (key lines, interpolation, suites) would follow each expansion.
ALIAS_BUDGET = 10_000


def decode_config_bytes(path: Path, raw: bytes) -> str:
    """The file as UTF-8 text, or a usage error naming the line and byte offset of the bad byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at byte offset "
                          f"{exc.start}", hint="save the config as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def check_alias_expansion(path: Path, root: yaml.Node) -> None:
    """Refuse self-referring aliases and aliases expanding beyond `ALIAS_BUDGET` nodes.

    The composed tree shares one node object per anchor, so the expanded size of every node is
    computed once (memoised by identity): linear in the file, whatever the expansion.
    """
    sizes: Dict[int, int] = {}
    active: set = set()
    stack: List[Tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            active.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > ALIAS_BUDGET:
                raise ConfigError(f"{path}:{node.start_mark.line + 1}: YAML aliases expand to more than "
                                  f"{ALIAS_BUDGET} values", hint="a config does not need this many; "
                                  "write the values out or use fewer nested aliases")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in active:
            raise ConfigError(f"{path}:{node.start_mark.line + 1}: a YAML alias refers to the value that "
                              "contains it (a recursive structure)")
        active.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in active:
                raise ConfigError(f"{path}:{child.start_mark.line + 1}: a YAML alias refers to the value "
                                  "that contains it (a recursive structure)")
            if id(child) not in sizes:
                stack.append((child, False))


def _children(node: yaml.Node) -> List[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _record_lines(node: Any, prefix: Tuple[str, ...], lines: Dict[Tuple[str, ...], int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*prefix, str(key_node.value))
            lines[key] = key_node.start_mark.line + 1
            _record_lines(value_node, key, lines)
    elif isinstance(node, yaml.SequenceNode):
        # List items are keyed by their index ('steps', '0', ...), so suites get file:line too.
        for index, item in enumerate(node.value):
            key = (*prefix, str(index))
            lines[key] = item.start_mark.line + 1
            _record_lines(item, key, lines)


def check_top_level(config: ConfigFile, commands: Iterable[str]) -> None:
    """Unknown top-level sections are errors, with a 'did you mean'."""
    known = list(RESERVED_TOP_LEVEL) + list(commands)
    for key in config.data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            raise config.error((str(key),), "unknown section",
                               hint=f"did you mean '{close[0]}'?" if close else f"sections: {', '.join(known)}")


# ---- sections -> click default_map ---------------------------------------------------------------
def param_by_key(command: click.Command) -> Dict[str, click.Parameter]:
    """Config key -> parameter: '--min-cosine' is 'min-cosine' (or 'min_cosine'); arguments by name."""
    table: Dict[str, click.Parameter] = {}
    for param in command.params:
        if param.name in ("help",):
            continue
        names = [o.lstrip("-") for o in getattr(param, "opts", []) if o.startswith("--")]
        if isinstance(param, click.Argument):
            names = [param.name or ""]
        for name in names + [param.name or ""]:
            if name:
                table[name] = param
                table[name.replace("-", "_")] = param
                table[name.replace("_", "-")] = param
    return table


def section_default_map(config: ConfigFile, command_name: str, command: click.Command,
                        other_commands: Dict[str, click.Command],
                        errors: Optional[List[ConfigError]] = None) -> Dict[str, Any]:
    """The command's click `default_map` from `defaults:` then its own section (section wins).

    With `errors` (a list), every problem is appended there and checking goes on (`mi config
    check` reports them all); without it, the first problem is raised.
    """
    def fail(exc: ConfigError) -> None:
        if errors is None:
            raise exc
        errors.append(exc)

    params = param_by_key(command)
    result: Dict[str, Any] = {}
    defaults = config.section("defaults")
    for key, value in defaults.items():
        try:
            if str(key) in params:
                _store(config, ("defaults", str(key)), params[str(key)], value, result)
            elif not any(str(key) in param_by_key(c) for c in other_commands.values()):
                raise _unknown_key(config, ("defaults", str(key)), list(params))
        except ConfigError as exc:
            fail(exc)
    section_name = command_name
    for key, value in config.section(section_name).items():
        try:
            if str(key) not in params:
                raise _unknown_key(config, (section_name, str(key)), list(params))
            _store(config, (section_name, str(key)), params[str(key)], value, result)
        except ConfigError as exc:
            fail(exc)
    return result


def _unknown_key(config: ConfigFile, keys: Tuple[str, ...], known: List[str]) -> ConfigError:
    dashed = sorted({k for k in known if "_" not in k})
    close = difflib.get_close_matches(keys[-1].replace("_", "-"), dashed, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(dashed)}"
    return config.error(keys, "unknown key", hint=hint)


def _store(config: ConfigFile, keys: Tuple[str, ...], param: click.Parameter, value: Any,
           out: Dict[str, Any]) -> None:
    items = _as_items(param, value)
    converted = []
    for item in items:
        _check_scalar(config, keys, param, item)
        item = _relative_path(config, param, item)
        try:
            converted.append(param.type.convert(item, param, None))
        except click.BadParameter as exc:
            raise config.error(keys, exc.message) from exc
    if param.multiple or (isinstance(param, click.Argument) and param.nargs != 1):
        out[param.name or keys[-1]] = converted
    else:
        if len(converted) != 1:
            raise config.error(keys, "expected a single value, got a list")
        out[param.name or keys[-1]] = converted[0]


def _check_scalar(config: ConfigFile, keys: Tuple[str, ...], param: click.Parameter, item: Any) -> None:
    """YAML types click would pass through unchecked: `json: false` is not a path, a nested list
    or mapping is not one value."""
    is_flag = isinstance(param, click.Option) and param.is_flag
    if isinstance(item, (dict, list)):
        raise config.error(keys, f"expected a single {param.type.name} value, got a {type(item).__name__}")
    if isinstance(param.type, click.Path) and not isinstance(item, str):
        shown = str(item).lower() if isinstance(item, bool) else repr(item)
        raise config.error(keys, f"expected a path, got {shown}")
    if isinstance(item, bool) and not is_flag and not isinstance(param.type, click.types.BoolParamType):
        raise config.error(keys, f"expected a {param.type.name} value, got {str(item).lower()}")


def _as_items(param: click.Parameter, value: Any) -> List[Any]:
    """Scalars, lists, and for 'NAME=VALUE' options also mappings {name: value}; a mapping of mappings
    {provider: {key: value}} gives 'PROVIDER:KEY=VALUE' items (`provider-option:`)."""
    if isinstance(value, dict):
        return [f"{k}:{k2}={v2}" for k, v in value.items() for k2, v2 in v.items()] if all(
            isinstance(v, dict) for v in value.values()) and value else [f"{k}={v}" for k, v in value.items()]
    if isinstance(value, list):
        return value
    if value is None:
        return []
    if isinstance(param, click.Option) and param.is_flag and not isinstance(value, bool):
        return [value]
    return [value]


def _relative_path(config: ConfigFile, param: click.Parameter, value: Any) -> Any:
    if isinstance(param.type, click.Path) and isinstance(value, str) and value != "-":
        candidate = Path(value).expanduser()
        if not candidate.is_absolute():
            return str((config.path.parent / candidate))
    return value
