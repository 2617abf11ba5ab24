"""`${VAR}` and `${VAR:-default}` in suite files, resolved from the environment.

Interpolation works on parsed string values, never on the YAML text, so a variable's value can
never change the file's structure (a value holding ': ' or a newline stays one string) and every
error keeps the line of the key it belongs to. `$$` is a literal `$`.
"""
from __future__ import annotations

import os
import re
from typing import Any, List, Mapping, Optional, Tuple

from ..errors import ConfigError
from .loader import ConfigFile

_PATTERN = re.compile(r"\$\$|\$\{([^}:]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def interpolate_text(text: str, env: Mapping[str, str]) -> str:
    """Replace `${VAR}` / `${VAR:-default}` / `$$` in one string; raise KeyError(VAR) when VAR is unset.

    As in the shell, `${VAR:-default}` uses the default when VAR is unset or empty.
    """
    def replace(match: "re.Match[str]") -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if not _NAME.match(name):
            raise ValueError(f"'${{{name}}}' is not a valid variable reference (use ${{NAME}} or ${{NAME:-default}})")
        value = env.get(name)
        if value:
            return value
        if default is not None:
            return default
        if value is not None:  # set but empty, no default: empty, as the shell does
            return value
        raise KeyError(name)

    return _PATTERN.sub(replace, text)


def interpolate_config(config: ConfigFile, env: Optional[Mapping[str, str]] = None,
                       errors: Optional[List[ConfigError]] = None) -> None:
    """Interpolate every string value of `config.data` in place (keys are left alone).

    An unset variable without a default is a ConfigError at the value's line; with `errors` they
    are collected, else the first is raised.
    """
    env = os.environ if env is None else env
    config.data = _walk(config, config.data, (), env, errors)


def _walk(config: ConfigFile, value: Any, keys: Tuple[str, ...], env: Mapping[str, str],
          errors: Optional[List[ConfigError]]) -> Any:
    if isinstance(value, dict):
        return {k: _walk(config, v, (*keys, str(k)), env, errors) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(config, v, (*keys, str(i)), env, errors) for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value
    try:
        return interpolate_text(value, env)
    except (KeyError, ValueError) as exc:
        if isinstance(exc, KeyError):
            name = exc.args[0]
            error = config.error(keys, f"environment variable {name} is not set",
                                 hint=f"set it, or give a default: ${{{name}:-value}}")
        else:
            error = config.error(keys, str(exc))
        if errors is None:
            raise error from None
        errors.append(error)
        return value
