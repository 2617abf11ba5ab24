"""Suite files for `mi run`: named steps, each a command with its options, and shared defaults.

```yaml
version: 1
defaults:            # applied to every step whose command has the option
  opt-level: all
steps:
  - name: accuracy   # optional; defaults to the step kind
    compare:         # the step kind: a command name; the body is that command's config section
      model-a: ${MODEL_DIR:-models}/fp32.onnx
      model-b: ${MODEL_DIR:-models}/int8.onnx
      min-cosine: 0.99
```

A step body is exactly a run-config section: keys are the command's flags and arguments, checked
and converted by the command's own click parameters (config/loader.py), paths relative to the
suite file. Adding a step kind is one entry in STEP_KINDS; the command does the rest.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import click

from ..errors import ConfigError
from .interpolate import interpolate_config
from .loader import ConfigFile, load_config_file, param_by_key, section_default_map

STEP_KINDS: Tuple[str, ...] = ("validate", "compare", "probe", "nan-bisect", "profile", "inspect", "fix")
"""Commands a suite step may run, in the order a CI gate usually runs them."""

SUITE_KEYS = ("version", "description", "defaults", "steps")
STEP_KEYS = ("name",)


def key_label(keys: Sequence[str]) -> str:
    """('steps', '2', 'compare', 'inputs') -> 'steps[2].compare.inputs'."""
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", ".".join(keys))


class SuiteFile(ConfigFile):
    """A parsed suite; errors show list items as `steps[2]`."""

    def error(self, keys: Tuple[str, ...], message: str, hint: Optional[str] = None) -> ConfigError:
        return ConfigError(f"{self.path}:{self.line_of(*keys)}: {key_label(keys)}: {message}", hint=hint)


class StepView(ConfigFile):
    """One step seen as a run config (`defaults:` + a section named after its kind), for the loader."""

    suite: SuiteFile
    step: "StepSpec"

    @classmethod
    def of(cls, suite: SuiteFile, step: "StepSpec") -> "StepView":
        view = cls(path=suite.path, data={"defaults": suite.data.get("defaults") or {}, step.kind: step.options})
        view.suite, view.step = suite, step
        return view

    def line_of(self, *keys: str) -> int:
        if keys and keys[0] == "defaults":
            return self.suite.line_of(*keys)
        return self.suite.line_of("steps", str(self.step.index), *keys)

    def error(self, keys: Tuple[str, ...], message: str, hint: Optional[str] = None) -> ConfigError:
        if keys and keys[0] == "defaults":
            return self.suite.error(keys, message, hint)
        return ConfigError(f"{self.path}:{self.line_of(*keys)}: step '{self.step.name}': {'.'.join(keys)}: {message}",
                           hint=hint)


@dataclass
class StepSpec:
    """One step as written: its position, name, kind (a command name) and raw options."""

    index: int
    name: str
    kind: str
    line: int
    options: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Suite:
    path: Path
    file: SuiteFile
    steps: List[StepSpec]
    description: str = ""

    @property
    def defaults(self) -> Dict[str, Any]:
        return dict(self.file.data.get("defaults") or {})

    def step_names(self) -> List[str]:
        return [s.name for s in self.steps]


def is_suite(config: ConfigFile) -> bool:
    return "steps" in config.data


def load_suite(path: "str | Path", env: Optional[Mapping[str, str]] = None,
               errors: Optional[List[ConfigError]] = None) -> Suite:
    """Read a suite: top-level keys, the steps list, step kinds and names, `${VAR}` interpolation.

    Options are checked against the commands later (`step_default_map`), when the commands are
    known. With `errors`, problems are collected there instead of raised (`mi config check`).
    """
    loaded = load_config_file(path)
    suite_file = SuiteFile(path=loaded.path, data=loaded.data, lines=loaded.lines)
    return suite_from_file(suite_file, env, errors)


def suite_from_file(file: SuiteFile, env: Optional[Mapping[str, str]] = None,
                    errors: Optional[List[ConfigError]] = None) -> Suite:
    def fail(error: ConfigError) -> None:
        if errors is None:
            raise error
        errors.append(error)

    if "steps" not in file.data:
        fail(ConfigError(f"{file.path}:1: not a suite: no 'steps:' list",
                         hint=f"for a run config use mi -c {file.path.name} COMMAND"))
    for key in file.data:
        if key not in SUITE_KEYS:
            fail(file.error((str(key),), "unknown key in a suite", hint=_did_you_mean(str(key), SUITE_KEYS)))
    interpolate_config(file, env, errors)
    raw_steps = file.data.get("steps") or []
    if not isinstance(raw_steps, list):
        fail(file.error(("steps",), f"expected a list of steps, got {type(raw_steps).__name__}"))
        raw_steps = []
    if "defaults" in file.data and not isinstance(file.data["defaults"] or {}, dict):
        fail(file.error(("defaults",), "expected a mapping of option: value"))
        file.data["defaults"] = {}
    steps: List[StepSpec] = []
    seen: Dict[str, int] = {}
    for index, raw in enumerate(raw_steps):
        step = _parse_step(file, index, raw, fail)
        if step is None:
            continue
        if step.name in seen:
            fail(file.error(("steps", str(index), "name"), f"step name '{step.name}' is used twice",
                            hint="give each step a unique 'name:'"))
        seen[step.name] = index
        steps.append(step)
    _name_unnamed(steps, file)
    description = file.data.get("description") or ""
    return Suite(path=file.path, file=file, steps=steps, description=str(description))


def _parse_step(file: SuiteFile, index: int, raw: Any, fail: Any) -> Optional[StepSpec]:
    keys = ("steps", str(index))
    if not isinstance(raw, dict):
        fail(file.error(keys, "a step is a mapping: the step kind (a command) with its options",
                        hint="e.g. '- compare: {model-a: a.onnx, model-b: b.onnx}'"))
        return None
    kinds = [str(k) for k in raw if str(k) not in STEP_KEYS]
    unknown = [k for k in kinds if k not in STEP_KINDS]
    for kind in unknown:
        fail(file.error((*keys, kind), f"unknown step kind '{kind}'",
                        hint=_did_you_mean(kind, STEP_KINDS + STEP_KEYS)))
    known = [k for k in kinds if k in STEP_KINDS]
    if len(known) > 1:
        fail(file.error(keys, f"a step runs one command, this one names {len(known)} ({', '.join(known)})",
                        hint="split it into one step per command"))
        return None
    if not known:
        if not unknown:
            fail(file.error(keys, "the step names no command", hint=f"step kinds: {', '.join(STEP_KINDS)}"))
        return None
    kind = known[0]
    options = raw.get(kind) or {}
    if not isinstance(options, dict):
        fail(file.error((*keys, kind), f"expected a mapping of option: value, got {type(options).__name__}"))
        options = {}
    name = raw.get("name")
    return StepSpec(index=index, name=str(name) if name not in (None, "") else "", kind=kind,
                    line=file.line_of(*keys), options=options)


def _name_unnamed(steps: List[StepSpec], file: SuiteFile) -> None:
    """Unnamed steps are called after their kind: 'compare', then 'compare-2', ..."""
    taken = {s.name for s in steps if s.name}
    for step in steps:
        if step.name:
            continue
        name, n = step.kind, 1
        while name in taken:
            n += 1
            name = f"{step.kind}-{n}"
        step.name = name
        taken.add(name)


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean '{close[0]}'?" if close else f"expected one of: {', '.join(choices)}"


# ---- steps against their commands ------------------------------------------------------------------
def missing_command_error(suite: Suite, step: StepSpec) -> ConfigError:
    return suite.file.error(("steps", str(step.index), step.kind),
                            f"step '{step.name}' needs the command 'mi {step.kind}', which this mi does not have",
                            hint="upgrade model-inspector, or leave the step out with --skip " + step.name)


def step_default_map(suite: Suite, step: StepSpec, commands: Mapping[str, click.Command],
                     errors: Optional[List[ConfigError]] = None) -> Dict[str, Any]:
    """The click `default_map` that runs `step`: suite defaults, then the step's own options.

    Checks every key against the command's parameters (with 'did you mean'), converts values with
    the parameter's type (so missing files and wrong types are caught before anything runs), and
    checks that required arguments are given.
    """
    def fail(error: ConfigError) -> None:
        if errors is None:
            raise error
        errors.append(error)

    command = commands.get(step.kind)
    if command is None:
        fail(missing_command_error(suite, step))
        return {}
    view = StepView.of(suite.file, step)
    others = {k: c for k, c in commands.items() if k != step.kind and k in STEP_KINDS}
    default_map = section_default_map(view, step.kind, command, others, errors)
    for param in command.params:
        name = param.name or ""
        if param.required and name not in default_map and not _given(step, name, suite.defaults):
            what = name.upper() if isinstance(param, click.Argument) else f"--{name.replace('_', '-')}"
            fail(view.error((step.kind,), f"missing {what}", hint=f"add '{name.replace('_', '-')}: ...'"))
        value = default_map.get(name)
        if isinstance(param.type, click.Path) and (value == "-" or (isinstance(value, list) and "-" in value)):
            fail(view.error((step.kind, _user_key(step, command, param)),
                            "'-' (stdout) cannot be used in a suite step: steps share stdout",
                            hint="write to a file, or use mi run --json - for the combined report"))
    return default_map


def _user_key(step: StepSpec, command: click.Command, param: click.Parameter) -> str:
    """The key the step used for `param` ('json' for --json), for messages and line numbers."""
    table = param_by_key(command)
    for key in step.options:
        if table.get(str(key)) is param:
            return str(key)
    return (param.name or "").replace("_", "-")


def _given(step: StepSpec, name: str, defaults: Mapping[str, Any]) -> bool:
    """A required key that is present but invalid was already reported; do not call it missing too."""
    keys = {name, name.replace("_", "-")}
    return any(k in step.options or k in defaults for k in keys)
