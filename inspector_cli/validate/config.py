"""`ValidateConfig`: what `mi validate` checks and how findings are levelled, resolved and frozen."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

from ..core.runner import RuntimeConfig
from ..errors import UsageError
from ..results.base import Severity

LEVELS = ("error", "warning", "info", "off")


@dataclass(frozen=True)
class InputRange:
    """`--input-range NAME:LO,HI`: the values an input really takes (name '' = every input)."""

    name: str
    low: float
    high: float

    def describe(self) -> str:
        return f"{self.name + ':' if self.name else ''}{self.low:g},{self.high:g}"


@dataclass(frozen=True)
class ValidateConfig:
    """Settings of a validation; every field has the CLI flag of the same name."""

    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    fail_on: Severity = Severity.ERROR
    disable: Tuple[str, ...] = ()
    """Rule IDs switched off (patterns already expanded)."""
    severity: Tuple[Tuple[str, Severity], ...] = ()
    """(rule ID, new severity) overrides."""
    input_ranges: Tuple[InputRange, ...] = ()
    against: Optional[str] = None
    min_weight_sqnr: float = 20.0
    large_initializer_mb: float = 256.0
    strict: bool = False
    """onnx's checker's view where it and onnxruntime disagree (an operator only onnxruntime registers, a
    declared shape inference contradicts, a graph output without a shape field): errors, even when
    onnxruntime loads the model. Off: such findings follow onnxruntime (warning or info when it loads)."""

    def severity_of(self, rule_id: str, default: Severity) -> Severity:
        for rid, level in self.severity:
            if rid == rule_id:
                return level
        return default

    def enabled(self, rule_id: str) -> bool:
        return rule_id not in self.disable

    def to_dict(self) -> Dict[str, Any]:
        return {
            "runtime": self.runtime.to_dict(),
            "fail_on": self.fail_on.value,
            "disable": list(self.disable),
            "severity": {rid: level.value for rid, level in self.severity},
            "input_ranges": [r.describe() for r in self.input_ranges],
            "against": self.against,
            "min_weight_sqnr": self.min_weight_sqnr,
            "large_initializer_mb": self.large_initializer_mb,
            "strict": self.strict,
        }


def _rule_ids(pattern: str, flag: str) -> Tuple[str, ...]:
    from .catalog import RULES, expand_pattern

    ids = expand_pattern(pattern)
    if not ids:
        close = difflib.get_close_matches(pattern.strip().upper(), list(RULES), n=1)
        raise UsageError(f"{flag} {pattern}: no such rule",
                         hint=f"did you mean {close[0]}?" if close else "see 'mi validate --list-rules'")
    return tuple(ids)


def parse_rule_settings(disable: Sequence[str], severity: Sequence[str]
                        ) -> Tuple[Tuple[str, ...], Tuple[Tuple[str, Severity], ...]]:
    """`--disable MI305|MI3xx|hints` and `--severity MI210=error` (level `off` disables) to frozen settings."""
    disabled: Dict[str, None] = {}
    for pattern in disable:
        for part in str(pattern).split(","):
            if part.strip():
                disabled.update(dict.fromkeys(_rule_ids(part, "--disable")))
    levels: Dict[str, Severity] = {}
    for item in severity:
        target, sep, level = str(item).rpartition("=")
        level = level.strip().lower()
        level = "off" if level in ("false", "no") else level  # YAML 1.1 reads a bare `off` as false
        if not sep or level not in LEVELS:
            raise UsageError(f"--severity {item}: expected RULE=LEVEL with LEVEL one of {', '.join(LEVELS)}")
        for rid in _rule_ids(target, "--severity"):
            if level == "off":
                disabled[rid] = None
            else:
                levels[rid] = Severity(level)
    return tuple(disabled), tuple(levels.items())


def parse_input_range(text: str) -> InputRange:
    """'NAME:LO,HI', 'NAME=LO,HI' (YAML mappings) or 'LO,HI' (every input). Names may contain ':'."""
    raw = str(text).strip()
    sep = "=" if "=" in raw else ":"
    name, found, numbers = raw.rpartition(sep)
    if not found:
        name, numbers = "", raw
    low_text, comma, high_text = numbers.partition(",")
    try:
        low, high = float(low_text), float(high_text)
    except ValueError:
        raise UsageError(f"--input-range {text}: expected NAME:LO,HI (e.g. input:0,255)") from None
    if not comma or not low < high:
        raise UsageError(f"--input-range {text}: expected LO < HI (e.g. input:0,255)")
    return InputRange(name.strip(), low, high)
