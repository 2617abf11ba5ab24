"""Preprocessing spec files (`--preprocess FILE`) and `--preprocess-set KEY=VALUE` overrides.

```yaml
version: 1
preprocess:
  resize: 256
  center-crop: 224
  scale: 1/255
  mean: [0.485, 0.456, 0.406]
  std: [0.229, 0.224, 0.225]
```

Keys and values are checked by core/preprocess.py; errors name the file and line, unknown keys
get a "did you mean".
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..core.preprocess import KEYS, SpecError, parse_spec
from ..errors import ConfigError, UsageError
from .loader import ConfigFile, load_config_file

SECTION = "preprocess"


def is_preprocess_file(config: ConfigFile) -> bool:
    return SECTION in config.data


def check_preprocess_file(config: ConfigFile, errors: Optional[List[ConfigError]] = None) -> Dict[str, Any]:
    """The spec of a loaded file as a dict of YAML keys; collect or raise file:line errors."""
    def fail(error: ConfigError) -> None:
        if errors is None:
            raise error
        errors.append(error)

    for key in config.data:
        if key not in ("version", SECTION):
            fail(config.error((str(key),), "unknown key in a preprocessing file",
                              hint=f"put the spec under '{SECTION}:'"))
    section = config.data.get(SECTION) or {}
    if not isinstance(section, dict):
        fail(config.error((SECTION,), f"expected a mapping of key: value, got {type(section).__name__}"))
        return {}
    good: Dict[str, Any] = {}
    for key, value in section.items():
        try:
            parse_spec({key: value})
            good[str(key).replace("_", "-")] = value
        except SpecError as exc:
            hint = None
            if str(exc) == "unknown preprocessing key":
                close = difflib.get_close_matches(str(key).replace("_", "-"), KEYS, n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"keys: {', '.join(KEYS)}"
            fail(config.error((SECTION, str(key)), str(exc), hint=hint))
    try:
        parse_spec(good)
    except SpecError as exc:  # keys that do not go together (mean for 3 channels with GRAY, ...)
        fail(config.error((SECTION, exc.key), str(exc)))
    return good


def load_preprocess_file(path: "str | Path") -> Dict[str, Any]:
    """Read a spec file; raise the first problem as a file:line ConfigError."""
    config = load_config_file(path)
    if not is_preprocess_file(config):
        raise ConfigError(f"{config.path}:1: not a preprocessing spec: no '{SECTION}:' section")
    return check_preprocess_file(config)


def spec_from_flags(path: Optional[str], settings: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The spec from `--preprocess FILE`, then `--preprocess-set KEY=VALUE` (which win); None if neither."""
    if not path and not settings:
        return None
    spec: Dict[str, Any] = dict(load_preprocess_file(path)) if path else {}
    for item in settings:
        key, sep, value = str(item).partition("=")
        key = key.strip().replace("_", "-")
        if not sep or not key:
            raise UsageError(f"--preprocess-set '{item}': expected KEY=VALUE, e.g. resize=256")
        try:
            parse_spec({key: value.strip()})
        except SpecError as exc:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close and close[0] != key else None
            raise UsageError(f"--preprocess-set {key}: {exc}", hint=hint) from None
        spec[key] = value.strip()
    try:
        parse_spec(spec)
    except SpecError as exc:
        raise UsageError(f"preprocessing spec: {exc.key}: {exc}") from None
    return spec
