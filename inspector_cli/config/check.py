"""`mi config check`: every problem of a run config, suite or preprocessing spec, without running.

Uses the same code paths as running (loader, suite loading, the commands' click parameters), in
collecting mode, so it reports exactly what a run would reject, and all of it at once.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import click

from ..errors import ConfigError
from .loader import RESERVED_TOP_LEVEL, ConfigFile, load_config_file, section_default_map
from .preprocess import check_preprocess_file, is_preprocess_file
from .suite import STEP_KINDS, SuiteFile, is_suite, step_default_map, suite_from_file


@dataclass
class CheckReport:
    path: str
    kind: str
    """'suite', 'run config', 'preprocessing spec' or 'unreadable'."""
    errors: List[ConfigError] = field(default_factory=list)
    details: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def check_file(path: "str | Path", commands: Mapping[str, click.Command],
               env: Optional[Mapping[str, str]] = None) -> CheckReport:
    """Check `path` against `commands` (name -> click command of this mi)."""
    try:
        config = load_config_file(path)
    except ConfigError as exc:  # unreadable: YAML syntax, missing file, unsupported version
        return CheckReport(str(path), "unreadable", [exc])
    if is_suite(config):
        report = _check_suite(config, commands, env)
    elif is_preprocess_file(config) and not any(k in commands for k in config.data):
        report = CheckReport(str(config.path), "preprocessing spec")
        spec = check_preprocess_file(config, report.errors)
        report.details.append("keys: " + ", ".join(spec) if spec else "no keys: images are taken as they are")
    else:
        report = _check_run_config(config, commands)
    report.errors = _by_line(report.errors)
    return report


def _by_line(errors: List[ConfigError]) -> List[ConfigError]:
    """Errors in file order, one per line: a value that failed interpolation is not reported again
    when it is then converted."""
    def line(error: ConfigError) -> int:
        match = re.match(r".*?:(\d+): ", error.message)
        return int(match.group(1)) if match else 0

    kept: Dict[int, ConfigError] = {}
    for error in errors:
        kept.setdefault(line(error), error)
    return [kept[k] for k in sorted(kept)]


def _check_suite(config: ConfigFile, commands: Mapping[str, click.Command],
                 env: Optional[Mapping[str, str]]) -> CheckReport:
    report = CheckReport(str(config.path), "suite")
    suite = suite_from_file(SuiteFile(path=config.path, data=config.data, lines=config.lines), env, report.errors)
    step_commands = {k: c for k, c in commands.items() if k in STEP_KINDS}
    for step in suite.steps:
        step_default_map(suite, step, step_commands, report.errors)
        report.details.append(f"step '{step.name}' ({step.kind}) at line {step.line}")
    return report


def _check_run_config(config: ConfigFile, commands: Mapping[str, click.Command]) -> CheckReport:
    report = CheckReport(str(config.path), "run config")
    usable = {k: c for k, c in commands.items() if not isinstance(c, click.Group)}
    known = list(RESERVED_TOP_LEVEL) + list(usable)
    sections = []
    for key in config.data:
        name = str(key)
        if name in known:
            if name not in RESERVED_TOP_LEVEL:
                sections.append(name)
            continue
        if name in STEP_KINDS:
            report.errors.append(config.error((name,), f"section for 'mi {name}', which this mi does not have",
                                              hint="upgrade model-inspector"))
            continue
        close = difflib.get_close_matches(name, known, n=1)
        report.errors.append(config.error((name,), "unknown section",
                                          hint=f"did you mean '{close[0]}'?" if close else f"sections: {', '.join(known)}"))
    seen = set()
    targets = sections or [n for n in usable if n in STEP_KINDS][:1] or list(usable)[:1]
    for name in targets:  # with only `defaults:`, check its keys against one command and the rest
        errors: List[ConfigError] = []
        try:
            section_default_map(config, name, usable[name], {k: c for k, c in usable.items() if k != name}, errors)
        except ConfigError as exc:  # a section that is not a mapping
            errors.append(exc)
        for error in errors:
            if str(error) not in seen:  # `defaults:` is checked once per section
                seen.add(str(error))
                report.errors.append(error)
    report.details.append("sections: " + (", ".join(sections) if sections else "none (defaults only)"))
    return report
