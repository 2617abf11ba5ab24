"""`RemedyConfig`: the options of `--fallback-plan` (compare, nan-bisect), beside its engine like every command's config."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..errors import ConfigError
from .evaluate import Target, parse_target


@dataclass(frozen=True)
class RemedyConfig:
    """What a fallback plan must reach and how far it may go.

    `targets` are strings such as 'cosine>=0.995' or 'top1>=0.99' (parsed and checked here, so the
    Python API refuses what the CLI refuses); `max_nodes` bounds the float set, `max_runs` the
    full-model evaluations; `write_model` / `exclude_list` are where the patched model and the node list go.
    """

    targets: Tuple[str, ...] = ("cosine>=0.995",)
    max_nodes: int = 10
    max_runs: int = 50
    """50, not 30: at 30 the zoo's int8 MobileNetV2 (per-tensor and per-channel) and ConvNeXt missed the
    halfway target that 45 reaches on all four CNN QDQ variants (issue 29; docs/remedy.md, 'Budget')."""
    sensitivity_top: Optional[int] = None
    """Candidates measured one by one; None: as many as `max_runs` leaves beside the greedy search, at
    least 12 (fallback.plan_fallback)."""
    prune: bool = True
    write_model: Optional[Path] = None
    exclude_list: Optional[Path] = None

    def __post_init__(self) -> None:
        if not self.targets:
            raise ConfigError("--target: give at least one target, e.g. --target 'cosine>=0.995'")
        for text in self.targets:
            parse_target(text)  # raises a one-line usage error naming the target
        if self.max_nodes < 1:
            raise ConfigError(f"--max-nodes: must be at least 1, got {self.max_nodes}")
        if self.max_runs < 3:
            raise ConfigError(f"--max-runs: must be at least 3 (reference, baseline, one step), got {self.max_runs}")
        if self.exclude_list is not None and Path(self.exclude_list).suffix.lower() not in (".json", ".yaml", ".yml"):
            raise ConfigError(f"--exclude-list {self.exclude_list}: write .json, .yaml or .yml")

    def parsed_targets(self) -> Tuple[Target, ...]:
        return tuple(parse_target(text) for text in self.targets)

    def to_dict(self) -> Dict[str, Any]:
        return {"targets": list(self.targets), "max_nodes": self.max_nodes, "max_runs": self.max_runs,
                "sensitivity_top": self.sensitivity_top, "prune": self.prune,
                "write_model": str(self.write_model) if self.write_model else None,
                "exclude_list": str(self.exclude_list) if self.exclude_list else None}


@dataclass(frozen=True)
class RemedyRequest:
    """What `mi compare` should compute beyond the comparison: a fallback plan (`fallback`), the
    optimiser bisection, accuracy against a label file with its gates."""

    fallback: Optional[RemedyConfig] = None
    bisect_optimizers: bool = False
    labels: Optional[Path] = None
    min_accuracy: Optional[float] = None
    max_accuracy_drop: Optional[float] = None
    simulated: bool = False
    """Also run MODEL_B with optimisations off (QDQ arithmetic) and set it beside the deployed kernels."""

    def __post_init__(self) -> None:
        if self.labels is None and (self.min_accuracy is not None or self.max_accuracy_drop is not None):
            flag = "--min-accuracy" if self.min_accuracy is not None else "--max-accuracy-drop"
            raise ConfigError(f"{flag} needs --labels FILE")
        for flag, value in (("--min-accuracy", self.min_accuracy), ("--max-accuracy-drop", self.max_accuracy_drop)):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ConfigError(f"{flag}: a fraction between 0 and 1 (0.015 = 1.5 points), got {value:g}")

    @property
    def active(self) -> bool:
        return self.fallback is not None or self.bisect_optimizers or self.labels is not None or self.simulated


@dataclass(frozen=True)
class FixConfig:
    """`mi fix`: what the plan must reach, which remedies it may use, how far it may search, where it goes.

    The samples, runtime and output pairing are a `CompareConfig` (`compare`: fix builds on compare's
    pairing); `calibration` is the folder(s) another calibration is measured on (default: the samples).
    """

    compare: Any
    """compare.config.CompareConfig (inputs, synthetic, runtime, output map, reader options)."""
    targets: Tuple[str, ...] = ("cosine>=0.995",)
    remedies: Tuple[str, ...] = ()
    """Empty: every remedy (remedies.COST_ORDER)."""
    labels: Optional[Path] = None
    calibration: Tuple[str, ...] = ()
    max_nodes: int = 10
    max_runs: int = 50
    write_model: Optional[Path] = None
    export: Optional[Path] = None
    exclude_list: Optional[Path] = None
    journal: Optional[Path] = None
    resume: bool = False
    workers: int = 0
    polish: int = 0
    """Runs `--polish` may spend raising the metrics of a plan that meets the targets (remedy/polish.py)."""

    def __post_init__(self) -> None:
        if self.polish < 0:
            raise ConfigError(f"--polish: runs must be 0 or more, got {self.polish}")
        RemedyConfig(targets=self.targets, max_nodes=self.max_nodes, max_runs=self.max_runs,
                     exclude_list=self.exclude_list)  # the shared checks, in the same words
        from .remedies import parse_remedies

        try:
            parse_remedies(self.remedies or ("float", "a16", "per-channel", "calibration"))
        except ValueError as exc:
            raise ConfigError(f"--remedies: {exc}") from exc
        if any(parse_target(t).on_labels for t in self.targets) and self.labels is None:
            raise ConfigError("--target acc1/acc5/acc1_drop/acc5_drop needs --labels FILE")
        if self.resume and self.journal is None:
            raise ConfigError("--resume needs --journal FILE (the trials of the search being resumed)")
        if self.export is not None and Path(self.export).suffix.lower() not in (".json", ".yaml", ".yml"):
            raise ConfigError(f"--export {self.export}: write .json, .yaml or .yml")

    def chosen_remedies(self) -> Tuple[str, ...]:
        from .remedies import COST_ORDER, parse_remedies

        return parse_remedies(self.remedies) if self.remedies else COST_ORDER

    def remedy_config(self) -> RemedyConfig:
        """The fallback-plan settings of the same run (the fp16 block list uses them)."""
        return RemedyConfig(targets=self.targets, max_nodes=self.max_nodes, max_runs=self.max_runs,
                            write_model=self.write_model, exclude_list=self.exclude_list)

    def to_dict(self) -> Dict[str, Any]:
        return {"targets": list(self.targets), "remedies": list(self.chosen_remedies()),
                "labels": str(self.labels) if self.labels else None, "calibration": list(self.calibration),
                "max_nodes": self.max_nodes, "max_runs": self.max_runs,
                "write_model": str(self.write_model) if self.write_model else None,
                "export": str(self.export) if self.export else None,
                "exclude_list": str(self.exclude_list) if self.exclude_list else None,
                "journal": str(self.journal) if self.journal else None, "resume": self.resume,
                "workers": self.workers, "polish": self.polish}
